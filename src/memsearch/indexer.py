"""Incremental indexing: which files changed, what to embed, what to prune.

Why a manifest: the original reads, chunks and queries Milvus for every file on every run (2.4–2.6 s
for an unchanged 2,000-chunk folder). We keep a small JSON manifest per (store, collection) of each
indexed file's size, mtime and content hash, plus the settings that shape chunk IDs. When every
scanned file matches it, ``index`` returns without opening Milvus or loading the model. When a file's
stat changed but its bytes did not, only the manifest is touched. Only genuinely changed files are
chunked and diffed against the store by chunk ID (the reference's ID formula, so indexes stay
compatible).

Order of writes: new chunks are embedded and upserted first, stale chunks of a file are deleted
only after all of its new chunks are in, so a failed embedding (a network error, a rate limit)
never leaves a file half-indexed until the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.chunker import Chunk, chunk_markdown, clean_content_for_embedding
from memsearch.errors import (
    CollectionNotFoundError,
    EmbeddingError,
    IndexingError,
    MemSearchError,
    NotARegularFileError,
)
from memsearch.manifest import FileEntry, Manifest, entry_matches, mtime_ns
from memsearch.scanner import ScannedFile, contained_problem, decode_markdown, read_markdown_bytes, scan

if TYPE_CHECKING:
    from memsearch.embeddings import EmbeddingProvider
    from memsearch.redact import Redactor
    from memsearch.store import MilvusStore

logger = logging.getLogger("memsearch.indexer")

#: Chunks embedded and upserted per step. The provider splits a step into its own (often tiny)
#: batches; a larger step keeps Milvus upserts few and cheap.
UPSERT_BATCH = 64
#: Rows upserted between flushes on Milvus Lite. Lite keeps unflushed rows in a write buffer
#: (128 MB) and its flush builds the new segment and its indexes in memory at once, then merges
#: segments in the background. Peak RSS indexing 20,000 chunks (fast embedder): one flush at the
#: end 888 MB; every 1,000 rows 724 MB; 2,000: 661 MB; 5,000: 537 MB (fewer merges, and 20 % faster).
#: A server seals segments itself, and frequent flushes there are discouraged.
LITE_FLUSH_ROWS = 5000

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class IndexFailure:
    """One file that could not be indexed, and why."""

    path: str
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}


@dataclass(frozen=True)
class IndexReport:
    """What one ``index`` run did. ``indexed_chunks`` counts chunks embedded in *this* run."""

    indexed_chunks: int
    total_files: int
    indexed_files: int
    failed_files: tuple[IndexFailure, ...] = ()
    deleted_chunks: int = 0
    changed_files: int = 0
    removed_files: int = 0
    warnings: tuple[str, ...] = ()
    #: True when the manifest showed nothing had changed and the store was not opened.
    unchanged: bool = False
    #: Seconds this run waited for the embedder (model and cache); the rest is overhead (bench).
    embed_seconds: float = 0.0

    @property
    def status(self) -> str:
        return "degraded" if self.failed_files else "ok"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexReport:
        """A report from its ``dataclasses.asdict`` form (what the memory service sends)."""
        fields = dict(data)
        fields["failed_files"] = tuple(IndexFailure(**f) for f in fields.get("failed_files", ()))
        fields["warnings"] = tuple(fields.get("warnings", ()))
        return cls(**fields)


def format_error(exc: BaseException, limit: int = 2000) -> str:
    """``Type: message`` for reports; our own errors read better without the class name."""
    text = exc.one_line() if isinstance(exc, MemSearchError) else f"{type(exc).__name__}: {exc}"
    suffix = "... [truncated]"
    return text if len(text) <= limit else text[: limit - len(suffix)] + suffix


@dataclass(frozen=True)
class IndexSettings:
    """Everything that decides which files are indexed and what their chunk IDs are."""

    paths: tuple[str, ...]
    model: str
    max_chunk_size: int = 1500
    overlap_lines: int = 2
    ignore_files: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    #: False: a contained index, where no link is read and nothing outside the paths (a project's
    #: memory folder, which ``git clone`` may fill with links to the user's secrets).
    follow_links: bool = True

    def fingerprint(self) -> dict[str, Any]:
        """The settings whose change invalidates every chunk ID (stored in the manifest)."""
        return {
            "model": self.model,
            "max_chunk_size": self.max_chunk_size,
            "overlap_lines": self.overlap_lines,
        }


def _unnamable(source: str) -> str | None:
    """Why the store could not name ``source`` in a filter, or None. Checked per file, so one such
    name (a control character) is skipped with a warning and never stops the files beside it."""
    from memsearch.store.filters import filter_problem

    problem = filter_problem(source)
    return f"its path {problem}, which the index cannot look up; rename the file" if problem else None


def _under(source: str, roots: Sequence[Path]) -> bool:
    """True when ``source`` lies inside one of the directory ``roots`` (path-boundary check)."""
    p = Path(source)
    for root in roots:
        try:
            p.relative_to(root)
        except ValueError:
            continue
        return True
    return False


@dataclass
class _FileWork:
    """A changed file on its way into the store."""

    source: str
    entry: FileEntry
    chunks: list[Chunk]
    ids: list[str]
    to_embed: list[int] = field(default_factory=list)  # indexes into chunks
    stale: set[str] = field(default_factory=set)
    remaining: int = 0


class Indexer:
    """Brings a store up to date with the markdown under some paths.

    The store and the embedder are given as factories so that the no-change path never opens
    either (both are slow to start: pymilvus import, ONNX session).
    """

    def __init__(
        self,
        settings: IndexSettings,
        *,
        store: Callable[[], MilvusStore],
        embedder: Callable[[], EmbeddingProvider],
        manifest_file: Path | None,
        lite_path: Path | None = None,
        model: Callable[[], str] | None = None,
        release_model: bool = False,
    ) -> None:
        self.settings = settings
        self._store = store
        self._embedder = embedder
        self._manifest_file = manifest_file
        self._lite_path = lite_path
        self._model = model
        #: Drop a local model once the last batch is embedded, before the last upsert and the
        #: flush (``MemSearch(keep_model=False)``: a process that indexes once).
        self._release_model = release_model
        self._redactor: Redactor | None = None
        self._embed_seconds = 0.0  # this run's, for IndexReport.embed_seconds

    def _model_settled(self) -> bool:
        """Call after opening the store: True when opening it settled another embedding model than
        the settings' (``MemSearch`` does for an index the original memsearch built with its
        default model). The settings then take that model; chunk IDs made before are stale."""
        model = self._model() if self._model is not None else self.settings.model
        if model == self.settings.model:
            return False
        self.settings = replace(self.settings, model=model)
        return True

    # -- public --------------------------------------------------------------------------

    async def index(self, *, force: bool = False, progress: Progress | None = None) -> IndexReport:
        """Index every markdown file under the configured paths; see the module docstring.

        A collection dropped during the run (a ``reset`` through another memory of the store, which
        the store's owner serves at the same time) costs one more run on the collection the next
        write creates, instead of a failure: what this run stored went with it."""
        try:
            return await self._index(force, progress)
        except CollectionNotFoundError:
            return await self._index(force, progress)

    async def _index(self, force: bool, progress: Progress | None) -> IndexReport:
        s = self.settings
        self._embed_seconds = 0.0
        result = scan(
            list(s.paths),
            ignore_files=list(s.ignore_files),
            exclude=list(s.exclude),
            follow_links=s.follow_links,
        )
        files = result.files
        failures = [IndexFailure(path, reason) for path, reason in result.problems]
        roots = [Path(p).expanduser().resolve() for p in s.paths if Path(p).expanduser().is_dir()]
        first_run = self._manifest_file is None or not self._manifest_file.exists()
        manifest = Manifest.load(self._manifest_file, s.fingerprint())
        if self._lite_path is not None and not self._lite_path.exists():
            manifest.files.clear()  # the database was deleted: the manifest describes nothing
            first_run = True
        if first_run:
            if files:  # the model's one-time preparation first (see below), not beside the store
                await asyncio.to_thread(self._embedder().prepare)
            self._store()  # index is a write: even an empty folder leaves a collection to search
            if self._model_settled():
                return await self.index(force=force, progress=progress)

        active = {str(f.path) for f in files}
        gone = [p for p in manifest.files if p not in active and _under(p, roots)]
        stat_changed = [f for f in files if force or not entry_matches(manifest, f)]
        warnings = [f"skipped {path}: {reason}" for path, reason in result.skipped]
        if not stat_changed and not gone:
            return IndexReport(
                0,
                len(files),
                len(files) - len(failures),
                tuple(failures),
                warnings=tuple(warnings),
                unchanged=True,
            )

        work: list[_FileWork] = []
        for f in stat_changed:
            source = str(f.path)
            old = manifest.files.get(source)
            unnamable = _unnamable(source)
            if unnamable:  # its chunks could never be found again to update or delete
                warnings.append(f"skipped {source}: {unnamable}")
                continue
            try:
                read = self._read_and_chunk(f, None if force or old is None else old.sha256, warnings)
            except (OSError, MemSearchError, ValueError) as exc:
                failures.append(IndexFailure(source, format_error(exc)))
                manifest.files.pop(source, None)
                continue
            entry, chunks = read
            if chunks is None:  # touched, not changed
                entry.chunks = old.chunks if old is not None else 0
                manifest.files[source] = entry
                continue
            ids = [c.chunk_id(s.model) for c in chunks]
            entry.chunks = len(chunks)
            work.append(_FileWork(source, entry, chunks, ids))

        if not work and not gone and not force:
            manifest.save()
            return IndexReport(
                0,
                len(files),
                len(files) - len(failures),
                tuple(failures),
                warnings=tuple(warnings),
                changed_files=0,
            )

        # A small run that indexes once embeds into the cache before the store opens (see
        # _embed_ahead). Otherwise the model's one-time file preparation (the ONNX graph optimised
        # once, by a child process that peaks at ~260 MB) comes first, not beside the store, and
        # the model loads on a worker thread while the store opens (both take ~0.4-0.8 s on a cold
        # start; the model's work releases the GIL).
        ahead = bool(work) and await self._embed_ahead(work)
        if work and not ahead:
            await asyncio.to_thread(self._embedder().prepare)
            warm = self._embedder().warm
            asyncio.get_running_loop().run_in_executor(None, warm).add_done_callback(_retrieved)
        store = self._store()
        if self._model_settled():  # the chunk IDs above were made with another model's name
            return await self.index(force=force, progress=progress)
        if manifest.files and store.count() == 0:
            # A fresh or dropped collection: nothing the manifest claims is really there.
            return await self._start_over(progress)

        # Deleted files: sources under a directory root that are no longer on disk.
        if not manifest.files or force:
            indexed = store.indexed_sources()
            gone = sorted({p for p in indexed if p not in active and _under(p, roots)} | set(gone))
        deleted = 0
        for source in gone:
            if _unnamable(source):  # (rows another program stored) not addressable: left as they are
                continue
            store.delete_by_source(source)
            manifest.files.pop(source, None)
            deleted += 1

        existing = store.hashes_by_sources([w.source for w in work]) if work else {}
        for w in work:
            old_ids = existing.get(w.source, set())
            seen: set[str] = set()
            for i, cid in enumerate(w.ids):
                if cid in seen:
                    continue
                seen.add(cid)
                if force or cid not in old_ids:
                    w.to_embed.append(i)
            w.stale = old_ids - set(w.ids)
            w.remaining = len(w.to_embed)

        embedded = 0
        try:
            embedded = await self._embed_and_store(
                store, work, progress, release=self._release_model and not ahead
            )
        finally:
            # Files whose new chunks are all in: drop their stale chunks and record them.
            stale_deleted = self._finish_files(store, work, manifest)
            manifest.save()
        if embedded or stale_deleted or deleted:
            store.flush()
        return IndexReport(
            embedded,
            len(files),
            len(files) - len(failures),
            tuple(failures),
            deleted_chunks=stale_deleted,
            changed_files=len(work),
            removed_files=deleted,
            warnings=tuple(warnings),
            embed_seconds=round(self._embed_seconds, 3),
        )

    async def _timed_embed(self, embedder: EmbeddingProvider, texts: list[str]) -> list[list[float]]:
        """:func:`_embed`, its wall time added to this run's ``embed_seconds``."""
        start = time.perf_counter()
        vectors = await _embed(embedder, texts)  # a failure ends the run: its time is not reported
        self._embed_seconds += time.perf_counter() - start
        return vectors

    def _read_and_chunk(
        self, f: ScannedFile, known_sha256: str | None, warnings: list[str]
    ) -> tuple[FileEntry, list[Chunk] | None]:
        """A changed file's manifest entry and chunks (None: its bytes hash to ``known_sha256``).

        A function of its own so the file's bytes and decoded text are freed as soon as it is
        chunked: while the chunks are embedded, only they are held (a 20 MB file is ~20 MB of
        chunks, not three copies of it).
        """
        raw = read_markdown_bytes(f.path, follow=self.settings.follow_links)
        entry = FileEntry(f.size, mtime_ns(f), hashlib.sha256(raw).hexdigest())
        if entry.sha256 == known_sha256:
            return entry, None
        decoded = decode_markdown(raw, f.path)
        del raw
        if decoded.warning:
            warnings.append(decoded.warning)
        text = self._private_text(decoded.text, f.path, warnings)
        if text is None:
            return entry, []
        s = self.settings
        return entry, chunk_markdown(
            text, str(f.path), max_chunk_size=s.max_chunk_size, overlap_lines=s.overlap_lines
        )

    def _private_text(self, text: str, path: Path, warnings: list[str]) -> str | None:
        """The text to chunk: nothing embeds or stores a private span or a secret (see
        :func:`memsearch.redact.note_text`); None leaves the file out."""
        from memsearch import redact

        if self._redactor is None:
            self._redactor = redact.current()
        return redact.note_text(self._redactor, text, str(path), warnings)

    async def _start_over(self, progress: Progress | None) -> IndexReport:
        """Start over with an empty manifest (used when the collection turned out to be empty)."""
        if self._manifest_file is not None:
            self._manifest_file.unlink(missing_ok=True)
        return await self.index(force=False, progress=progress)

    async def index_file(self, path: str | Path) -> int:
        """Index one file (no ignore rules or extension check); returns chunks embedded. In a
        contained index (the watcher's single changed files too) a link, or a file outside the
        paths, raises NotARegularFileError and is not read."""
        s = self.settings
        if not s.follow_links:
            roots = [Path(r).expanduser().resolve() for r in s.paths]
            problem = contained_problem(Path(path).expanduser().absolute(), roots)
            if problem is not None and Path(path).exists():
                raise NotARegularFileError(f"{path} is {problem}", hint="only regular files are indexed here")
        p = Path(path).expanduser().resolve()
        if not p.is_file():
            from memsearch.errors import SourceFileNotFoundError

            raise SourceFileNotFoundError(f"File not found: {p}", hint="check the path")
        indexer = Indexer(
            IndexSettings((str(p),), s.model, s.max_chunk_size, s.overlap_lines, follow_links=s.follow_links),
            store=self._store,
            embedder=self._embedder,
            manifest_file=self._manifest_file,
            lite_path=self._lite_path,
            model=self._model,
        )
        report = await indexer.index()
        self.settings = replace(self.settings, model=indexer.settings.model)
        if report.failed_files:
            failure = report.failed_files[0]
            raise IndexingError(f"could not index {failure.path}: {failure.error}")
        return report.indexed_chunks

    def forget(self, sources: Iterable[str]) -> None:
        """Remove files from the manifest (after their chunks were deleted elsewhere)."""
        manifest = Manifest.load(self._manifest_file, self.settings.fingerprint())
        for s in sources:
            manifest.files.pop(s, None)
        manifest.save()

    def remove(self, path: str | Path, *, directory: bool = False) -> dict[str, int]:
        """Delete the chunks of one file (with ``directory``, of every file below that folder) and
        drop it from the manifest; returns chunks removed per source (sources that had none are
        absent).

        For the watcher: a file deleted, renamed away or now ignored. No ignore rules apply here,
        so the chunks of an ignored file can still be removed. Dropping the manifest entry matters:
        a file restored later with the same size and mtime must be indexed again.
        """
        source = str(Path(path).expanduser().resolve())
        store = self._store()
        self._model_settled()  # the manifest below is keyed by the settled model
        if directory:
            from memsearch.store import source_prefix_filter

            found: dict[str, set[str]] = {}
            for row in store.query(filter_expr=source_prefix_filter(source)):
                found.setdefault(str(row["source"]), set()).add(str(row["chunk_hash"]))
            manifest = Manifest.load(self._manifest_file, self.settings.fingerprint())
            known = [p for p in manifest.files if _under(p, [Path(source)])]
        else:
            found = {s: h for s, h in store.hashes_by_sources([source]).items() if h}
            known = [source]
        for hashes in found.values():
            store.delete_by_hashes(sorted(hashes))
        self.forget({*known, *found})
        return {s: len(h) for s, h in sorted(found.items())}

    # -- internals -----------------------------------------------------------------------

    async def _embed_ahead(self, work: list[_FileWork]) -> bool:
        """For a run that indexes once (``release_model``) with at most :data:`UPSERT_BATCH` texts
        the embedding cache lacks: embed them into the cache now, before the store opens, and drop
        the model; True if it did. Milvus Lite's memory (opening, BM25 tokenising, the flush) and
        the model's are then never held at once: ``memsearch index`` after one edited note peaked
        at ~300 MB with both, ~200 MB like this. The upserts later take every vector from the
        cache. A bigger run keeps the pipelined path (the store's work overlaps the embedding):
        faster, and its peak is the store's growth, not the model.
        """
        from memsearch.embeddings.cache import CachedEmbedder

        embedder = self._embedder()
        if not self._release_model or not isinstance(embedder, CachedEmbedder):
            return False
        missing = embedder.uncached([clean_content_for_embedding(c.content) for w in work for c in w.chunks])
        if len(missing) > UPSERT_BATCH:
            return False
        if missing:
            await self._timed_embed(embedder, missing)
            embedder.release_model()
        return True

    async def _embed_and_store(
        self, store: MilvusStore, work: list[_FileWork], progress: Progress | None, *, release: bool
    ) -> int:
        """Embed the new chunks of all changed files in shared batches, upserting each batch.

        Pipelined: batch k is upserted on a worker thread while batch k+1 is embedded. The model
        releases the GIL and Milvus Lite's upsert (BM25 tokenising, writes) is Python, so on 2 cores
        the store's work hides behind the embedding instead of adding to it. One upsert at a time,
        in batch order; a failure stops the run after the batches before it are stored. With
        ``release``, a local model is dropped once the last batch is embedded.
        """
        todo = [(w, i) for w in work for i in w.to_embed]
        if not todo:
            return 0
        embedder = self._embedder()
        batch = max(UPSERT_BATCH, embedder.batch_size)
        done = 0
        unflushed = 0
        storing: asyncio.Future[int] | None = None
        stored_part: list[tuple[_FileWork, int]] = []

        def store_batch(records: list[dict[str, Any]]) -> int:
            nonlocal unflushed
            written = store.upsert(records)
            unflushed += len(records)
            if store.is_local and unflushed >= LITE_FLUSH_ROWS:
                store.flush()
                unflushed = 0
            return written

        async def settle() -> None:
            """Wait for the upsert in flight and count its chunks as stored."""
            nonlocal storing, done
            if storing is None:
                return
            pending, storing = storing, None
            await pending
            for w, _ in stored_part:
                w.remaining -= 1
            done += len(stored_part)
            if progress:
                progress(done, len(todo))

        if progress:
            progress(0, len(todo))
        try:
            for start in range(0, len(todo), batch):
                part = todo[start : start + batch]
                texts = [clean_content_for_embedding(w.chunks[i].content) for w, i in part]
                vectors = await self._timed_embed(embedder, texts)
                if release and start + batch >= len(todo):  # the last batch: drop the model
                    embedder.release_model()
                pairs = zip(part, vectors, strict=True)
                records = [chunk_record(w.ids[i], w.chunks[i], vec) for (w, i), vec in pairs]
                await settle()
                stored_part = part
                storing = asyncio.ensure_future(asyncio.to_thread(store_batch, records))
            await settle()
        finally:
            if storing is not None:  # an embedding failed: let the upsert in flight finish first
                with contextlib.suppress(Exception):
                    await settle()
        return done

    def _finish_files(self, store: MilvusStore, work: list[_FileWork], manifest: Manifest) -> int:
        deleted = 0
        for w in work:
            if w.remaining:
                manifest.files.pop(w.source, None)  # partially indexed: retry next run
                continue
            if w.stale:
                store.delete_by_hashes(sorted(w.stale))
                deleted += len(w.stale)
            manifest.files[w.source] = w.entry
        return deleted


def chunk_record(chunk_id: str, chunk: Chunk, vector: Sequence[float]) -> dict[str, Any]:
    """The row upserted for one chunk. ``content`` is the chunk's original text, not the cleaned text
    that was embedded: search results and ``expand`` show what the file says, and the original
    stores the same, so indexes are shared."""
    return {
        "chunk_hash": chunk_id,
        "embedding": list(vector),
        "content": chunk.content,
        "source": chunk.source,
        "heading": chunk.heading,
        "heading_level": chunk.heading_level,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
    }


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a background warm-up's outcome as seen: if it failed, the embedding that needs the model
    fails the same way and reports it; a run with nothing to embed must not fail for it."""
    if not future.cancelled():
        future.exception()


async def _embed(embedder: EmbeddingProvider, texts: list[str]) -> list[list[float]]:
    """``embedder.embed(texts)``, one vector per text, any failure as one :class:`EmbeddingError`."""
    try:
        vectors = await embedder.embed(texts)
    except EmbeddingError:
        raise
    except Exception as exc:  # an SDK error we did not map: still one clear line
        raise EmbeddingError(f"embedding failed: {format_error(exc)}") from exc
    if len(vectors) != len(texts):
        raise EmbeddingError(f"the embedding provider returned {len(vectors)} vectors for {len(texts)} texts")
    return vectors
