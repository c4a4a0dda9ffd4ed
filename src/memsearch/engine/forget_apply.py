"""Removing forgotten memory everywhere it lives, all or nothing: the markdown, then its shadows.

The markdown files are the truth; the Milvus rows, the embedding cache, the index manifest and the
``~/.memsearch/written`` record of transcripts are derived from them. So one forget is:

1. **Plan**, holding the lock every journal writer takes (``flock`` on the file, as
   ``journal.append_entry`` and ``scan --redact`` do) on every file it changes: check each block
   is still what was shown, work out the lines to drop and the cache keys of the chunks that go.
2. **Commit**: write an intent record, ``~/.memsearch/forget/<id>.json`` (private, written as a
   temp file renamed into place, fsynced). It holds file names, line numbers and hashes, never the
   text. Before this point nothing has changed.
3. **Apply** to each file: the new text as a temp file renamed over it (or, for a journal left
   without entries, the file removed). An edit applies only while the file's first bytes, up to
   the last line removed, hash as they did when planned: appends (all journal writers do) keep
   that, an applied edit does not, so applying twice is harmless. A writer that waited for the lock
   sees the name now holds another file and appends to the new one (``files.replaced``).
4. **Finish**: delete the cache entries (``secure_delete`` on, WAL checkpointed, so the vectors'
   bytes leave the cache files), drop the transcripts no remaining anchor names from the written
   record, drop the files from the manifest, reindex the changed ones and delete the rows of the
   removed ones (through the store's owner: the memory service when one runs), delete the cache
   entries once more (a watcher may have embedded the old text meanwhile), and remove the intent
   record.

A process killed anywhere leaves the intent record or nothing. :func:`recover`, which ``forget``
and ``index`` run first, completes every record it finds: steps 3 and 4 again, each harmless when
already done. So the markdown is either as before or, after the next of those commands, as after.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from memsearch.engine.forget import (
    Block,
    block_digest,
    chunk_text,
    encode,
    entries,
    session_headings,
    split_keep,
)
from memsearch.engine.journal import is_journal

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.interface import Memory
    from memsearch.redact import Redactor

__all__ = ["Outcome", "forget_blocks", "pending", "recover"]

INTENT_VERSION = 1
#: Test-only: ``stage:seconds`` pauses a forget at ``locked``, ``committed`` or ``applied`` (after the
#: first file) so a test can kill it there or write beside it. Never set it otherwise.
PAUSE_ENV = "MEMSEARCH_TEST_FORGET_PAUSE"


@dataclass
class FileEdit:
    """The lines ``ranges`` (0-based, end exclusive) to drop from ``path``, valid while the file's
    first ``prefix_bytes`` bytes hash to ``prefix_sha256``."""

    path: str
    ranges: list[tuple[int, int]]
    prefix_bytes: int
    prefix_sha256: str
    journal: bool


@dataclass
class Intent:
    """One committed forget (see the module docstring); JSON in ``~/.memsearch/forget/``."""

    id: str
    files: list[FileEdit]
    cache_keys: list[str] = field(default_factory=list)
    #: memory folder -> transcript paths the removed entries' anchors named
    transcripts: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"version": INTENT_VERSION, **asdict(self)}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Intent:
        data = json.loads(text)
        if data.get("version") != INTENT_VERSION:
            raise ValueError(f"unknown forget record version {data.get('version')!r}")
        files = [FileEdit(**{**f, "ranges": [tuple(r) for r in f["ranges"]]}) for f in data["files"]]
        return cls(str(data["id"]), files, list(data["cache_keys"]), dict(data["transcripts"]))


@dataclass(frozen=True)
class Outcome:
    """What one forget did: files rewritten, journals removed, cache vectors deleted."""

    changed: tuple[str, ...]
    removed: tuple[str, ...]
    cache_deleted: int
    reindexed_chunks: int


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


# --- applying an edit -------------------------------------------------------------------------


def _prefix(raw: bytes, lines: Sequence[str], ranges: Sequence[tuple[int, int]]) -> tuple[int, str]:
    size = len(encode(lines[: max(end for _, end in ranges)]))
    return size, hashlib.sha256(raw[:size]).hexdigest()


def _kept(lines: Sequence[str], ranges: Sequence[tuple[int, int]]) -> list[str]:
    gone = {i for start, end in ranges for i in range(start, end)}
    return [line for i, line in enumerate(lines) if i not in gone]


def _empty_journal(lines: Sequence[str]) -> bool:
    """A journal with nothing left but blank lines and its ``# date`` title: removed, not kept."""
    return all(not line.strip() or (line.startswith("# ") and not entries(lines)) for line in lines)


def _apply_held(edit: FileEdit, fh: IO[bytes]) -> str:
    """Apply ``edit`` to the file ``fh`` (locked by the caller); "changed", "removed" or "" (not
    applicable: already applied)."""
    from memsearch.files import atomic_write

    fh.seek(0)
    raw = fh.read()
    if (
        len(raw) < edit.prefix_bytes
        or hashlib.sha256(raw[: edit.prefix_bytes]).hexdigest() != edit.prefix_sha256
    ):
        return ""
    kept = _kept(split_keep(raw.decode("utf-8", errors="surrogateescape")), edit.ranges)
    if edit.journal and _empty_journal(kept):
        os.unlink(edit.path)
        return "removed"
    atomic_write(edit.path, encode(kept), keep_mode=True, fsync=True)
    return "changed"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[IO[bytes] | None]:
    """The file ``path`` open and locked as the journal writers lock it (None when it is gone);
    when it was renamed over while we waited, the new file is opened and locked instead."""
    from memsearch.files import exclusive, open_own, replaced

    while True:
        try:
            fd = open_own(path, os.O_RDWR)
        except FileNotFoundError:
            yield None
            return
        with os.fdopen(fd, "r+b") as fh, exclusive(fh):
            if replaced(path, fh.fileno()):
                continue
            yield fh
            return


# --- one forget -------------------------------------------------------------------------------


@dataclass
class _Planned:
    edit: FileEdit
    fh: IO[bytes]


def forget_blocks(
    blocks: Sequence[Block], memory: Memory, cfg: MemSearchConfig, redactor: Redactor
) -> Outcome:
    """Remove ``blocks`` from their files, the index, the embedding cache, the manifest and the
    written record, all or nothing (module docstring). ``memory`` reaches the store through its
    owner. Raises ForgetConflictError (nothing changed) when a file no longer holds a block."""
    by_file: dict[Path, list[Block]] = {}
    for block in blocks:
        by_file.setdefault(block.path, []).append(block)
    rows = {path: _stored_contents(memory, path) for path in by_file}
    prefixes = _document_prefixes(memory)
    intent = Intent(os.urandom(8).hex(), [])
    keys: set[str] = set()
    with contextlib.ExitStack() as stack:
        planned: list[_Planned] = []
        for path in sorted(by_file):
            fh = stack.enter_context(_locked(path))
            if fh is None:
                _conflict(path)
            assert fh is not None
            edit, old, new = _plan_file(path, fh, by_file[path], cfg, redactor)
            planned.append(_Planned(edit, fh))
            intent.files.append(edit)
            keys |= _cache_keys((rows[path] | old) - new, prefixes)
            if edit.journal:
                named = [b.anchor.get(n, "") for b in by_file[path] for n in _TRANSCRIPT_FIELDS]
                folder = intent.transcripts.setdefault(str(path.parent), [])
                folder.extend(p for p in named if p and p not in folder)
        intent.cache_keys = sorted(keys)
        _pause("locked")
        record = _commit(intent)
        _pause("committed")
        for k, item in enumerate(planned):
            _apply_held(item.edit, item.fh)
            if k == 0:
                _pause("applied")
    return _finish(intent, record, cfg)


_TRANSCRIPT_FIELDS = ("transcript", "rollout", "db")


def _conflict(path: Path) -> None:
    from memsearch.errors import ForgetConflictError

    raise ForgetConflictError(
        f"{path} changed since it was read (nothing was forgotten)",
        hint="run the same `memsearch forget` again: it will show what is there now",
    )


def _plan_file(
    path: Path, fh: IO[bytes], blocks: Sequence[Block], cfg: MemSearchConfig, redactor: Redactor
) -> tuple[FileEdit, set[str], set[str]]:
    """The edit of one locked file, and the chunk contents of its text before and after it."""
    fh.seek(0)
    raw = fh.read()
    lines = split_keep(raw.decode("utf-8", errors="surrogateescape"))
    for block in blocks:
        if block.end > len(lines) or block_digest(lines, block.start, block.end) != block.digest:
            _conflict(path)
    spans = {(b.start, b.end) for b in blocks}
    journal = is_journal(path)
    if journal:
        spans |= set(session_headings(lines, spans))
    ranges = sorted(spans)
    size, digest = _prefix(raw, lines, ranges)
    edit = FileEdit(str(path), ranges, size, digest, journal)
    old = _contents(raw, path, cfg, redactor)
    new = _contents(encode(_kept(lines, ranges)), path, cfg, redactor)
    return edit, old, new


def _contents(raw: bytes, path: Path, cfg: MemSearchConfig, redactor: Redactor) -> set[str]:
    from memsearch.errors import MemSearchError

    try:
        chunks = chunk_text(raw, str(path), cfg.chunking.max_chunk_size, cfg.chunking.overlap_lines, redactor)
    except MemSearchError:  # not text (never indexed either)
        return set()
    return {c.content for c in chunks}


def _stored_contents(memory: Memory, path: Path) -> set[str]:
    """The chunk texts the index holds for ``path`` (what was embedded, whatever the file says now)."""
    return {str(r["content"]) for r in memory.query_chunks(str(path)) if r.get("source") == str(path)}


def _document_prefixes(memory: Memory) -> set[str]:
    """What the configured embedder puts before a document's text ("" always included)."""
    prefixes = {""}
    with contextlib.suppress(Exception):  # an unknown provider: its prefix cannot be asked
        prefixes.add(memory.embedder.document_text(""))  # type: ignore[attr-defined]
    return prefixes


def _cache_keys(contents: set[str], prefixes: set[str]) -> set[str]:
    from memsearch.chunker import clean_content_for_embedding
    from memsearch.embeddings.cache import text_key

    return {text_key(p + clean_content_for_embedding(c)) for c in contents for p in prefixes}


# --- finishing, and completing a forget a killed process left -------------------------------


def _finish(intent: Intent, record: Path, cfg: MemSearchConfig) -> Outcome:
    changed: list[str] = []
    removed: list[str] = []
    for edit in intent.files:  # already applied by a running forget; applied now by recover
        with _locked(Path(edit.path)) as fh:
            done = _apply_held(edit, fh) if fh is not None else ""
        (removed if done == "removed" or not Path(edit.path).exists() else changed).append(edit.path)
    deleted = _forget_cached(intent.cache_keys)
    _forget_transcripts(intent.transcripts)
    _drop_from_manifest(cfg, [e.path for e in intent.files])
    chunks = _reindex(cfg, intent.files)
    deleted += _forget_cached(intent.cache_keys)
    record.unlink(missing_ok=True)
    return Outcome(tuple(changed), tuple(removed), deleted, chunks)


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


def _reindex(cfg: MemSearchConfig, edits: Sequence[FileEdit]) -> int:
    """Bring the index in line with the edited files, through the store's owner: a removed
    journal's chunks are deleted, a changed file that was indexed is indexed again (stale chunks
    replaced; a file that was never indexed stays out)."""
    from memsearch.engine.memory import open_memory

    embedded = 0
    with open_memory(cfg) as memory:
        for edit in edits:
            if not Path(edit.path).exists():
                memory.remove_file(edit.path)
            elif _stored_contents(memory, Path(edit.path)):
                embedded += memory.index_file(edit.path)
    return embedded


def recover(cfg: MemSearchConfig) -> int:
    """Complete every forget a killed process left (see the module docstring); how many."""
    done = 0
    for record in pending():
        try:
            intent = Intent.from_json(record.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable: left for the user to look at, never guessed at
        _finish(intent, record, cfg)
        done += 1
    return done
