"""Removing memory everywhere it lives, all or nothing: the files, then what is derived from them.

The markdown files are the truth; the Milvus rows, the embedding cache, the index manifest and the
``~/.memsearch/written`` record of transcripts are derived from them. ``forget`` (blocks of
journals and notes), ``forget --secret`` (a value, wherever memsearch keeps text) and
``scan --redact`` (secrets in journals) each plan their edits (:mod:`memsearch.engine.edits`) and
hand them here, where one change is:

1. **Plan**, holding the lock each file's writers take (``files.locked``) on every file it changes:
   check the file is still what was shown, work out the edits and the cache keys of the chunk
   texts that go. Keep the hand-written notes it rewrites as a pending backup
   (:mod:`memsearch.engine.backups`).
2. **Commit**: write an intent record, ``~/.memsearch/forget/<id>.json`` (private, written as a
   temp file renamed into place, fsynced). It holds file names, positions and hashes, never the
   text. Before this point nothing has changed.
3. **Apply** each edit (it applies once: ``edits.applies``). A writer that waited for the lock
   sees the name now holds another file and appends to the new one (``files.replaced``).
4. **Finish**: publish the backup, delete the cache entries (``secure_delete`` on, WAL
   checkpointed, so the vectors' bytes leave the cache files), drop the transcripts no remaining
   anchor names from the written record, drop the files from the manifest, reindex the changed
   ones and delete the rows of the removed ones (through the store's owner: the memory service when
   one runs), have the store rewrite its files without the deleted rows (``Memory.purge``: Milvus
   Lite keeps them in its data files otherwise), delete the cache entries once more (a watcher may
   have embedded the old text meanwhile), and remove the intent record.

A process killed anywhere leaves the intent record or nothing. :func:`recover`, which ``forget``,
``index`` and ``scan`` run first, completes every record it finds (steps 3 and 4 again, each
harmless when already done), and every restore of a backup a killed process committed. So the
files are either as before or, after the next of those commands, as after.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memsearch.engine.edits import FileEdit, apply_held, plan_lines, split_keep, transform
from memsearch.engine.forget import Block, block_digest, chunk_text, entries, session_headings
from memsearch.engine.journal import is_journal

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.backups import KeptFile, Staged
    from memsearch.engine.interface import Memory
    from memsearch.redact import Redactor

__all__ = [
    "Change",
    "Outcome",
    "cache_keys",
    "contents",
    "finish",
    "forget_blocks",
    "pending",
    "recover",
    "reindex_restored",
    "stored_contents",
    "texts_gone",
]

INTENT_VERSION = 2
#: Test-only: ``stage:seconds`` pauses a forget at ``locked``, ``committed`` or ``applied`` (after the
#: first file) so a test can kill it there or write beside it. Never set it otherwise.
PAUSE_ENV = "MEMSEARCH_TEST_FORGET_PAUSE"


@dataclass
class Intent:
    """One committed change (see the module docstring); JSON in ``~/.memsearch/forget/``.
    ``backup``: the pending backup it publishes; ``reindex``: files whose rows held what went
    although the change did not edit them (indexed again, or their rows removed when gone)."""

    id: str
    files: list[FileEdit]
    cache_keys: list[str] = field(default_factory=list)
    #: memory folder -> transcript paths the removed entries' anchors named
    transcripts: dict[str, list[str]] = field(default_factory=dict)
    backup: str = ""
    reindex: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        data: dict[str, Any] = {"version": INTENT_VERSION, **vars(self)}
        data["files"] = [f.to_dict() for f in self.files]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Intent:
        data = json.loads(text)
        if data.get("version") not in (1, INTENT_VERSION):  # 1: before kinds, spans and backups
            raise ValueError(f"unknown forget record version {data.get('version')!r}")
        files = [FileEdit.from_dict(f) for f in data["files"]]
        return cls(
            str(data["id"]),
            files,
            list(data["cache_keys"]),
            dict(data["transcripts"]),
            str(data.get("backup", "")),
            list(data.get("reindex", [])),
        )


@dataclass(frozen=True)
class Outcome:
    """What one change did: markdown files rewritten, journals removed, other files of memsearch's
    cleaned (``scrubbed``), cache vectors deleted, chunks embedded again, what the store's purge
    did, and the backup that keeps the notes it changed ("" for none)."""

    changed: tuple[str, ...]
    removed: tuple[str, ...]
    cache_deleted: int
    reindexed_chunks: int
    scrubbed: tuple[str, ...] = ()
    purged: dict[str, int] = field(default_factory=dict)
    backup: str = ""


# --- the intent records -----------------------------------------------------------------------


def _intent_dir() -> Path:
    from memsearch import private

    return private.home_dir("forget")


def pending() -> list[Path]:
    """The intent records of forgets that did not finish (oldest first)."""
    from memsearch.config import memsearch_home

    if not (memsearch_home() / "forget").is_dir():
        return []  # never created: nothing to look at (``index`` asks on every run)
    return sorted(_intent_dir().glob("*.json"), key=lambda p: p.stat().st_mtime_ns)


def _commit(intent: Intent) -> Path:
    from memsearch.files import atomic_write

    path = _intent_dir() / f"{intent.id}.json"
    atomic_write(path, intent.to_json(), private=True, fsync=True)
    return path


def _pause(stage: str) -> None:
    """The test-only pause point (:data:`PAUSE_ENV`)."""
    wanted, _, seconds = os.environ.get(PAUSE_ENV, "").partition(":")
    if wanted == stage:
        print(f"memsearch: test pause at {stage}", file=sys.stderr, flush=True)
        time.sleep(float(seconds or 60))


# --- one change -------------------------------------------------------------------------------


@dataclass
class Change:
    """A change planned under its files' locks (held by the caller until :meth:`commit` returns):
    the intent, each edit with its open file, and the notes to keep (``kept``) with why."""

    intent: Intent
    held: list[tuple[FileEdit, IO[bytes]]] = field(default_factory=list)
    kept: list[KeptFile] = field(default_factory=list)
    command: str = "forget"
    what: str = "forget"
    _staged: Staged | None = None
    _record: Path | None = None

    def commit(self) -> None:
        """Steps 2 and 3 of the module docstring, the locks still held: keep the notes as a
        pending backup (its lock held until :meth:`finish` publishes it, so no tidying process
        takes it for an abandoned one), commit the intent, apply every edit."""
        from memsearch.engine import backups

        if self.kept:
            self._staged = backups.stage(self.command, self.what, self.kept)
            self.intent.backup = self._staged.id
        _pause("locked")
        self._record = _commit(self.intent)
        _pause("committed")
        for k, (edit, fh) in enumerate(self.held):
            apply_held(edit, fh)
            if k == 0:
                _pause("applied")

    def finish(self, cfg: MemSearchConfig) -> Outcome:
        """Step 4 (after :meth:`commit`, the files' locks let go)."""
        assert self._record is not None
        try:
            return finish(self.intent, self._record, cfg)
        finally:
            if self._staged is not None:
                self._staged.close()


def forget_blocks(
    blocks: Sequence[Block], memory: Memory, cfg: MemSearchConfig, redactor: Redactor
) -> Outcome:
    """Remove ``blocks`` from their files, the index, the embedding cache, the manifest and the
    written record, all or nothing (module docstring); a hand-written note is kept first, for
    ``forget --undo``. ``memory`` reaches the store through its owner. Raises ForgetConflictError
    (nothing changed) when a file no longer holds a block."""
    from memsearch.engine.backups import KeptFile
    from memsearch.files import locked

    by_file: dict[Path, list[Block]] = {}
    for block in blocks:
        by_file.setdefault(block.path, []).append(block)
    change = Change(Intent(os.urandom(8).hex(), []))
    keys: set[str] = set()
    with contextlib.ExitStack() as stack:
        for path in sorted(by_file):
            fh = stack.enter_context(locked(path))
            if fh is None:
                _conflict(path)
            assert fh is not None
            fh.seek(0)
            raw = fh.read()
            lines = split_keep(raw.decode("utf-8", errors="surrogateescape"))
            for block in by_file[path]:
                if block.end > len(lines) or block_digest(lines, block.start, block.end) != block.digest:
                    _conflict(path)
            spans = {(b.start, b.end) for b in by_file[path]}
            journal = is_journal(path)
            if journal:
                spans |= set(session_headings(lines, spans))
            edit = plan_lines(path, raw, sorted(spans), "journal" if journal else "note")
            new = transform(edit, raw)
            change.held.append((edit, fh))
            change.intent.files.append(edit)
            gone, indexed = texts_gone(memory, path, raw, new or b"", cfg, redactor)
            keys |= gone
            if journal:
                named = [b.anchor.get(n, "") for b in by_file[path] for n in _TRANSCRIPT_FIELDS]
                folder = change.intent.transcripts.setdefault(str(path.parent), [])
                folder.extend(p for p in named if p and p not in folder)
            else:
                change.kept.append(KeptFile(path, raw, new or b"", indexed=indexed))
        change.intent.cache_keys = sorted(cache_keys(memory, keys))
        change.commit()
    return change.finish(cfg)


_TRANSCRIPT_FIELDS = ("transcript", "rollout", "db")


def _conflict(path: Path) -> None:
    from memsearch.errors import ForgetConflictError

    raise ForgetConflictError(
        f"{path} changed since it was read (nothing was forgotten)",
        hint="run the same `memsearch forget` again: it will show what is there now",
    )


def contents(raw: bytes, path: Path, cfg: MemSearchConfig, redactor: Redactor) -> set[str]:
    """The chunk texts ``index`` makes of a markdown file's bytes ``raw``."""
    from memsearch.errors import MemSearchError

    try:
        chunks = chunk_text(raw, str(path), cfg.chunking.max_chunk_size, cfg.chunking.overlap_lines, redactor)
    except MemSearchError:  # not text (never indexed either)
        return set()
    return {c.content for c in chunks}


def texts_gone(
    memory: Memory, path: Path, raw: bytes, new: bytes, cfg: MemSearchConfig, redactor: Redactor
) -> tuple[set[str], bool]:
    """The chunk texts an edit of ``path`` from ``raw`` to ``new`` takes away (those the index holds
    and those the file held), and whether the index holds any of the file."""
    stored = stored_contents(memory, path)
    return (stored | contents(raw, path, cfg, redactor)) - contents(new, path, cfg, redactor), bool(stored)


def stored_contents(memory: Memory, path: Path) -> set[str]:
    """The chunk texts the index holds for ``path`` (what was embedded, whatever the file says now)."""
    return {str(r["content"]) for r in memory.query_chunks(str(path)) if r.get("source") == str(path)}


def cache_keys(memory: Memory, texts: Iterable[str]) -> set[str]:
    """The embedding cache's keys of chunk ``texts``, with whatever the configured embedder puts
    before a document's text ("" always included)."""
    from memsearch.chunker import clean_content_for_embedding
    from memsearch.embeddings.cache import text_key

    prefixes = {""}
    with contextlib.suppress(Exception):  # an unknown provider: its prefix cannot be asked
        prefixes.add(memory.embedder.document_text(""))  # type: ignore[attr-defined]
    return {text_key(p + clean_content_for_embedding(c)) for c in texts for p in prefixes}


# --- finishing, and completing a change a killed process left --------------------------------


def finish(intent: Intent, record: Path, cfg: MemSearchConfig) -> Outcome:
    """Step 4 of the module docstring (and steps 3-4 again for :func:`recover`)."""
    from memsearch.engine import backups
    from memsearch.files import locked

    changed: list[str] = []
    removed: list[str] = []
    scrubbed: list[str] = []
    for edit in intent.files:  # already applied by a running change; applied now by recover
        with locked(Path(edit.path)) as fh:
            done = apply_held(edit, fh) if fh is not None else ""
        if not edit.markdown:
            scrubbed.append(edit.path)
        elif done == "removed" or not Path(edit.path).exists():
            removed.append(edit.path)
        else:
            changed.append(edit.path)
    if intent.backup:
        backups.publish(intent.backup)
    deleted = _forget_cached(intent.cache_keys)
    _forget_transcripts(intent.transcripts)
    sources = [e.path for e in intent.files if e.markdown] + intent.reindex
    _drop_from_manifest(cfg, sources)
    chunks, purged = _reindex(cfg, sources)
    deleted += _forget_cached(intent.cache_keys)
    record.unlink(missing_ok=True)
    return Outcome(tuple(changed), tuple(removed), deleted, chunks, tuple(scrubbed), purged, intent.backup)


def _forget_cached(keys: Sequence[str]) -> int:
    from memsearch import private
    from memsearch.embeddings.cache import EmbeddingCache

    path = private.home() / "embedding-cache.sqlite"
    if not keys or not path.exists():
        return 0
    with EmbeddingCache(path) as cache:
        return cache.forget(keys)


def _forget_transcripts(by_folder: dict[str, list[str]]) -> None:
    """Unrecord the transcripts the removed entries named that no entry left in the folder names."""
    from memsearch.engine import written
    from memsearch.engine.forget import read_lines
    from memsearch.engine.journal import journal_files

    for folder, paths in by_folder.items():
        still: set[str] = set()
        for journal in journal_files(folder):
            with contextlib.suppress(OSError):
                for e in entries(read_lines(journal)):
                    still.update(e.anchor.get(n, "") for n in _TRANSCRIPT_FIELDS)
        written.forget_transcripts(Path(folder), [p for p in paths if p not in still])


def _drop_from_manifest(cfg: MemSearchConfig, sources: Sequence[str]) -> None:
    """Drop the files from the store's manifest, so the next ``index`` reads them whatever their stat."""
    from memsearch import private
    from memsearch.engine.manifest import manifest_path
    from memsearch.files import atomic_write
    from memsearch.store.uri import resolve_uri

    path = manifest_path(private.home(), resolve_uri(cfg.milvus.uri).uri, cfg.milvus.collection)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files = data["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if any(files.pop(s, None) is not None for s in list(sources)):
        atomic_write(path, json.dumps(data, separators=(",", ":")))


def _reindex(cfg: MemSearchConfig, sources: Sequence[str]) -> tuple[int, dict[str, int]]:
    """Bring the index in line with the files, through the store's owner: a removed file's chunks
    are deleted, a changed file that was indexed is indexed again (stale chunks replaced; a file
    that was never indexed stays out); then the store rewrites its files without the deleted rows."""
    from memsearch.engine.memory import open_memory

    embedded = 0
    with open_memory(cfg) as memory:
        for source in dict.fromkeys(sources):
            if not Path(source).exists():
                memory.remove_file(source)
            elif stored_contents(memory, Path(source)):
                embedded += memory.index_file(source)
        purged = memory.purge()
    return embedded, purged


def recover(cfg: MemSearchConfig) -> tuple[int, int]:
    """Complete every change and every restore a killed process left (see the module docstring),
    then tidy the backups: how many changes, how many restored files."""
    from memsearch.engine import backups

    restored = backups.recover_restores()
    if any(r.indexed for r in restored):
        reindex_restored(cfg, [r.path for r in restored if r.indexed])
    done = 0
    for record in pending():
        try:
            intent = Intent.from_json(record.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable: left for the user to look at, never guessed at
        finish(intent, record, cfg)
        done += 1
    backups.sweep(committed=_committed)
    return done, len(restored)


def _committed(backup_id: str) -> bool:
    """Whether a change not yet finished names the pending backup ``backup_id`` (read now)."""
    for record in pending():
        with contextlib.suppress(OSError, ValueError):
            if json.loads(record.read_text(encoding="utf-8")).get("backup") == backup_id:
                return True
    return False


def reindex_restored(cfg: MemSearchConfig, paths: Sequence[str]) -> int:
    """Index the files a restore gave back (they were indexed before the change)."""
    from memsearch.engine.memory import open_memory

    _drop_from_manifest(cfg, paths)
    with open_memory(cfg) as memory:
        return sum(memory.index_file(p) for p in dict.fromkeys(paths) if Path(p).exists())
