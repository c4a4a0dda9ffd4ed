"""``MilvusStore``: a memsearch chunk collection in Milvus Lite or a Milvus server.

Owns the collection's schema (the original's) and its life (adopt, create, drop), upsert, delete,
and paginated scalar queries; the search legs and their fusion are :mod:`memsearch.store.searching`'s
(``Searching``, a part of the store). Connecting is :mod:`memsearch.store.connect`'s. The driver is one typed
interface for Lite and servers (:class:`~memsearch.store.driver.StoreDriver`); every call to it
goes through ``_guard``, so every driver failure becomes a :mod:`memsearch.errors` class
(:mod:`memsearch.store.driver_errors`).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from memsearch import errors
from memsearch.config.schema import DEFAULT_COLLECTION, DEFAULT_MILVUS_URI
from memsearch.store.analyzer import analyzer_name, analyzer_params_for, prepare_jieba
from memsearch.store.connect import check_shape, open_driver
from memsearch.store.driver_errors import (
    GENERIC_HINT,
    damaged_error,
    driver_message,
    is_damage,
    is_driver_error,
    quiet,
)
from memsearch.store.filters import escape_filter_value, source_equals, source_prefix_filter
from memsearch.store.multilingual import Sidecar
from memsearch.store.rows import QUERY_FIELDS, batches, chunked, prepare_rows, stored_value
from memsearch.store.schema import chunk_schema
from memsearch.store.searching import Searching
from memsearch.store.uri import StoreLocation, resolve_uri

if TYPE_CHECKING:
    from memsearch.store.driver import StoreDriver

logger = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_URI = DEFAULT_MILVUS_URI  # the schema's default (memsearch.config.schema), under its old name

PAGE_SIZE = 1000  # rows per query page (Milvus caps offset+limit at 16384)
IN_BATCH = 256  # values per ``source in [...]`` query
DELETE_BATCH = 1000  # primary keys per delete call

_DESCRIPTION_PROPERTY = "memsearch.description"
_COLLECTION_NOT_FOUND = 100  # Milvus error code


class MilvusStore(Searching):
    """A memsearch chunk collection in Milvus Lite (a local ``.db`` directory) or a Milvus server.

    ``dimension=None`` opens read-only: a missing collection is never created, and reads on it
    raise :class:`~memsearch.errors.CollectionNotFoundError`. ``create=False`` (what ``search``
    uses) checks the dimension of an existing collection but creates nothing at open: a read never
    leaves a store behind, not even the Milvus Lite directory; the first write
    (:meth:`upsert`, :meth:`ensure_collection`) creates what is missing. ``lock_timeout`` is how long to wait
    for a Lite database another process holds. ``analyzer`` (``"auto"``, ``"standard"``,
    ``"jieba"``) is the BM25 analyzer of a collection this store creates. Use as a context manager,
    or call :meth:`close`.
    """

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        *,
        token: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        dimension: int | None = 1536,
        description: str = "",
        lock_timeout: float = 10.0,
        analyzer: str = "auto",
        create: bool = True,
        adopt: bool = True,
    ) -> None:
        self._location = resolve_uri(uri)
        check_shape(self._location)  # also for a read of a path that does not exist
        # Only used when this store creates the collection; an existing one keeps its analyzer.
        self._analyzer_params = analyzer_params_for(analyzer, local=self._location.is_local)
        self._token = token
        self._collection = collection
        self._dimension = dimension
        self._description = description
        self._lock_timeout = lock_timeout
        self._client: StoreDriver | None = None
        self._exists = False
        self._analyzer = "standard"
        self._collection_dimension: int | None = None
        self._analyzer_ready = False
        #: Rows per query page; an attribute so tests can exercise paging on small collections.
        self.page_size = PAGE_SIZE
        self._create = create and dimension is not None
        #: False: open the database without reading the collection (its schema, segments,
        #: indexes), so that :meth:`drop` works on a damaged collection.
        self._adopt = adopt
        self._closed = False
        self._sidecar: Sidecar | None = None
        path = self._location.path
        if path is not None and not self._create and not path.exists():
            return  # nothing to read, and a read must not create the database: connect on a write
        self._connect()

    def _connect(self) -> None:
        self._client = open_driver(self._location, token=self._token, lock_timeout=self._lock_timeout)
        if not self._adopt:
            return
        try:
            self._ensure_collection()
        except BaseException:
            self.close()
            raise

    # -- calling the driver -------------------------------------------------------------------

    def _guard(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Call a driver function quietly; driver exceptions become memsearch errors."""
        with quiet():
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if not is_driver_error(exc):
                    raise
                raise self._translate(exc) from exc

    def _driver(self) -> StoreDriver:
        """The connected driver (connecting first to a Lite database that appeared since); call its
        operations through :meth:`_guard`, e.g. ``self._guard(self._driver().flush, name)``."""
        if self._client is None and not self._closed:
            path = self._location.path
            if path is None or not path.exists():
                raise self._not_found()  # a Lite database that does not exist (yet) holds nothing
            self._connect()  # it appeared since this store was opened
        if self._client is None:
            raise errors.StoreError(
                f"The store for {self._location.display} is closed", hint="Open a new MilvusStore."
            )
        return self._client

    def _translate(self, exc: BaseException) -> errors.StoreError:
        code, message = driver_message(exc)
        missing = code == _COLLECTION_NOT_FOUND or type(exc).__name__ == "CollectionNotFoundError"
        if missing and self._collection in message:
            self._exists = False
            return self._not_found()
        if self._location.path is not None and is_damage(exc):
            return damaged_error(self._location.path, exc)
        label = f"Milvus error (code {code})" if code is not None else "Milvus error"
        return errors.StoreError(f"{label}: {message}", hint=GENERIC_HINT)

    def _not_found(self) -> errors.CollectionNotFoundError:
        return errors.CollectionNotFoundError(
            f"No collection '{self._collection}' at {self._location.display}",
            hint="Run `memsearch index <paths>` first (or check --collection / --milvus-uri).",
        )

    # -- the collection -----------------------------------------------------------------------

    def _ensure_collection(self) -> None:
        if self._guard(self._driver().has_collection, self._collection):
            self._adopt_existing()
        elif self._create:
            self._create_collection()

    def ensure_collection(self, dimension: int | None = None) -> None:
        """Make the collection exist before a write: adopt it if it appeared, else create it (with
        ``dimension`` when this store was opened without one); connects first if it had not."""
        if self._exists:
            return
        if self._dimension is None:
            self._dimension = dimension
        if self._dimension is None:
            raise self._not_found()
        self._create = True
        if self._client is None and not self._closed:
            self._connect()
        else:
            self._ensure_collection()

    def check_dimension(self, dimension: int) -> None:
        """Set the vector dimension of this store's embedding model (a store opened without one):
        raise :class:`~memsearch.errors.DimensionMismatchError` when the existing collection has
        another; a missing collection is later created with it."""
        existing = self._collection_dimension if self._exists else None
        if existing is not None and existing != dimension:
            raise self._mismatch(existing, dimension)
        self._dimension = dimension

    def _mismatch(self, existing: int, dimension: int) -> errors.DimensionMismatchError:
        return errors.DimensionMismatchError(
            f"Embedding dimension mismatch: collection '{self._collection}' has dim={existing} "
            f"but the current embedding provider outputs dim={dimension}. Run 'memsearch reset "
            "--yes' to drop the collection and re-index, or use a different --milvus-uri / --collection.",
            hint="after the reset, `memsearch index <paths>` rebuilds the index (a reset forgets what was "
            "indexed, so every file is embedded again)",
        )

    def _adopt_existing(self) -> None:
        info = self._guard(self._driver().describe_collection, self._collection)
        fields = {field.get("name"): field for field in info.get("fields", [])}
        dim_raw = fields.get("embedding", {}).get("params", {}).get("dim")
        existing_dim = int(dim_raw) if dim_raw is not None else None
        if self._dimension is not None and existing_dim is not None and existing_dim != self._dimension:
            raise self._mismatch(existing_dim, self._dimension)
        self._collection_dimension = existing_dim
        self._analyzer = analyzer_name(fields.get("content", {}).get("params", {}))
        properties = info.get("properties") or {}
        self._description = info.get("description") or str(properties.get(_DESCRIPTION_PROPERTY, ""))
        # A reopened database starts with its indexed collections released: load before searching.
        self._guard(self._driver().load_collection, self._collection)
        self._exists = True

    def _create_collection(self) -> None:
        assert self._dimension is not None and self._client is not None
        driver = self._driver()
        analyzer_params = self._analyzer_params
        schema, index_params = chunk_schema(driver, self._dimension, self._description, analyzer_params)
        # Milvus Lite drops schema descriptions; a collection property keeps it there too.
        properties = {_DESCRIPTION_PROPERTY: self._description} if self._description else {}
        try:
            self._guard(
                driver.create_collection,
                self._collection,
                schema=schema,
                consistency_level="Strong",  # a hook's write is visible to the next prompt's search
                properties=properties,
            )
        except errors.StoreError:
            if self._guard(driver.has_collection, self._collection):  # another process created it first
                self._adopt_existing()
                return
            raise
        # Indexes on an empty collection are ready at once; pymilvus's default synchronous wait
        # polls every 0.5 s per index (a full second per new collection) for nothing.
        self._guard(driver.create_index, self._collection, index_params, sync=False)
        self._guard(driver.load_collection, self._collection)
        self._collection_dimension = self._dimension
        self._analyzer = analyzer_name({"analyzer_params": analyzer_params})
        self._exists = True

    def _require_collection(self) -> None:
        """Raise CollectionNotFoundError unless the collection exists (it may have appeared since)."""
        if self._exists:
            return
        if self._guard(self._driver().has_collection, self._collection):
            self._adopt_existing()
            return
        raise self._not_found()

    def refresh(self) -> None:
        """Forget the collection if it has gone since this store saw it: another memory of the same
        database (the store's owner serves several) dropped it with ``reset``. The next write then
        creates it again instead of failing."""
        if (
            self._exists
            and self._client is not None
            and not self._guard(self._driver().has_collection, self._collection)
        ):
            self._exists = False

    def _ready_analyzer(self) -> None:
        """Before the first tokenising call on Lite, prepare jieba in this process (see prepare_jieba)."""
        if self._analyzer_ready:
            return
        self._analyzer_ready = True
        if self._location.is_local and self._analyzer == "jieba":
            prepare_jieba()

    # -- properties ---------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The store's location for display (Lite: the resolved path; server: URI, credentials redacted)."""
        return self._location.display

    @property
    def location(self) -> StoreLocation:
        return self._location

    @property
    def is_local(self) -> bool:
        return self._location.is_local

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def exists(self) -> bool:
        """Whether the collection exists (as far as this store knows)."""
        return self._exists

    @property
    def dimension(self) -> int | None:
        """The collection's vector dimension (the requested one before creation; None if unknown)."""
        return self._collection_dimension if self._exists else self._dimension

    @property
    def description(self) -> str:
        return self._description

    @property
    def analyzer(self) -> str:
        """The ``content`` field's BM25 tokenizer: ``"jieba"`` or ``"standard"``."""
        return self._analyzer

    # -- writing ------------------------------------------------------------------------------

    def upsert(self, chunks: Sequence[dict[str, Any]]) -> int:
        """Insert or replace chunks by ``chunk_hash``; returns how many rows were written.

        Extra keys go to dynamic fields. Long text fields are truncated (see module docstring);
        duplicate hashes in one call keep the last row.
        """
        if not chunks:
            return 0
        self.ensure_collection()
        self._ready_analyzer()
        written = 0
        for batch in batches(prepare_rows(chunks)):
            try:
                result = self._guard(self._driver().upsert, self._collection, data=batch)
            except errors.CollectionNotFoundError:  # dropped meanwhile (see refresh): create it again
                self.ensure_collection()
                result = self._guard(self._driver().upsert, self._collection, data=batch)
            count = result.get("upsert_count") if isinstance(result, dict) else None
            written += int(count) if count is not None else len(batch)
        return written

    def delete_by_source(self, source: str) -> None:
        """Delete every chunk of one source file (and its second vectors, :attr:`multilingual`)."""
        self._require_collection()
        self._guard(self._driver().delete, self._collection, filter=source_equals(source))
        self.multilingual.delete_by_source(source)

    def delete_by_hashes(self, hashes: Iterable[str]) -> None:
        """Delete chunks by primary key, and their second vectors (no-op for none)."""
        ids = list(dict.fromkeys(hashes))
        if not ids:
            return
        self._require_collection()
        for batch in chunked(ids, DELETE_BATCH):
            self._guard(self._driver().delete, self._collection, ids=list(batch))
        self.multilingual.delete_by_hashes(ids)

    def drop(self) -> None:
        """Drop the collection and its sidecar if they exist (a no-op otherwise)."""
        if self._client is not None and self._guard(self._driver().has_collection, self._collection):
            self._guard(self._driver().drop_collection, self._collection)
        self.multilingual.drop()
        self._exists = False

    @property
    def multilingual(self) -> Sidecar:
        """The multilingual leg's vectors beside this collection (``store.multilingual``)."""
        if self._sidecar is None:
            self._sidecar = Sidecar(self)
        return self._sidecar

    @property
    def connected(self) -> bool:
        return self._client is not None

    def driver_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One guarded call of the driver (for the sidecar, which shares this connection)."""
        return self._guard(getattr(self._driver(), method), *args, **kwargs)

    def driver(self) -> StoreDriver:
        return self._driver()

    # -- scalar queries -----------------------------------------------------------------------

    def _iter_rows(self, filter_expr: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        """All rows matching ``filter_expr``, a page at a time (:meth:`iter_rows_of`)."""
        self._require_collection()
        return self.iter_rows_of(self._collection, filter_expr, fields)

    def iter_rows_of(self, collection: str, filter_expr: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        """All rows of ``collection`` (this one, or its sidecar) matching ``filter_expr``.

        One plain query answers small results; when a full page comes back, a query iterator
        (primary-key cursor) walks the rest without Milvus's 16,384 offset+limit window.
        """
        page = max(1, int(self.page_size))
        first = self._guard(
            self._driver().query, collection, filter=filter_expr, output_fields=fields, limit=page
        )
        if len(first) < page:
            yield from first
            return
        iterator = self._guard(
            self._driver().query_iterator,
            collection,
            batch_size=page,
            filter=filter_expr,
            output_fields=fields,
        )
        try:
            while True:
                batch = self._guard(iterator.next)
                if not batch:
                    return
                yield from batch
        finally:
            with contextlib.suppress(Exception), quiet():
                iterator.close()

    def query(self, *, filter_expr: str = "") -> list[dict[str, Any]]:
        """Every chunk matching ``filter_expr`` (all chunks when empty), with the seven result fields."""
        expr = filter_expr or 'chunk_hash != ""'
        return [
            {field: row.get(field) for field in QUERY_FIELDS} for row in self._iter_rows(expr, QUERY_FIELDS)
        ]

    def rows_after(self, after: str, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` rows whose chunk ID sorts after ``after`` (``""``: from the first), in
        chunk-ID order, each with its vector (as floats): the store a page at a time, from any
        page on (``memsearch migrate``)."""
        self._require_collection()
        expr = f'chunk_hash > "{escape_filter_value(after)}"' if after else 'chunk_hash != ""'
        fields = [*QUERY_FIELDS, "embedding"]
        iterator = self._guard(
            self._driver().query_iterator,
            self._collection,
            batch_size=limit,
            filter=expr,
            output_fields=fields,
        )
        try:
            rows = self._guard(iterator.next)
        finally:
            with contextlib.suppress(Exception), quiet():
                iterator.close()
        return [
            {
                **{field: row.get(field) for field in QUERY_FIELDS},
                "embedding": [float(x) for x in row["embedding"]],
            }
            for row in rows[:limit]
        ]

    def export_page(self, after: str, limit: int) -> dict[str, Any]:
        """The store a page at a time, for a copy of it (``memsearch migrate``): ``rows``, as
        :meth:`rows_after` gives them, and ``store``, what a copy needs to know of the store (its
        ``uri``, ``collection``, ``count`` of chunks, vector ``dimension`` and BM25 ``analyzer``)."""
        rows = self.rows_after(after, limit)
        store = {"uri": self.uri, "collection": self._collection, "count": self.count()}
        return {"store": {**store, "dimension": self.dimension, "analyzer": self.analyzer}, "rows": rows}

    def get_by_hash(self, chunk_hash: str) -> dict[str, Any] | None:
        """The chunk with this primary key, or None."""
        self._require_collection()
        rows = self._guard(
            self._driver().query,
            self._collection,
            filter=f'chunk_hash == "{escape_filter_value(chunk_hash)}"',
            output_fields=QUERY_FIELDS,
            limit=1,
        )
        return {field: rows[0].get(field) for field in QUERY_FIELDS} if rows else None

    def hashes_by_source(self, source: str) -> set[str]:
        """Chunk hashes stored for one source file."""
        return {row["chunk_hash"] for row in self._iter_rows(source_equals(source), ["chunk_hash"])}

    def hashes_by_sources(self, sources: Iterable[str]) -> dict[str, set[str]]:
        """Chunk hashes for many source files with few queries; every requested source is a key."""
        wanted = list(dict.fromkeys(sources))
        result: dict[str, set[str]] = {source: set() for source in wanted}
        by_stored: dict[str, list[str]] = {}
        for source in wanted:
            by_stored.setdefault(stored_value("source", source), []).append(source)
        stored = list(by_stored)
        for batch in chunked(stored, max(1, IN_BATCH)):
            values = ", ".join(f'"{escape_filter_value(value)}"' for value in batch)
            for row in self._iter_rows(f"source in [{values}]", ["chunk_hash", "source"]):
                for source in by_stored.get(row["source"], ()):
                    result[source].add(row["chunk_hash"])
        return result

    def sources_with_counts(self, under: str = "") -> dict[str, int]:
        """Every indexed source file (at or under the file or folder ``under``) with its chunks."""
        expr = source_prefix_filter(under) if under else 'chunk_hash != ""'
        return dict(Counter(row["source"] for row in self._iter_rows(expr, ["source"])))

    def indexed_sources(self) -> set[str]:
        """Every source file that has at least one chunk (on Milvus Lite from the search snapshot's
        arrays when it is flushed: ``LiteSearcher.distinct``)."""
        self._require_collection()
        fast = self._guard(self._driver().distinct, self._collection, "source")
        if fast is not None:
            return {str(source) for source in fast}
        return set(self.sources_with_counts())

    def count(self) -> int:
        """Number of chunks, from a consistent ``count(*)`` (row-count stats lag on a server)."""
        self._require_collection()
        rows = self._guard(self._driver().query, self._collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def flush(self) -> None:
        """Seal recent writes. On Milvus Lite, rows still in the write buffer are searched row by row
        in Python (several times slower than after a flush, docs/scaling.md), so the indexer flushes
        after a run that changed anything."""
        self._require_collection()
        self._guard(self._driver().flush, self._collection)
        self.multilingual.flush()

    def purge(self) -> dict[str, int]:
        """Take the bytes of deleted rows out of the store's files (``forget``, ``scan --redact``):
        Milvus Lite rewrites them now; a server is asked to compact (``StoreDriver.purge``)."""
        if not self.exists:
            return {}
        self.multilingual.purge()  # a forgotten chunk's second vector leaves the disk too
        return dict(self._guard(self._driver().purge, self._collection))

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Disconnect; for Lite, release the database so another process can open it. Idempotent."""
        client, self._client = self._client, None
        self._closed = True
        if client is None:
            return
        with contextlib.suppress(Exception), quiet():
            client.close()

    def __enter__(self) -> MilvusStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MilvusStore(uri={self.uri!r}, collection={self._collection!r})"
