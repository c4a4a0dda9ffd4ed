"""Reading a transcript: which format a file is, and its turns with the warnings about anything
skipped.

A format is recognised by the file's magic bytes and tables (SQLite) or by the first JSONL entry
that one of the entry detectors accepts, in table order; nothing recognised raises
:class:`~memsearch.errors.UnknownTranscriptFormatError` (exit 3, so a caller can fall back to
reading the file itself).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memsearch.errors import SessionNotApplicableError, UnknownTranscriptFormatError
from memsearch.transcript.formats import FORMATS
from memsearch.transcript.model import Transcript, Turn
from memsearch.transcript.source import (
    DETECT_ENTRIES,
    UNKNOWN_FORMAT_MESSAGE,
    Entry,
    Source,
    check_path,
    read_head,
    read_jsonl,
    tables_if_sqlite,
)

__all__ = ["detect_format", "parse_transcript", "read_transcript"]


def _unknown_format(p: Path, detail: str = "") -> UnknownTranscriptFormatError:
    *first, last = sorted(fmt.label for fmt in FORMATS.values())
    what = detail or f"{p} is none of them"
    return UnknownTranscriptFormatError(
        UNKNOWN_FORMAT_MESSAGE, f"memsearch reads {', '.join(first)} and {last}; {what}"
    )


def _detect(
    head: bytes, entries: Sequence[Mapping[str, Any]], tables: frozenset[str] = frozenset()
) -> str | None:
    for name, fmt in FORMATS.items():
        if fmt.magic is not None and head.startswith(fmt.magic) and fmt.tables <= tables:
            return name
    for entry in entries[:DETECT_ENTRIES]:
        for name, fmt in FORMATS.items():
            if fmt.entry_matches is not None and fmt.entry_matches(entry):
                return name
    return None


def detect_format(source: str | os.PathLike[str] | Sequence[Mapping[str, Any]]) -> str:
    """The format name (a key of :data:`FORMATS`) of a transcript file, or of parsed JSONL entries.

    For a file, SQLite is told by its header bytes; JSONL by its first entries. Raises
    :class:`~memsearch.errors.UnknownTranscriptFormatError` when nothing matches.
    """
    if isinstance(source, (str, os.PathLike)):
        p = check_path(source)
        head = read_head(p)
        entries: list[Entry] = []
        if not any(fmt.magic is not None and head.startswith(fmt.magic) for fmt in FORMATS.values()):
            entries, _ = read_jsonl(p, [], limit=DETECT_ENTRIES)
        name = _detect(head, [e for _, e in entries], tables_if_sqlite(p, head))
        if name is None:
            raise _unknown_format(p)
        return name
    name = _detect(b"", source)
    if name is None:
        raise UnknownTranscriptFormatError(UNKNOWN_FORMAT_MESSAGE, "the entries match no known format")
    return name


def read_transcript(path: str | os.PathLike[str], *, session: str | None = None) -> Transcript:
    """Read a transcript file into turns, with the warnings about anything skipped.

    ``session`` picks the session of an OpenCode or OpenClaw database (exact id or unique prefix);
    it may be left out when the database holds one session. It is an error for JSONL files.
    """
    p = check_path(path)
    head = read_head(p)
    warnings: list[str] = []
    entries: list[Entry] = []
    nonblank = True
    if not any(fmt.magic is not None and head.startswith(fmt.magic) for fmt in FORMATS.values()):
        entries, nonblank = read_jsonl(p, warnings)
    name = _detect(head, [e for _, e in entries], tables_if_sqlite(p, head))
    if name is None:
        if not nonblank:  # nothing written yet (or nothing readable: the warnings say why)
            return Transcript(p, None, [], warnings or [f"{p} is empty"])
        raise _unknown_format(p)
    fmt = FORMATS[name]
    if session is not None and not fmt.has_sessions:
        raise SessionNotApplicableError(
            f"--session applies only to OpenCode and OpenClaw databases; {p} is a {fmt.label} transcript",
            "leave out --session (a JSONL transcript holds one session)",
        )
    src = Source(p, entries, session, warnings, unknown_format=functools.partial(_unknown_format, p))
    turns = fmt.parse(src)
    return Transcript(p, name, turns, warnings, src.session_shown)


def parse_transcript(path: str | os.PathLike[str], *, session: str | None = None) -> list[Turn]:
    """The turns of a transcript file (see :func:`read_transcript` for the warnings too)."""
    return read_transcript(path, session=session).turns
