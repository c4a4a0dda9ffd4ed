"""Incremental indexing: which files changed, what to embed, what to prune.

Why a manifest: the original reads, chunks and queries Milvus for every file on every run, so an
unchanged folder costs seconds (docs/scaling.md). We keep a small JSON manifest per (store,
collection) of each indexed file's size, mtime and content hash, plus the settings that shape
chunk IDs. When every scanned file matches it, ``index`` returns without opening Milvus or
loading the model. When a file's stat changed but its bytes did not, only the manifest is touched.
Only genuinely changed files are chunked and diffed against the store by chunk ID (the
reference's ID formula, so indexes stay compatible).

:meth:`Indexer.index` runs named steps: scan and diff against the manifest, read and chunk what
changed (``memsearch.engine.index_scan``), in a one-shot process embed every new text into the
embedding cache before the store opens (:meth:`Indexer._embed_ahead`), open the store and prune
deleted files, embed and upsert the new chunks (``memsearch.engine.index_pipeline``, which also
says in what order it writes; after the step ahead every vector comes from the cache), then finish
each file and save the manifest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.chunker import clean_content_for_embedding
from memsearch.engine.index_pipeline import (
    UPSERT_BATCH,
    EmbedClock,
    Progress,
    embed,
    embed_and_store,
    finish_files,
    mark_new_chunks,
    retrieved,
    start_phase,
)
from memsearch.engine.index_scan import (
    FileWork,
    Scanned,
    check_paths_exist,
    diff,
    read_changed,
    scan_paths,
    under,
    unnamable,
)
from memsearch.engine.lifecycle import ModelLifecycle
from memsearch.engine.manifest import Manifest
from memsearch.errors import CollectionNotFoundError, EmbeddingError, IndexingError, NotARegularFileError
from memsearch.index_report import IndexFailure, IndexReport, format_error
from memsearch.scanner import contained_problem

if TYPE_CHECKING:
    from memsearch.embeddings import EmbeddingProvider
    from memsearch.redact import Redactor
    from memsearch.store import MilvusStore

__all__ = [
    "IndexFailure",
    "IndexReport",
    "IndexSettings",
    "Indexer",
    "Progress",
    "format_error",
]


class _StoppedAhead(Exception):
    """The embedding ahead failed after some steps went into the cache: those are stored, then
    ``error`` is raised. ``lacking``: the texts it did not embed."""

    def __init__(self, error: EmbeddingError, lacking: frozenset[str]) -> None:
        super().__init__(str(error))
        self.error = error
        self.lacking = lacking

    def leave_out(self, work: list[FileWork]) -> None:
        """Keep in ``work`` only the chunks whose text is in the cache: the provider is not asked
        again (a file with a chunk left out stays out of the manifest and is retried next run)."""
        for w in work:
            w.to_embed = [
                i for i in w.to_embed if clean_content_for_embedding(w.chunks[i].content) not in self.lacking
            ]


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
    #: The multilingual leg's model ("": the leg is off; ``engine.multilingual``).
    multilingual: str = ""

    def fingerprint(self) -> dict[str, Any]:
        """The settings whose change invalidates every chunk ID, and the multilingual leg's model
        when it is on (stored in the manifest: turning the leg on makes the next run look at every
        file, whose chunks then get their second vector)."""
        found: dict[str, Any] = {
            "model": self.model,
            "max_chunk_size": self.max_chunk_size,
            "overlap_lines": self.overlap_lines,
        }
        if self.multilingual:
            found["multilingual"] = self.multilingual
        return found


def _missing_paths(scanned: Scanned, removed: list[str], warnings: list[str]) -> tuple[str, ...]:
    """The paths given that do not exist and held nothing (``IndexReport.missing_paths``); a
    warning for each of the others, saying what was removed under it."""
    empty = []
    for path in scanned.missing:
        count = sum(1 for source in removed if under(source, [path]))
        if count:
            files = "file" if count == 1 else "files"
            warnings.append(f"{path} does not exist: removed the {count} {files} the index held there")
        else:
            empty.append(str(path))
    return tuple(empty)


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
        lifecycle: ModelLifecycle = ModelLifecycle.KEEP,
        multilingual: Callable[[], EmbeddingProvider] | None = None,
    ) -> None:
        self.settings = settings
        self._store = store
        self._embedder = embedder
        #: The multilingual leg's embedder (None: the leg is off).
        self._multilingual = multilingual
        self._manifest_file = manifest_file
        self._lite_path = lite_path
        self._model = model
        #: ``ONE_SHOT`` (a process that indexes once): a local model is dropped once the last
        #: batch is embedded, before the last upsert and the flush.
        self._lifecycle = lifecycle
        self._redactor: Redactor | None = None
        self._clock = EmbedClock()  # this run's time in the embedder (IndexReport.embed_seconds)

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
        self._clock = EmbedClock()
        check_paths_exist(self.settings.paths, self._holds_under)
        scanned = scan_paths(self.settings)
        if len(scanned.missing) == len(self.settings.paths) and self._new_lite_file():
            # Nothing given exists and there is no store: nothing is indexed under any of it.
            return IndexReport(0, 0, 0, missing_paths=tuple(map(str, scanned.missing)), unchanged=True)
        manifest, first_run = self._load_manifest()
        if first_run and scanned.files:
            # The model's one-time preparation (see below) first, before the notes are read: the
            # graph builder's child process then adds its peak to this process at its smallest.
            await asyncio.to_thread(self._embedder().prepare)
        # A first run opens the store now: index is a write (even an empty folder leaves a
        # collection to search), and opening settles the model of an index another program built.
        # A new Lite file with notes to index has no model to settle: it opens after the embedding
        # (_embed_ahead), so the model's memory and the store's are never held together.
        if first_run and not (scanned.files and self._new_lite_file()):
            self._store()
            if self._model_settled():
                return await self.index(force=force, progress=progress)

        changes = diff(scanned, manifest, force)
        warnings = [f"skipped {path}: {reason}" for path, reason in scanned.skipped]
        total, indexed, failed = scanned.report_counts()
        if not changes.stat_changed and not changes.gone and not scanned.missing:
            return IndexReport(0, total, indexed, failed, warnings=tuple(warnings), unchanged=True)

        work = read_changed(
            self.settings,
            changes.stat_changed,
            manifest,
            force=force,
            private_text=self._private_text,
            warnings=warnings,
            failures=scanned.failures,
        )
        total, indexed, failed = scanned.report_counts()
        if not work and not changes.gone and not scanned.missing and not force:
            if first_run:
                self._store()  # the collection a first run leaves, as above
            manifest.save()
            return IndexReport(0, total, indexed, failed, warnings=tuple(warnings), changed_files=0)

        # A run that indexes once embeds into the cache before the store opens (see
        # _embed_ahead). Otherwise the model's one-time file preparation (the ONNX graph optimised
        # once, by a child process) comes first, not beside the store, and the model loads on a
        # worker thread while the store opens (the model's work releases the GIL, so the two
        # overlap; docs/scaling.md has what a cold start costs).
        stopped: _StoppedAhead | None = None
        try:
            ahead = bool(work) and await self._embed_ahead(work, progress)
        except _StoppedAhead as stop:  # store the steps embedded before it, then report it
            ahead, stopped = True, stop
        if work and not ahead:
            await asyncio.to_thread(self._embedder().prepare)
            warm = self._embedder().warm
            asyncio.get_running_loop().run_in_executor(None, warm).add_done_callback(retrieved)
        store = self._store()
        if self._model_settled():  # the chunk IDs above were made with another model's name
            if stopped is not None:
                raise stopped.error
            return await self.index(force=force, progress=progress)
        if manifest.files and store.count() == 0 and stopped is None:
            # A fresh or dropped collection: nothing the manifest claims is really there.
            return await self._start_over(progress)

        removed = self._prune(store, manifest, scanned, changes.active, changes.gone, force)
        missing = _missing_paths(scanned, removed, warnings)
        mark_new_chunks(store, work, force=force)
        if stopped is not None:
            stopped.leave_out(work)
        embedded = 0
        try:
            release = self._lifecycle.drops_after_use and not ahead
            embedded = await embed_and_store(
                store, self._embedder, work, None if ahead else progress, release=release, clock=self._clock
            )
        finally:
            # Files whose new chunks are all in: drop their stale chunks and record them.
            stale_deleted = finish_files(store, work, manifest)
            manifest.save()
        if embedded or stale_deleted or removed:
            store.flush()
        if stopped is not None:
            raise stopped.error
        leg = await self._sync_leg(store, [w.source for w in work], progress)
        return IndexReport(
            embedded,
            total,
            indexed,
            failed,
            deleted_chunks=stale_deleted,
            changed_files=len(work),
            removed_files=len(removed),
            warnings=tuple(warnings),
            embed_seconds=round(self._clock.seconds, 3),
            missing_paths=missing,
            multilingual_embedded=leg,
        )

    def _holds_under(self, path: Path) -> bool:
        """Whether the index holds a file at or under ``path`` (asked only of a path that does not
        exist): the manifest says so, or the store does (a run that recorded nothing)."""
        real = path.resolve()  # as the index names its files
        manifest, first_run = self._load_manifest()
        if not first_run and any(under(source, [real]) for source in manifest.files):
            return True
        if self._new_lite_file():
            return False
        store = self._store()
        return store.exists and bool(store.sources_with_counts(str(real)))

    async def _sync_leg(self, store: MilvusStore, sources: list[str], progress: Progress | None) -> int:
        """With the multilingual leg on: the second vectors of the chunks of ``sources`` (of all
        chunks when the sidecar is new or out of step); returns how many were embedded."""
        if self._multilingual is None:
            return 0
        from memsearch.engine.multilingual import sync_sidecar

        embedder = self._multilingual()
        report = await sync_sidecar(store, embedder, sources=sources, progress=progress)
        if self._lifecycle.drops_after_use:
            embedder.release_model()
        return report.embedded

    def _new_lite_file(self) -> bool:
        return self._lite_path is not None and not self._lite_path.exists()

    def _load_manifest(self) -> tuple[Manifest, bool]:
        """The manifest of this (store, collection), and whether this is a first run (no manifest,
        or a Lite database that was deleted: then the manifest describes nothing)."""
        first_run = self._manifest_file is None or not self._manifest_file.exists()
        manifest = Manifest.load(self._manifest_file, self.settings.fingerprint())
        if self._lite_path is not None and not self._lite_path.exists():
            manifest.files.clear()
            first_run = True
        return manifest, first_run

    def _prune(
        self,
        store: MilvusStore,
        manifest: Manifest,
        scanned: Scanned,
        active: set[str],
        gone: list[str],
        force: bool,
    ) -> list[str]:
        """Delete the chunks of files no longer on disk under a directory root, or at or under a
        path given that does not exist (``index notes`` after ``mv notes notes-old``); returns the
        files removed. Without a manifest (or with ``force``) the store's own sources are checked
        too, and always under a path that does not exist: the user named it."""
        if not manifest.files or force:
            indexed = store.indexed_sources()
            gone = sorted(
                {p for p in indexed if p not in active and under(p, scanned.gone_roots)} | set(gone)
            )
        elif scanned.missing:
            missing = [p for p in scanned.gone_roots if p in scanned.missing]
            gone = sorted(set(gone).union(*(store.sources_with_counts(str(p)) for p in missing)))
        removed = []
        for source in gone:
            if unnamable(source):  # (rows another program stored) not addressable: left as they are
                continue
            store.delete_by_source(source)
            manifest.files.pop(source, None)
            removed.append(source)
        return removed

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
            IndexSettings(
                (str(p),),
                s.model,
                s.max_chunk_size,
                s.overlap_lines,
                follow_links=s.follow_links,
                multilingual=s.multilingual,
            ),
            store=self._store,
            embedder=self._embedder,
            manifest_file=self._manifest_file,
            lite_path=self._lite_path,
            model=self._model,
            multilingual=self._multilingual,
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
            known = [p for p in manifest.files if under(p, [Path(source)])]
        else:
            found = {s: h for s, h in store.hashes_by_sources([source]).items() if h}
            known = [source]
        for hashes in found.values():
            store.delete_by_hashes(sorted(hashes))
        self.forget({*known, *found})
        return {s: len(h) for s, h in sorted(found.items())}

    # -- internals -----------------------------------------------------------------------

    async def _embed_ahead(self, work: list[FileWork], progress: Progress | None) -> bool:
        """For a run that indexes once (``ModelLifecycle.ONE_SHOT``) through the embedding cache:
        embed every text the cache lacks into the cache now, before the store opens, then drop the
        model; True if it did (the upserts then take every vector from the cache).

        Why: the model's memory (session, arena) and Milvus Lite's (opening, BM25 tokenising, the
        flush's new segment) are then never held at once, and the model's is handed back to the
        system before the store opens (``onnx_runtime.release``). A full index of 600 chunks
        peaked 95 MB lower than with the store's work pipelined beside the embedding, for a few
        seconds of store work no longer hidden behind the model (docs/scaling.md). The vectors go
        to the cache a step at a time and are not kept here: the run holds no list of them. If
        the embedding fails part way, the steps already embedded are stored from the cache (the
        provider is not asked again; a file with a chunk left out stays out of the manifest and is
        retried next run), then the error is raised (:class:`_StoppedAhead`); if the first step
        fails, the error is raised at once and the store is not opened. A run cut short keeps
        what it embedded in the cache, so the next one embeds only the rest.
        """
        from memsearch.embeddings.cache import CachedEmbedder

        embedder = self._embedder()
        if not self._lifecycle.drops_after_use or not isinstance(embedder, CachedEmbedder):
            return False
        missing = embedder.uncached([clean_content_for_embedding(c.content) for w in work for c in w.chunks])
        if not missing:
            return True
        start_phase(progress, "Embedding", len(missing))
        if progress:
            progress(0, len(missing))
        with embedder.bulk():  # the model is let go below: laid out for throughput meanwhile
            for start in range(0, len(missing), UPSERT_BATCH):
                try:
                    await embed(embedder, missing[start : start + UPSERT_BATCH], self._clock)
                except EmbeddingError as exc:
                    embedder.release_model()
                    if not start:  # nothing embedded: nothing to store, and no store opened
                        raise
                    raise _StoppedAhead(exc, frozenset(missing[start:])) from exc
                if progress:
                    progress(min(start + UPSERT_BATCH, len(missing)), len(missing))
        embedder.release_model()
        return True
