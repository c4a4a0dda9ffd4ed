"""Secrets already in memory files: find them (``memsearch scan``) and take them out of journals
(``memsearch scan --redact``).

Why: redaction (:mod:`memsearch.redact`) keeps new secrets out, but journals written before it,
or by the original memsearch, may hold keys and are often committed to git. A scan reports where
(path, line, kind) and never the value, so its output is safe to paste anywhere.

``--redact`` rewrites only daily journals, which memsearch wrote; hand-written notes are the
user's: they are reported, never rewritten (``forget --secret`` takes a value out of them, kept
restorable). Cleaning never destroys: the command first lists what it will change (file, line,
kind, the value masked: :func:`redactions`), and each journal is kept as it was in a backup
(``memsearch scan --restore`` gives them back byte for byte). The rewrite is one change of
:mod:`memsearch.engine.forget_apply`: under the journal writers' lock, committed by an intent
record, each file a temp file renamed over it (mode kept), then the index refreshed and the store's
files rewritten without the old rows; a killed run is completed by the next ``scan``, ``forget``
or ``index``. Only secrets are replaced (``[REDACTED:<kind>]``, line breaks kept): a
``<private>`` span a person put in a journal stays.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.redact import Finding, Redactor

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.forget_apply import Outcome
    from memsearch.engine.interface import Memory

__all__ = ["Hit", "Redaction", "mask", "memory_files", "redact_journals", "redactions", "scan_files"]


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
    since it was listed (``files.open_own``); undecodable bytes kept as surrogates, so offsets
    map back to the file's bytes."""
    from memsearch.files import open_own

    with os.fdopen(open_own(path, os.O_RDONLY), "rb") as fh:
        return fh.read().decode("utf-8", errors="surrogateescape")


def scan_files(files: Sequence[Path], redactor: Redactor) -> list[Hit]:
    """Every secret in ``files`` (private spans are the writer's choice, not a finding)."""
    hits: list[Hit] = []
    for path in files:
        text = _read(path)
        for found in redactor.findings(text):
            if found.kind != "private":
                hits.append(Hit(path, text.count("\n", 0, found.start) + 1, found.kind))
    return hits


def mask(value: str) -> str:
    """A secret as a preview may show it: the first characters of a long one (its kind's prefix,
    ``ghp_``, ``sk-p``), never more, and its length."""
    keep = 4 if len(value) >= 20 else 0
    return f"{value[:keep]}***** ({len(value)} chars)"


@dataclass(frozen=True)
class Redaction:
    """One secret ``scan --redact`` takes out of a journal: where, its kind, the value masked."""

    path: Path
    line: int
    kind: str
    shown: str


def _secrets(text: str, redactor: Redactor) -> list[Finding]:
    return [f for f in redactor.findings(text) if f.kind != "private"]


def redactions(files: Sequence[Path], redactor: Redactor) -> list[Redaction]:
    """What ``scan --redact`` would take out of the journals among ``files`` (nothing is changed)."""
    from memsearch.engine.journal import is_journal

    found = []
    for path in files:
        if is_journal(path):
            text = _read(path)
            for f in _secrets(text, redactor):
                line = text.count("\n", 0, f.start) + 1
                found.append(Redaction(path, line, f.kind, mask(text[f.start : f.end])))
    return found


def redact_journals(
    files: Sequence[Path], redactor: Redactor, memory: Memory, cfg: MemSearchConfig, index_redactor: Redactor
) -> tuple[Outcome, dict[Path, int]]:
    """Rewrite the journals among ``files`` without their secrets, all or nothing, keeping each as it
    was in a backup (module docstring); what the change did, and the items taken out per file."""
    from memsearch import redact
    from memsearch.engine.backups import KeptFile
    from memsearch.engine.edits import plan_spans, transform
    from memsearch.engine.forget_apply import (
        Change,
        Intent,
        Outcome,
        cache_keys,
        texts_gone,
    )
    from memsearch.engine.journal import is_journal
    from memsearch.files import locked

    change = Change(Intent(os.urandom(8).hex(), []), command="scan", what="scan --redact")
    done: dict[Path, int] = {}
    counts: dict[str, int] = {}
    keys: set[str] = set()
    with contextlib.ExitStack() as stack:
        for given in files:
            if not is_journal(given):
                continue
            path = given.resolve()  # as the index names it
            fh = stack.enter_context(locked(path))  # append_entry's lock
            if fh is None:
                continue
            fh.seek(0)
            raw = fh.read()
            text = raw.decode("utf-8", errors="surrogateescape")
            found = _secrets(text, redactor)
            if not found:
                continue
            spans = [(_at(text, f.start), _at(text, f.end), _label(text, f)) for f in found]
            edit = plan_spans(path, raw, spans, "journal")
            new = transform(edit, raw) or b""
            gone, indexed = texts_gone(memory, path, raw, new, cfg, index_redactor)
            keys |= gone
            change.held.append((edit, fh))
            change.intent.files.append(edit)
            change.kept.append(KeptFile(path, raw, new, indexed=indexed))
            done[given] = len(found)
            for f in found:
                counts[f.kind] = counts.get(f.kind, 0) + 1
        if not change.held:
            return Outcome((), (), 0, 0), {}
        change.intent.cache_keys = sorted(cache_keys(memory, keys))
        change.commit()
    outcome = change.finish(cfg)
    redact.record("scan", counts)
    return outcome, done


def _at(text: str, index: int) -> int:
    """The byte offset of character ``index`` (the file as read: undecodable bytes kept)."""
    return len(text[:index].encode("utf-8", errors="surrogateescape"))


def _label(text: str, found: Finding) -> str:
    """What a secret becomes: its kind's placeholder, with its line breaks (line numbers stay)."""
    return f"[REDACTED:{found.kind}]" + "\n" * text.count("\n", found.start, found.end)
