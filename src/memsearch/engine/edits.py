"""One edit of one file, planned under its lock and applied later, at most once: what ``forget``,
``forget --secret`` and ``scan --redact`` change, and what their intent records hold.

Why one kind of edit: each of those commands changes several files, all or nothing, and a process
killed half way must be completed by the next ``forget``, ``index`` or ``scan`` from a record that
holds no memory text (``memsearch.engine.forget_apply``). So an edit names positions, never
content: line ranges to drop, or byte spans to replace with a fixed label. It applies only while the
file's first bytes, up to the last position it touches, hash as they did when it was planned:
journal writers only append, which keeps that; an applied edit does not, so applying twice is
harmless.

How a file is changed depends on what it is (``kind``):

- ``journal``, ``note``: markdown memory. The new text is written as a temp file renamed over the
  old one (a reader sees either), under the lock every journal writer takes (``flock`` on the
  file); a writer that waited for it appends to the new file (``files.replaced``). A journal left
  with no entry is removed.
- ``log``: memsearch's own text (a log, the recall log, a state file), which another process may
  hold open for appending. Each span is overwritten in place with ``*`` of the same length, so the
  file keeps its inode and its writers lose nothing. Masking is idempotent, so the check hashes
  the prefix as it reads once masked.
- ``backup``: a kept original (``memsearch.engine.backups``): the spans are replaced with the label
  and recorded in the backup as holes that only the value given again can fill.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = [
    "FileEdit",
    "encode",
    "kept_lines",
    "plan_lines",
    "plan_spans",
    "split_keep",
    "transform",
]

MARKDOWN = ("journal", "note")
_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+\Z")
MASK = b"*"


def split_keep(text: str) -> list[str]:
    """``text`` as lines that keep their ``\\n`` (byte-exact when joined)."""
    return _LINE_RE.findall(text)


def encode(lines: Sequence[str]) -> bytes:
    return "".join(lines).encode("utf-8", errors="surrogateescape")


def decode(raw: bytes) -> list[str]:
    return split_keep(raw.decode("utf-8", errors="surrogateescape"))


@dataclass
class FileEdit:
    """The change of one file: drop the lines ``ranges`` (0-based, end exclusive), or replace the
    bytes ``spans`` (``(start, end, label)``; in a backup, of its body, and the label's form index
    instead), valid while the first ``prefix_bytes`` bytes hash to ``prefix_sha256`` (masked first,
    for a ``log``). ``secret`` (a ``backup`` edit): how the holes it makes are checked."""

    path: str
    kind: str
    prefix_bytes: int
    prefix_sha256: str
    ranges: list[tuple[int, int]] = field(default_factory=list)
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    secret: dict[str, str] | None = None

    @property
    def markdown(self) -> bool:
        return self.kind in MARKDOWN

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in vars(self).items() if v or k in ("prefix_bytes", "prefix_sha256")}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> FileEdit:
        """An edit from an intent record (a version-1 record's ``journal`` flag read as a kind)."""
        fields = dict(data)
        if "kind" not in fields:
            fields["kind"] = "journal" if fields.pop("journal", False) else "note"
        fields["ranges"] = [tuple(r) for r in fields.get("ranges", [])]  # type: ignore[attr-defined]
        fields["spans"] = [tuple(s) for s in fields.get("spans", [])]  # type: ignore[attr-defined]
        return cls(**fields)  # type: ignore[arg-type]


def _digest(raw: bytes, size: int) -> str:
    return hashlib.sha256(raw[:size]).hexdigest()


def kept_lines(lines: Sequence[str], ranges: Sequence[tuple[int, int]]) -> list[str]:
    gone = {i for start, end in ranges for i in range(start, end)}
    return [line for i, line in enumerate(lines) if i not in gone]


def plan_lines(path: Path, raw: bytes, ranges: Sequence[tuple[int, int]], kind: str) -> FileEdit:
    """Dropping the lines ``ranges`` of ``raw`` (the file's bytes now)."""
    lines = decode(raw)
    size = len(encode(lines[: max(end for _, end in ranges)]))
    return FileEdit(str(path), kind, size, _digest(raw, size), ranges=sorted(ranges))


def plan_spans(
    path: Path,
    raw: bytes,
    spans: Sequence[tuple[int, int, str]],
    kind: str,
    secret: dict[str, str] | None = None,
) -> FileEdit:
    """Replacing the byte spans of ``raw`` (sorted, not overlapping) with their labels."""
    ordered = sorted(spans)
    # a kept original is never appended to: all of it
    size = len(raw) if kind == "backup" else max(end for _, end, _ in ordered)
    basis = _masked(raw, ordered) if kind == "log" else raw
    return FileEdit(str(path), kind, size, _digest(basis, size), spans=ordered, secret=secret)


def _masked(raw: bytes, spans: Sequence[tuple[int, int, str]]) -> bytes:
    out = bytearray(raw)
    for start, end, _ in spans:
        if end <= len(out):
            out[start:end] = MASK * (end - start)
    return bytes(out)


def _replaced(raw: bytes, spans: Sequence[tuple[int, int, str]]) -> bytes:
    parts, at = [], 0
    for start, end, label in spans:
        parts += [raw[at:start], label.encode("utf-8")]
        at = end
    parts.append(raw[at:])
    return b"".join(parts)


def _empty_journal(lines: Sequence[str]) -> bool:
    """A journal with nothing left but blank lines and its ``# date`` title: removed, not kept."""
    return all(not line.strip() or line.startswith("# ") for line in lines)


def applies(edit: FileEdit, raw: bytes) -> bool:
    """Whether ``raw`` (the file now) is what ``edit`` was planned on (not yet applied)."""
    if len(raw) < edit.prefix_bytes:
        return False
    basis = _masked(raw, edit.spans) if edit.kind == "log" else raw
    if _digest(basis, edit.prefix_bytes) != edit.prefix_sha256:
        return False
    return edit.kind != "log" or basis != raw  # a masked log: nothing left to do


def transform(edit: FileEdit, raw: bytes) -> bytes | None:
    """What the file holds after ``edit`` (``raw``: what it holds now, :func:`applies`); None: the
    file goes (a journal left without entries)."""
    if edit.kind == "log":
        return _masked(raw, edit.spans)
    if edit.kind == "backup":
        from memsearch.engine.backups import scrub_blob

        return scrub_blob(raw, edit.spans, edit.secret or {})
    if edit.spans:
        return _replaced(raw, edit.spans)
    kept = kept_lines(decode(raw), edit.ranges)
    if edit.kind == "journal" and _empty_journal(kept):
        return None
    return encode(kept)


def apply_held(edit: FileEdit, fh: IO[bytes]) -> str:
    """Apply ``edit`` to the file ``fh`` (locked by the caller): "changed", "removed" or "" (not
    applicable: already applied, or the file changed otherwise)."""
    from memsearch.files import atomic_write

    fh.seek(0)
    raw = fh.read()
    if not applies(edit, raw):
        return ""
    new = transform(edit, raw)
    if new is None:
        os.unlink(edit.path)
        return "removed"
    if edit.kind == "log":  # in place: whoever holds it open for appending keeps writing to it
        for start, end, _ in edit.spans:
            os.pwrite(fh.fileno(), new[start:end], start)
        os.fsync(fh.fileno())
        return "changed"
    atomic_write(edit.path, new, keep_mode=True, fsync=True, private=edit.kind == "backup")
    return "changed"
