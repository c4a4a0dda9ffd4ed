"""Secrets already in memory files: find them (``memsearch scan``) and take them out of journals
(``memsearch scan --redact``).

Why: redaction (:mod:`memsearch.redact`) keeps new secrets out, but journals written before it,
or by the original memsearch, may hold keys and are often committed to git. A scan reports where
(path, line, kind) and never the value, so its output is safe to paste anywhere.

``--redact`` rewrites only daily journals, which memsearch wrote: each one under the same lock the
journal writers take, as a temp file renamed over it (mode kept), so a reader sees the old or the
new file, never half, and a writer that waited for the lock appends to the new file
(``journal.append_entry`` checks the name still holds the file it locked). Hand-written notes
are the user's: they are reported, never rewritten.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memsearch.redact import Redactor

__all__ = ["Hit", "memory_files", "redact_journals", "scan_files"]


@dataclass(frozen=True)
class Hit:
    """One secret: where it starts (1-based line) and its kind; never its value."""

    path: Path
    line: int
    kind: str


def memory_files(paths: Iterable[str | Path]) -> list[Path]:
    """The markdown files named by ``paths`` (files as given, folders searched), sorted, no links."""
    found: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        candidates = [path] if path.is_file() else path.rglob("*.md") if path.is_dir() else []
        found.update(p for p in candidates if p.is_file() and not p.is_symlink())
    return sorted(found)


def _read(path: Path) -> str:
    """A memory file's text, opened without following a link or blocking on a FIFO swapped in
    since it was listed (``files.open_own``)."""
    from memsearch.files import open_own

    with os.fdopen(open_own(path, os.O_RDONLY), "rb") as fh:
        return fh.read().decode("utf-8", errors="replace")


def scan_files(files: Sequence[Path], redactor: Redactor) -> list[Hit]:
    """Every secret in ``files`` (private spans are the writer's choice, not a finding)."""
    hits: list[Hit] = []
    for path in files:
        text = _read(path)
        for found in redactor.findings(text):
            if found.kind != "private":
                hits.append(Hit(path, text.count("\n", 0, found.start) + 1, found.kind))
    return hits


def redact_journals(files: Sequence[Path], redactor: Redactor) -> dict[Path, int]:
    """Rewrite the journals among ``files`` without their secrets; items taken out per file."""
    from memsearch import redact
    from memsearch.engine.journal import is_journal
    from memsearch.files import atomic_write, exclusive, open_own

    done: dict[Path, int] = {}
    for path in files:
        if not is_journal(path):
            continue
        with os.fdopen(open_own(path, os.O_RDONLY), "rb") as fh, exclusive(fh):  # append_entry's lock
            text = fh.read().decode("utf-8", errors="replace")
            result = redactor.redact(text)
            secrets = {k: n for k, n in result.counts.items() if k != "private"}
            if not secrets:
                continue
            atomic_write(path, result.text, keep_mode=True, fsync=True)
        redact.record("scan", result.counts)
        done[path] = result.total
    return done
