"""The ``MemSearch`` facade: wires config → embedding provider → store → indexer.

Kept thin on purpose: the work lives in ``indexer``, ``store``, ``embeddings`` and ``expand``. It takes
the original's parameters but opens nothing: the store and the model are created on first use, so
an ``index`` of an unchanged folder, or a ``MemSearch`` only configured, costs no start-up.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.config.schema import (
    DEFAULT_CANDIDATES,
    DEFAULT_COLLECTION,
    DEFAULT_MILVUS_URI,
    DEFAULT_PROVIDER,
)
from memsearch.engine.interface import drive
from memsearch.engine.lifecycle import ModelLifecycle
from memsearch.engine.operations import candidate_depth
from memsearch.errors import CollectionNotFoundError, UnknownProviderError

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.embeddings import EmbeddingProvider
    from memsearch.engine.expand import Expansion
    from memsearch.engine.indexer import Indexer, IndexReport, Progress
    from memsearch.service.client import ServiceClient
    from memsearch.service.watching import OwnerWatch
    from memsearch.store import MilvusStore
    from memsearch.watcher import FileWatcher, OnError, OnEvent

logger = logging.getLogger("memsearch")


class MemSearch:
    """Semantic memory over markdown files: index them, search them, expand a hit.

    The original library API: the operations that embed (``index``, ``index_with_report``,
    ``index_file``, ``search``) are awaitable, the rest plain calls. Each public operation is a thin
    face over its row of ``memsearch.engine.operations.OPERATIONS``: checked there once, then run where the
    store's owner is (``memsearch.service.owner.perform``): here, by the ``_*_here`` method the row
    names, or by the process that owns the store. :class:`memsearch.engine.interface.Memory` is the
    synchronous face of the same operations.

    >>> ms = MemSearch(["./memory"])            # doctest: +SKIP
    >>> await ms.index()                         # doctest: +SKIP
    >>> await ms.search("database timeout")      # doctest: +SKIP
    """

    def __init__(
        self,
        paths: Sequence[str | Path] | None = None,
        *,
        embedding_provider: str = DEFAULT_PROVIDER,
        embedding_model: str | None = None,
        embedding_batch_size: int = 0,
        embedding_base_url: str | None = None,
        embedding_api_key: str | None = None,
        embedding_timeout: float = 0,
        milvus_uri: str = DEFAULT_MILVUS_URI,
        milvus_token: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        description: str = "",
        max_chunk_size: int = 1500,
        overlap_lines: int = 2,
        ignore_files: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        reranker_model: str = "",
        lock_timeout: float = 10.0,
        embedding_cache: bool = True,
        bm25_analyzer: str = "auto",
        follow_links: bool = True,
        multilingual: bool = False,
        model_lifecycle: ModelLifecycle | None = None,
        search_candidates: int = DEFAULT_CANDIDATES,
    ) -> None:
        #: What the store's owner needs to build the same engine for this memory's requests.
        self._settings = {k: v for k, v in locals().items() if k not in _NOT_SETTINGS}
        self._settings.update(ignore_files=list(ignore_files or ()), exclude=list(exclude or ()))
        from memsearch.embeddings import DEFAULT_MODELS, PROVIDERS

        if embedding_provider not in PROVIDERS:
            raise UnknownProviderError(
                f"Unknown embedding provider '{embedding_provider}'. "
                f"Available: {', '.join(sorted(PROVIDERS))}",
                hint="set embedding.provider (or --provider) to one of those",
            )
        self._paths = [str(p) for p in (paths or [])]
        self._provider = embedding_provider
        self._model = embedding_model or DEFAULT_MODELS[embedding_provider]
        #: False when the provider's default is used: opening a store may then settle another
        #: model (an index the original memsearch built; see _settle_model).
        self._model_chosen = bool(embedding_model)
        self._announced = False
        self._batch_size = embedding_batch_size
        self._base_url = embedding_base_url
        self._api_key = embedding_api_key
        self._timeout = embedding_timeout
        self._uri = milvus_uri
        self._token = milvus_token
        self._collection = collection
        self._description = description
        self._ignore_files = tuple(ignore_files or ())
        self._exclude = tuple(exclude or ())
        self._follow_links = follow_links  # False: read no link (scanner.contained_problem)
        self._reranker_model = reranker_model
        self._candidates = candidate_depth(search_candidates)  # hits per leg (search.candidates)
        self._bm25_analyzer = bm25_analyzer
        self._lock_timeout = lock_timeout
        self._use_cache = embedding_cache
        #: When the model is let go (``memsearch.engine.lifecycle``): kept, by default, for a program.
        self._lifecycle = model_lifecycle or ModelLifecycle.KEEP
        self._max_chunk_size = max_chunk_size
        self._overlap_lines = overlap_lines
        self._embedder: EmbeddingProvider | None = None
        self._multilingual = multilingual  # the third leg's model (engine.multilingual.leg_embedder)
        self._leg: EmbeddingProvider | None = None
        self._store: MilvusStore | None = None
        #: Opening is lazy, maybe on two threads at once (the service's concurrent first searches, a
        #: cold search on a worker thread): one opens, the other waits and shares the store.
        self._open_lock = threading.RLock()
        #: Whether operations go through the store's owner (False: this is the owner's own engine).
        self._routed = True
        #: From ``open_memory`` (CLI reads, hooks): start a background service when nobody owns it.
        self._spawn: Callable[[], ServiceClient | None] | None = None

    # -- the store's owner ----------------------------------------------------------------

    async def _perform(self, name: str, args: dict[str, Any], *, driven: bool = False) -> Any:
        """Operation ``name`` with a public method's ``args`` (its ``locals()``): checked once
        against its row, then run at the store's owner or here (``service.owner.perform``)."""
        from memsearch.engine.operations import OPERATIONS
        from memsearch.service.owner import perform

        args.pop("self", None)
        op = OPERATIONS[name]
        return await perform(self, op, op.bind(args), engine=engine, driven=driven)

    def _now(self, name: str, args: dict[str, Any]) -> Any:
        """A face that is a plain call: the operation driven to its end (it never waits on a loop)."""
        return drive(self._perform(name, args, driven=True))

    def _request_settings(self) -> dict[str, Any]:
        """What a request carries for the owner to build this memory's engine: the settings, and
        the paths made absolute in this process's working directory."""
        return {**self._settings, "paths": [str(Path(p).expanduser().resolve()) for p in self._paths]}

    # -- construction from config ---------------------------------------------------------

    @classmethod
    def from_config(
        cls,
        cfg: MemSearchConfig,
        paths: Sequence[str | Path] | None = None,
        **extra: Any,
    ) -> MemSearch:
        """Build from a resolved configuration (see :func:`~memsearch.config.schema.config_kwargs`)."""
        from memsearch.config.schema import config_kwargs

        return cls(paths, **{**config_kwargs(cfg), **extra})

    # -- lazily created parts -------------------------------------------------------------

    @property
    def embedder(self) -> EmbeddingProvider:
        """The embedding provider (created, and for onnx loaded, on first use)."""
        if self._embedder is None:
            from memsearch.embeddings import get_provider

            provider = get_provider(
                self._provider,
                model=self._model,
                batch_size=self._batch_size,
                base_url=self._base_url,
                api_key=self._api_key,
                timeout=self._timeout,
            )
            if self._use_cache:
                from memsearch.embeddings.cache import with_cache

                provider = with_cache(provider)
            self._embedder = provider
        return self._embedder

    @property
    def store(self) -> MilvusStore:
        """The Milvus store; created (with its collection) on first use."""
        with self._open_lock:
            if self._store is None:
                self._store = self._open_settled(create=True)
            else:
                self._store.refresh()  # another memory of this database may have reset it
            if not self._store.exists:  # opened by a read, or reset since: create it
                self._store.ensure_collection(self.embedder.dimension)
            return self._store

    def _search_store(self) -> MilvusStore:
        """A store for search: checks an existing collection's dimension, creates nothing."""
        with self._open_lock:
            if self._store is None:
                self._store = self._open_settled(create=False)
            return self._store

    def _open_settled(self, *, create: bool) -> MilvusStore:
        """Open the store for embedding work (one connection): read-only first, so an existing
        collection's dimension settles the model (:meth:`_settle_model`); then check the
        collection against the model's dimension, or, for a write, create it with that dimension."""
        store = self._open_store(None, create=False)
        try:
            self._settle_model(store.dimension if store.exists else None)
            store.check_dimension(self.embedder.dimension)
            if create:
                store.ensure_collection()
        except BaseException:
            store.close()
            raise
        return store

    def _settle_model(self, dimension: int | None) -> None:
        """The one place where a store's model can differ from the configured one: an index the
        original memsearch built with its default model (``memsearch.engine.migration.settle``).
        ``dimension`` is the existing collection's (None: none)."""
        from memsearch.engine.migration import settle

        settle(self, dimension)

    def _use_model(self, model: str) -> None:
        if model != self._model:
            self._model = model
            if self._embedder is not None:
                self._embedder.close()
            self._embedder = None  # created again, for this model, on first use

    def _open_store(self, dimension: int | None, *, create: bool = True, adopt: bool = True) -> MilvusStore:
        from memsearch.store import MilvusStore

        return MilvusStore(
            self._uri,
            token=self._token,
            collection=self._collection,
            dimension=dimension,
            description=self._description,
            lock_timeout=self._lock_timeout,
            analyzer=self._bm25_analyzer,
            create=create,
            adopt=adopt,
        )

    def _read_store(self) -> MilvusStore:
        """A store for read-only work (expand, stats): never creates a missing collection."""
        if self._store is None:
            self._store = self._open_store(None)
        return self._store

    @property
    def model_name(self) -> str:
        return self._model

    def _lite_path(self) -> Path | None:
        from memsearch.store.uri import resolve_uri

        return resolve_uri(self._uri).path

    def _manifest_file(self) -> Path:
        from memsearch import private
        from memsearch.engine.manifest import manifest_path
        from memsearch.store.uri import resolve_uri

        return manifest_path(private.home(), resolve_uri(self._uri).uri, self._collection)

    def _indexer(self, paths: Sequence[str]) -> Indexer:
        from memsearch.engine.indexer import Indexer, IndexSettings
        from memsearch.engine.multilingual import leg_embedder, leg_model

        if self._store is None and not self._model_chosen:
            # The model the last run settled on (an index the original built), so that an unchanged
            # folder stays a no-op; the store, once opened, confirms it (Indexer restarts if not).
            from memsearch.engine.migration import remembered_model

            self._use_model(remembered_model(self._provider, self._manifest_file()) or self._model)
        settings = IndexSettings(
            tuple(paths),
            model=self._model,
            max_chunk_size=self._max_chunk_size,
            overlap_lines=self._overlap_lines,
            ignore_files=self._ignore_files,
            exclude=self._exclude,
            follow_links=self._follow_links,
            multilingual=leg_model(self),
        )
        return Indexer(
            settings,
            store=lambda: self.store,
            embedder=lambda: self.embedder,
            manifest_file=self._manifest_file(),
            lifecycle=self._lifecycle,
            lite_path=self._lite_path(),
            model=lambda: self._model,
            multilingual=(lambda: leg_embedder(self)) if self._multilingual else None,
        )

    # -- indexing -------------------------------------------------------------------------

    async def index(self, *, force: bool = False) -> int:
        """Index all configured paths; returns the number of chunks embedded in this run."""
        return (await self.index_with_report(force=force)).indexed_chunks

    async def index_with_report(
        self, *, force: bool = False, progress: Progress | None = None
    ) -> IndexReport:
        """Index all configured paths; per-file failures are in the report, not raised."""
        report: IndexReport = await self._perform("index_with_report", locals())
        return report

    async def _index_here(self, *, force: bool, progress: Progress | None) -> IndexReport:
        return await self._indexer(self._paths).index(force=force, progress=progress)

    async def index_file(self, path: str | Path) -> int:
        """Index one file (no ignore rules apply); returns chunks embedded."""
        return int(await self._perform("index_file", locals()))

    async def _index_file_here(self, path: str | Path) -> int:
        return await self._indexer(self._paths).index_file(path)

    def watch(
        self,
        *,
        on_event: OnEvent | None = None,
        on_error: OnError | None = None,
        debounce_ms: int | None = None,
        runner: Callable[[Any], Any] | None = None,
    ) -> FileWatcher | OwnerWatch:
        """Keep the index in step with the configured paths as files change; returns the started
        watcher (``stop()`` it, or use it as a context manager: entering does not start it twice).

        Created, modified, deleted and moved markdown files are indexed or removed after
        ``debounce_ms`` (default 1500) of quiet, with the same ignore rules as ``index``. Events run
        one at a time on the watcher's own thread and event loop. ``on_event(event_type, summary,
        path)`` gets a line per change; ``on_error(event_type, exc, path)`` per-file failures (the
        watcher keeps running). Do not use this instance from another thread during an event
        (``watcher.wait_idle()`` waits for none); when another process owns the store, the watch
        runs there (:class:`~memsearch.service.watching.OwnerWatch`).
        """
        if getattr(self, "_routed", False) and runner is None:
            from memsearch.service.watching import watch_at_owner

            elsewhere = watch_at_owner(self, on_event, on_error, debounce_ms, engine)
            if elsewhere is not None:
                return elsewhere
        return self._watch_here(on_event, on_error, debounce_ms, runner)

    def _watch_here(
        self,
        on_event: OnEvent | None,
        on_error: OnError | None,
        debounce_ms: int | None,
        runner: Callable[[Any], Any] | None = None,
    ) -> FileWatcher:
        from memsearch.watcher import watch_index

        return watch_index(
            self._indexer(self._paths),
            on_event=on_event,
            on_error=on_error,
            debounce_ms=debounce_ms,
            runner=runner,
        )

    async def compact(
        self,
        *,
        source: str | None = None,
        llm_provider: str | None = None,
        llm_model: str | None = None,
        prompt_template: str | None = None,
        output_dir: str | Path | None = None,
        llm_base_url: str | None = None,
        llm_api_key: str | None = None,
        token_budget: int | None = None,
    ) -> str:
        """Summarise indexed chunks (all, or one ``source`` file or folder) with an LLM.

        The summary is appended as a ``## Memory Compact`` section to ``memory/YYYY-MM-DD.md`` under
        ``output_dir``, else under the first of this instance's paths, else under the current
        directory, and indexed at once. Returns the summary; "" means nothing was written (no chunk
        matched, or the LLM answered with nothing). ``llm_provider`` defaults to ``openai``;
        ``prompt_template`` must contain ``{chunks}``; ``token_budget`` caps the chunk text sent
        (the newest chunks are kept). See ``memsearch.compact``.
        """
        from memsearch.compact import DEFAULT_TOKEN_BUDGET, compact_memory, output_base
        from memsearch.llm import LLMSettings

        chosen = (llm_model, llm_base_url, llm_api_key)
        llm = LLMSettings(llm_provider or "openai", *(value or None for value in chosen))
        budget = DEFAULT_TOKEN_BUDGET if token_budget is None else token_budget
        base = output_base(output_dir, self._paths)
        result = await compact_memory(
            self, source=source, llm=llm, prompt_template=prompt_template, base_dir=base, token_budget=budget
        )
        return result.summary

    def query_chunks(self, source: str | None = None) -> list[dict[str, Any]]:
        """The stored rows of every chunk, or of those from the file or folder ``source`` (what
        ``compact`` summarises). Opens the store for writing, as indexing the summary will."""
        return list(self._now("query_chunks", locals()))

    def _query_chunks_here(self, source: str | None) -> list[dict[str, Any]]:
        from memsearch.store import source_prefix_filter

        return self.store.query(filter_expr=source_prefix_filter(source) if source else "")

    def remove_file(self, path: str | Path) -> dict[str, int]:
        """Delete one file's chunks (it may be gone: ``forget``), drop it from the manifest; per source."""
        return dict(self._now("remove_file", locals()))

    def _remove_file_here(self, path: str | Path) -> dict[str, int]:
        return self._indexer(self._paths).remove(path)

    def purge(self) -> dict[str, int]:
        """Rewrite the store's files without its deleted rows (``forget``: gone from disk too)."""
        return dict(self._now("purge", locals()))

    def _purge_here(self) -> dict[str, int]:
        return self._read_store().purge()

    def forget_manifest(self) -> None:
        """Drop the no-change manifest of this store (after ``reset``)."""
        self._manifest_file().unlink(missing_ok=True)

    # -- retrieval ------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        source_prefix: str | None = None,
        since: str | dt.date | None = None,
        until: str | dt.date | None = None,
        time_phrases: bool = True,
        recency_half_life: float | None = None,
        today: str | dt.date | None = None,
        min_relevance: float | None = None,
    ) -> list[dict[str, Any]]:
        """Hybrid search (dense + BM25, fused by weighted RRF); results sorted by descending score.

        The fusion leans towards BM25 for CJK queries and towards the dense leg otherwise
        (``store.hybrid_weights``); rank 1 in both lists still scores 1.0. Each leg fetches
        ``search_candidates`` hits (``top_k`` when more), all are fused, reranked (the best 30,
        with a reranker model) and recency weighted, and only then cut: the first N hits are the
        same at every ``top_k``. Each hit has ``relevance`` in [0, 1], how likely it answers the
        query (``memsearch.engine.relevance``); ``min_relevance`` then leaves out weaker hits.

        Time (``memsearch.engine.time_search``): ``since``/``until`` (inclusive days: a date, a datetime,
        ``"2026-11-03"``, ``"7d"``, ``"昨天"``, ...) keep hits of those days; without them a time
        phrase in the query ("last week", "上周") gives the window and is taken out of the text
        (``time_phrases=False``: searched as written; a phrase's empty window: every day's hits).
        ``recency_half_life`` (days) weighs each score by ``0.5 ** (age / half_life)``. Hits then
        carry ``date`` (a journal entry's ``time``) and, with a window, ``window`` and
        ``in_window``. ``today`` (default: the local date) is the day phrases resolve against.
        """
        hits: list[dict[str, Any]] = await self._perform("search", locals())
        return hits

    async def _search_here(self, query: str, **options: Any) -> list[dict[str, Any]]:
        from memsearch import exits
        from memsearch.engine.time_search import timed_search

        red = exits.redactor()  # hits leave redacted: the store may hold text the original stored
        return [exits.fields(hit, "search", using=red) for hit in await timed_search(self, query, **options)]

    def get_chunk(self, chunk_hash: str) -> dict[str, Any]:
        """The stored row of one chunk; raises ChunkNotFoundError when there is none."""
        row: dict[str, Any] = self._now("get_chunk", locals())
        return row

    def _get_chunk_here(self, chunk_hash: str) -> dict[str, Any]:
        from memsearch.engine.expand import chunk_not_found, validate_chunk_hash

        row = self._read_store().get_by_hash(validate_chunk_hash(chunk_hash))
        if row is None:
            raise chunk_not_found(chunk_hash)
        return row

    def expand(self, chunk_hash: str, *, section: bool = True, context_lines: int | None = None) -> Expansion:
        """The full section (or ±N lines) around a chunk, read from its markdown file."""
        expansion: Expansion = self._now("expand", locals())
        return expansion

    def _expand_here(self, chunk_hash: str, section: bool, context_lines: int | None) -> Expansion:
        from memsearch.engine.expand import expand_chunk

        return expand_chunk(self._get_chunk_here(chunk_hash), section=section, context_lines=context_lines)

    def count(self, *, missing_ok: bool = True) -> int:
        """Chunks in the collection; 0 for none (never indexed, or reset) unless not ``missing_ok``."""
        return int(self._now("count", locals()))

    def _count_here(self, missing_ok: bool) -> int:
        try:
            return self._read_store().count()
        except CollectionNotFoundError:
            if missing_ok:
                return 0
            raise

    def export_page(self, after: str = "", limit: int = 500) -> dict[str, Any]:
        """The store a page at a time, with its vectors, for a copy of it: ``MilvusStore.export_page``."""
        return dict(self._now("export_page", locals()))

    def _export_page_here(self, after: str, limit: int) -> dict[str, Any]:
        return self._read_store().export_page(after, limit)

    def reset(self) -> None:
        """Drop the collection and forget the manifest; the markdown files are untouched. Works on a
        damaged Milvus Lite collection too (StoreDamagedError's hint names this way out): the
        collection is then dropped without reading it."""
        self._now("reset", locals())

    def _reset_here(self) -> None:
        from memsearch.errors import StoreDamagedError

        try:
            store = self._read_store()
        except StoreDamagedError:  # dropped without reading it
            with self._open_store(None, adopt=False) as damaged:
                damaged.drop()
        else:
            store.drop()
        self.forget_manifest()

    # -- lifecycle ------------------------------------------------------------------------

    def release_model(self) -> None:
        """Let loaded local models go (the next embedding loads them again): ``ModelLifecycle``."""
        for model in (self._embedder, self._leg):
            if model is not None:
                model.release_model()

    def close(self) -> None:
        """Close the store and the providers' connections (reopened on next use); hand an owned store on."""
        self._let_go()
        for model in (self._embedder, self._leg):
            if model is not None:
                model.close()

    async def aclose(self) -> None:
        """:meth:`close` from a coroutine (the provider's client is closed on the running loop)."""
        self._let_go()
        for model in (self._embedder, self._leg):
            if model is not None:
                await model.aclose()

    def _let_go(self) -> None:
        """Close the store, then (the database free first) stop owning it if nothing else here uses it."""
        if self._store is not None:
            self._store.close()
            self._store = None
        if getattr(self, "_routed", False) and "memsearch.service.owner" in sys.modules:
            from memsearch.service import owner

            owner.let_go(self._uri, self)

    def __enter__(self) -> MemSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Constructor arguments that are not the engine's settings (where, and this process's own choice).
_NOT_SETTINGS = frozenset({"self", "paths", "milvus_uri", "model_lifecycle", "ignore_files", "exclude"})


def engine(paths: Sequence[str | Path] | None = None, **kwargs: Any) -> MemSearch:
    """A ``MemSearch`` working on the store here, never asking an owner: the memory service's engines
    (which keep their model warm between requests, and let it go when idle: ``ModelLifecycle.IDLE``)."""
    ms = MemSearch(paths, **kwargs, model_lifecycle=ModelLifecycle.IDLE)
    ms._routed = False
    return ms


def engine_settings(cfg: MemSearchConfig, paths: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    """What a service is sent to build ``from_config(cfg, paths, **extra)``'s engine: every setting
    spelled out (so equal settings share one engine), absolute paths."""
    absolute = [str(Path(p).expanduser().resolve()) for p in paths]
    return {**MemSearch.from_config(cfg, paths, **extra)._settings, "paths": absolute}
