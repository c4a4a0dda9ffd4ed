"""Reading a transcript file leniently, and the input every format parser works from.

Transcripts are read while the agent may still be writing them, and may hold bytes that are not
UTF-8: each JSONL line is decoded on its own with replacement, a half-written final line is skipped,
and both become warnings on the :class:`Source` instead of failing the whole read. A JSONL file
stored as concatenated zstd frames (DeepSeek Harness's ``session.jsonl.zstd``) is read the same way
once decompressed; a frame cut short by a writer still at work gives what it holds, with a warning.
SQLite containers of many sessions (OpenCode, OpenClaw) pick one session here, the same way for both.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import (
    OpenCodeSessionError,
    TranscriptNotFoundError,
    TranscriptReadError,
    UnknownTranscriptFormatError,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "DETECT_ENTRIES",
    "SQLITE_MAGIC",
    "UNKNOWN_FORMAT_MESSAGE",
    "ZSTD_MAGIC",
    "Entry",
    "Source",
    "check_path",
    "choose_session",
    "read_head",
    "read_jsonl",
    "sqlite_tables",
    "tables_if_sqlite",
    "zstd_decompress",
    "zstd_frames",
]

UNKNOWN_FORMAT_MESSAGE = (
    "Unrecognized transcript format. Read the file directly to locate the relevant turns."
)
SQLITE_MAGIC = b"SQLite format 3\x00"
#: The first bytes of a zstd frame.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
DETECT_ENTRIES = 80  # entries inspected for detection, as in the original


def _unknown(detail: str) -> UnknownTranscriptFormatError:
    return UnknownTranscriptFormatError(UNKNOWN_FORMAT_MESSAGE, detail)


Entry = tuple[int, dict[str, Any]]  # (1-based line number, parsed JSON object)


@dataclass
class Source:
    """Everything a parser may need; parsers append to ``warnings``."""

    path: Path
    entries: list[Entry]
    session: str | None
    warnings: list[str]
    session_shown: str | None = None
    #: Builds the error for a file that turns out not to be this format (``detail`` says why); the
    #: reader passes one that lists every known format (the parsers cannot import the table).
    unknown_format: Callable[[str], UnknownTranscriptFormatError] = field(default=_unknown, repr=False)


def check_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise TranscriptNotFoundError(
            f"transcript not found: {p}",
            "check the path; Claude Code keeps sessions in ~/.claude/projects/, Codex in "
            "~/.codex/sessions/, OpenCode in ~/.local/share/opencode/opencode.db, DeepSeek Harness "
            "in ~/.dsh/sessions/",
        )
    if not p.is_file():
        raise TranscriptNotFoundError(f"not a transcript file: {p}", "pass the path of a session file")
    return p


def read_head(p: Path) -> bytes:
    try:
        with p.open("rb") as f:
            return f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TranscriptReadError(f"cannot read transcript {p}: {exc.strerror or exc}") from exc


def _zstd() -> Any:
    """The zstd module: the standard library's (Python 3.14+) or its backport (a dependency of
    memsearch on older Pythons)."""
    try:
        from compression import zstd  # Python 3.14+
    except ImportError:
        try:
            from backports import zstd
        except ImportError:
            raise TranscriptReadError(
                "reading zstd-compressed transcripts needs the backports.zstd package",
                "install it into memsearch's environment: pip install backports.zstd "
                "(memsearch lists it as a dependency on Python < 3.14)",
            ) from None
    return zstd


def zstd_decompress(data: bytes) -> bytes:
    """One zstd-compressed value (all its frames); raises the module's ``ZstdError`` if damaged."""
    plain: bytes = _zstd().decompress(data)
    return plain


def zstd_frames(data: bytes) -> tuple[bytes, str]:
    """The text of concatenated zstd frames, frame by frame, and a problem ("" if none).

    A writer appends one frame per batch; a frame it has not finished (or a damaged one) ends the
    read with what was decoded so far, so the complete frames before it are never lost.
    """
    zstd = _zstd()
    out: list[bytes] = []
    rest = data
    while rest:
        decompressor = zstd.ZstdDecompressor()
        try:
            out.append(decompressor.decompress(rest))
        except zstd.ZstdError as exc:
            done = len(data) - len(rest)
            return b"".join(out), f"cannot decompress past byte {done} ({exc}); read what came before"
        if not decompressor.eof:
            return b"".join(out), "the last compressed frame is incomplete (the session may still be writing)"
        rest = decompressor.unused_data
    return b"".join(out), ""


def _lines(f: io.BufferedReader, p: Path, warnings: list[str]) -> Iterable[bytes]:
    """The raw lines of an open JSONL file, decompressed first when it is a zstd stream."""
    if f.peek(len(ZSTD_MAGIC))[: len(ZSTD_MAGIC)] != ZSTD_MAGIC:
        return f
    plain, problem = zstd_frames(f.read())
    if problem:
        warnings.append(f"{p}: {problem}")
    return io.BytesIO(plain)


def read_jsonl(p: Path, warnings: list[str], limit: int | None = None) -> tuple[list[Entry], bool]:
    """Parse JSONL leniently: per-line UTF-8 with replacement, bad lines counted, a torn tail skipped.

    Returns the entries and whether the file had any non-blank line (an empty file is not an
    unknown format, just a session with nothing in it yet). A zstd-compressed file is read
    decompressed (byte offsets in warnings are then offsets in the decompressed text).
    """
    entries: list[Entry] = []
    bad_utf8: list[tuple[int, int]] = []  # (line, byte offset)
    malformed: list[int] = []
    torn_tail = 0
    nonblank = False
    offset = 0
    try:
        with p.open("rb") as f:
            for lineno, raw in enumerate(_lines(f, p, warnings), 1):
                start, offset = offset, offset + len(raw)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    bad_utf8.append((lineno, start + exc.start))
                    text = raw.decode("utf-8", errors="replace")
                if lineno == 1:
                    text = text.lstrip("\ufeff")
                if not text.strip():
                    continue
                nonblank = True
                try:
                    obj = json.loads(text)
                except (ValueError, RecursionError):  # RecursionError: nested thousands deep
                    if not raw.endswith(b"\n"):
                        torn_tail = len(raw)  # the writer has not finished this line
                    else:
                        malformed.append(lineno)
                    continue
                if isinstance(obj, dict):
                    entries.append((lineno, obj))
                else:
                    malformed.append(lineno)
                if limit is not None and len(entries) >= limit:
                    break
    except TranscriptReadError:
        raise
    except OSError as exc:
        raise TranscriptReadError(f"cannot read transcript {p}: {exc.strerror or exc}") from exc
    if bad_utf8:
        line, byte = bad_utf8[0]
        more = f" (and {len(bad_utf8) - 1} more lines)" if len(bad_utf8) > 1 else ""
        warnings.append(
            f"{p}: invalid UTF-8 at byte offset {byte} (line {line}){more}; the bad bytes were replaced"
        )
    if malformed:
        what = "line that is not a JSON object" if len(malformed) == 1 else "lines that are not JSON objects"
        warnings.append(f"{p}: skipped {len(malformed)} {what} (first: line {malformed[0]})")
    if torn_tail:
        warnings.append(
            f"{p}: the last line is incomplete ({torn_tail} bytes, no newline; the session may still "
            "be writing it) and was skipped"
        )
    return entries, nonblank


def sqlite_tables(p: Path) -> frozenset[str]:
    """The table names of a SQLite file (empty when it cannot be read): which SQLite format it is."""
    import sqlite3

    try:
        con = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return frozenset()
    try:
        return frozenset(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    except sqlite3.Error:
        return frozenset()
    finally:
        con.close()


def tables_if_sqlite(p: Path, head: bytes) -> frozenset[str]:
    return sqlite_tables(p) if head.startswith(SQLITE_MAGIC) else frozenset()


def choose_session(src: Source, con: sqlite3.Connection, newest_first: str, what: str) -> str | None:
    """The session of a host database to show (``newest_first`` lists its ids, newest first),
    recorded on ``src`` for the caller's header; None for an empty database."""
    session = pick_session(src, [str(row[0]) for row in con.execute(newest_first)], what)
    src.session_shown = session
    return session


def pick_session(src: Source, sessions: list[str], what: str) -> str | None:
    """The session to show: the one asked for (exact or unique prefix), or the only one there is."""
    recent = ", ".join(sessions[:5]) + (", ..." if len(sessions) > 5 else "")
    if src.session is None:
        if len(sessions) <= 1:
            return sessions[0] if sessions else None
        raise OpenCodeSessionError(
            f"{src.path} holds {len(sessions)} {what} sessions; choose one with --session",
            f"most recent first: {recent}",
        )
    if src.session in sessions:
        return src.session
    matches = [s for s in sessions if s.startswith(src.session)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise OpenCodeSessionError(
            f"--session {src.session!r} matches {len(matches)} sessions in {src.path}",
            f"give more of the id: {', '.join(matches[:5])}",
        )
    raise OpenCodeSessionError(
        f"no {what} session {src.session!r} in {src.path}",
        f"sessions in this database, most recent first: {recent}" if sessions else "the database is empty",
    )
