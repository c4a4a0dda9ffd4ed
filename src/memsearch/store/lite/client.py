"""Milvus Lite in this process, called directly instead of through pymilvus and gRPC.

Why: milvus-lite 3.x is a pure-Python engine that runs inside the calling process; pymilvus
reaches it through a gRPC server that milvus-lite starts on threads of that same process. The
detour costs ``import pymilvus`` and grpc (~0.3 s on top of what the engine imports), starting the
server, and protobuf encoding of every row and hit: at 2,000 chunks a hybrid search took ~24 ms
through it and ~12 ms directly. The database directory is written by the same engine either way,
so an index built here opens with pymilvus (as the original memsearch opens it) and the other way
round; tests/test_store.py checks both directions.

:class:`LiteClient` is the Lite :class:`~memsearch.store.driver.StoreDriver`: the part of
``pymilvus.MilvusClient`` that ``MilvusStore`` calls, with the same arguments and result shapes, so
the store has one code path for Lite and for servers. Its single-query searches go through the
fast path (:mod:`memsearch.store.lite.fast_search`) when :mod:`memsearch.store.lite.compat` says the
installed milvus-lite is one it was verified on.
Engine failures of every type come out as milvus-lite errors (its gRPC layer answered them as a
status with the reason), which the store turns into one-line memsearch errors like any driver error.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from memsearch.store.lite import compat

if TYPE_CHECKING:
    from memsearch.store.lite.fast_search import LiteSearcher

F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger("memsearch.store")


def _engine_call(fn: F) -> F:
    """Let an engine failure of any type (a ValueError from numpy, an OSError from a full disk) out
    as a ``milvus_lite`` error, so the store reports it as a store error instead of a traceback."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if type(exc).__module__.split(".", 1)[0] == "milvus_lite":
                raise
            from milvus_lite import MilvusLiteError

            raise MilvusLiteError(f"{type(exc).__name__}: {exc}") from exc

    return call  # type: ignore[return-value]


class _Database:
    """One database directory open in this process, shared by every client of it (the engine holds
    an exclusive lock on its directory, so every store in a process, and the memory service keeps
    one per project, must share one engine per path).

    Reopened when its directory is deleted or replaced under it (``rm -rf`` of the store while a
    long-lived owner holds it): the old engine would go on answering from memory what is no longer
    on disk, and write into unlinked files. Checked by identity (device, inode) before each use,
    which costs one ``stat``; the swap waits for the write in flight.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.users = 0
        #: Whether the engine was reopened (see :meth:`current`).
        self.reopened = False
        #: Writes to one database are serialised: the store upserts from worker threads (while the
        #: next batch embeds) and the memory service runs several indexing sources at once. Reads
        #: take the engine's own snapshots and run alongside. Re-entrant: a write may reopen.
        self.writing = threading.RLock()
        self._open()

    def _open(self) -> None:
        from milvus_lite import MilvusLite

        self.engine = MilvusLite(self.path)  # DataDirLockedError if another process holds it
        self.identity = _identity(self.path)

    def current(self, *, create: bool = True) -> Any:
        """The engine, reopened first when the directory it opened is gone or another one; None
        when it is gone and ``create`` is False (a read creates nothing: the indexer then sees a
        deleted store as deleted, and starts its manifest over)."""
        identity = _identity(self.path)
        if identity == self.identity:
            return self.engine
        if identity is None and not create:
            return None
        with self.writing:
            if _identity(self.path) != self.identity:
                logger.warning("the Milvus Lite database %s was deleted or replaced: reopening it", self.path)
                old = self.engine
                self._open()
                self.reopened = True
                with contextlib.suppress(Exception):  # its directory is gone: nothing to keep
                    old.close()
        return self.engine


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


#: Databases open in this process: resolved path -> its shared engine.
_open: dict[str, _Database] = {}
_open_lock = threading.Lock()
#: Serialises collection lookups (see :meth:`LiteClient._collection`).
_lookup_lock = threading.Lock()


def _acquire(path: str) -> _Database:
    with _open_lock:
        database = _open.get(path)
        if database is None:
            database = _open[path] = _Database(path)
        database.users += 1
        return database


def _release(path: str) -> None:
    with _open_lock:
        database = _open.get(path)
        if database is None:
            return
        database.users -= 1
        if database.users > 0:
            return
        del _open[path]
    database.engine.close()  # flushes pending rows, waits for background merges, frees the directory lock


class _Schema:
    """What ``MilvusClient.create_schema()`` returns, built from milvus_lite's own types."""

    def __init__(self, *, enable_dynamic_field: bool = False, description: str = "") -> None:
        self.enable_dynamic_field = enable_dynamic_field
        self.description = description  # Milvus Lite does not store it (neither does its gRPC path)
        self.fields: list[Any] = []
        self.functions: list[Any] = []

    def add_field(self, field_name: str, datatype: Any, **params: Any) -> None:
        from milvus_lite import FieldSchema

        self.fields.append(FieldSchema(name=field_name, dtype=datatype, **params))

    def add_function(self, function: Any) -> None:
        self.functions.append(function)

    def build(self) -> Any:
        from milvus_lite import CollectionSchema

        outputs = {name for fn in self.functions for name in fn.output_field_names}
        for field in self.fields:  # as milvus-lite's gRPC layer marks them
            field.is_function_output = field.name in outputs
        return CollectionSchema(
            fields=self.fields, enable_dynamic_field=self.enable_dynamic_field, functions=self.functions
        )


class _IndexParams:
    """What ``MilvusClient.prepare_index_params()`` returns."""

    def __init__(self) -> None:
        self.specs: list[tuple[str, dict[str, Any]]] = []

    def add_index(self, field_name: str, index_type: str, metric_type: str, **params: Any) -> None:
        self.specs.append(
            (field_name, {"index_type": index_type, "metric_type": metric_type, "params": params})
        )


class _Pages:
    """A query iterator over rows found at its start (the engine has no result window to page
    around), each page read when it is asked for (``read``: rows from what was found)."""

    def __init__(
        self, found: list[Any], size: int, read: Callable[[list[Any]], list[dict[str, Any]]] | None = None
    ) -> None:
        self._found: Iterator[Any] = iter(found)
        self._size = max(1, size)
        self._read = read

    def next(self) -> list[dict[str, Any]]:
        page = [item for _, item in zip(range(self._size), self._found, strict=False)]
        return self._read(page) if self._read is not None and page else page

    def close(self) -> None:
        self._found = iter(())


class LiteClient:
    """A Milvus Lite database directory, opened in this process (see the module docstring)."""

    @_engine_call
    def __init__(self, path: str) -> None:
        self._path = path
        self._database = _acquire(path)
        self._writing = self._database.writing
        self._searchers: dict[str, LiteSearcher] = {}

    @property
    def _db(self) -> Any:
        return self._database.current()

    @staticmethod
    def schema_types() -> tuple[Any, Any, Any]:
        """(DataType, Function, FunctionType) for :meth:`create_schema` fields and functions."""
        from milvus_lite import DataType, Function, FunctionType

        return DataType, Function, FunctionType

    @staticmethod
    def create_schema(*, enable_dynamic_field: bool = False, description: str = "") -> _Schema:
        return _Schema(enable_dynamic_field=enable_dynamic_field, description=description)

    @staticmethod
    def prepare_index_params() -> _IndexParams:
        return _IndexParams()

    # -- collections ------------------------------------------------------------------------

    def _collection(self, name: str) -> Any:
        # Milvus Lite caches a collection object on its first lookup, without a lock: two threads
        # looking it up first at once (the memory service's request threads on a cold start) got
        # two objects, and a search through the one the cache lost found it never loaded.
        db = self._database.current(create=False)
        if db is None:  # the database was deleted: so was the collection (and a read creates nothing)
            from milvus_lite import CollectionNotFoundError

            raise CollectionNotFoundError(f"collection {name!r} not found: {self._path} was deleted")
        with _lookup_lock:
            collection = db.get_collection(name)
        if self._database.reopened:  # the store loaded its collection in the engine it replaced
            collection.load()  # (a no-op once loaded)
        return collection

    @_engine_call
    def has_collection(self, name: str) -> bool:
        db = self._database.current(create=False)
        return db is not None and bool(db.has_collection(name))

    @_engine_call
    def describe_collection(self, name: str) -> dict[str, Any]:
        """The collection in the shape pymilvus describes it (the parts the store reads)."""
        schema = self._collection(name).schema
        fields = []
        for field in schema.fields:
            params: dict[str, Any] = {}
            if field.dim is not None:
                params["dim"] = field.dim
            if field.max_length is not None:
                params["max_length"] = field.max_length
            if field.enable_analyzer:
                params["enable_analyzer"] = True
            if field.analyzer_params is not None:
                params["analyzer_params"] = field.analyzer_params
            fields.append({"name": field.name, "type": field.dtype, "params": params})
        return {
            "collection_name": name,
            "description": "",
            "fields": fields,
            "enable_dynamic_field": schema.enable_dynamic_field,
            "properties": dict(schema.properties),
        }

    @_engine_call
    def create_collection(
        self,
        name: str,
        *,
        schema: _Schema,
        properties: dict[str, Any] | None = None,
        consistency_level: str = "Strong",  # one process, one engine: always strong
    ) -> None:
        with self._writing:
            self._db.create_collection(name, schema.build(), properties=properties or None)

    # A write looks its collection up under the write lock: a collection object taken before a
    # drop_collection (another memory of the database resetting it) writes into a closed WAL.

    @_engine_call
    def create_index(self, name: str, index_params: _IndexParams, *, sync: bool = True) -> None:
        with self._writing:
            collection = self._collection(name)
            for field, params in index_params.specs:
                collection.create_index(field, params)

    @_engine_call
    def load_collection(self, name: str) -> None:
        self._collection(name).load()

    @_engine_call
    def drop_collection(self, name: str) -> None:
        with self._writing:
            self._db.drop_collection(name)

    @_engine_call
    def flush(self, name: str) -> None:
        with self._writing:
            self._collection(name).flush()

    # -- rows -------------------------------------------------------------------------------

    @_engine_call
    def upsert(self, name: str, *, data: list[dict[str, Any]]) -> dict[str, int]:
        with self._writing:
            collection = self._collection(name)
            return {"upsert_count": len(collection.upsert(data))}

    @_engine_call
    def delete(self, name: str, *, filter: str = "", ids: Iterable[Any] | None = None) -> dict[str, int]:
        with self._writing:
            collection = self._collection(name)
            if ids is None:
                ids = [row[collection.pk_field] for row in self._rows(name, collection, filter, [], None)]
            pks = list(ids)
            return {"delete_count": collection.delete(pks) if pks else 0}

    @_engine_call
    def purge(self, name: str) -> dict[str, int]:
        """Rewrite the data files that hold deleted rows (:mod:`memsearch.store.lite.purge`)."""
        from memsearch.store.lite.purge import purge_deleted

        with self._writing:
            return purge_deleted(self._collection(name))

    @_engine_call
    def search(
        self,
        name: str,
        *,
        data: list[Any],
        anns_field: str,
        search_params: dict[str, Any],
        limit: int,
        filter: str = "",
        output_fields: list[str] | None = None,
    ) -> list[list[dict[str, Any]]]:
        collection = self._collection(name)
        if len(data) == 1 and not search_params.get("params") and compat.supported():
            # One query (the store's legs): the engine's answer without its per-row loops.
            try:
                fast = self._searcher(name, collection).search(
                    data[0],
                    field=anns_field,
                    metric=search_params.get("metric_type"),
                    limit=limit,
                    expr=filter or None,
                    output_fields=output_fields,
                )
            except Exception as exc:  # a case the fast path misjudged: the engine's own search answers
                compat.failed(exc)
                fast = None
            if fast is not None:
                return fast
        hits: list[list[dict[str, Any]]] = collection.search(
            data,
            top_k=limit,
            metric_type=search_params.get("metric_type"),
            expr=filter or None,
            output_fields=output_fields,
            anns_field=anns_field,
            search_params=search_params.get("params") or None,
        )
        return hits

    @_engine_call
    def distinct(self, name: str, field: str) -> set[Any] | None:
        """The distinct values of ``field`` among the live rows, from the search snapshot's arrays
        (None when it does not apply: the caller queries)."""
        collection = self._collection(name)
        if not compat.supported():
            return None
        try:
            return self._searcher(name, collection).distinct(field)
        except Exception as exc:  # a case the fast path misjudged: the engine's query answers
            compat.failed(exc)
            return None

    def _count(self, name: str, collection: Any) -> int:
        """Live rows: from the search snapshot's masks when it applies (the engine's
        ``num_entities`` walks every row's key on every call: ``memsearch stats``)."""
        if compat.supported():
            try:
                count = self._searcher(name, collection).count()
            except Exception as exc:  # a case the fast path misjudged: the engine counts
                compat.failed(exc)
                count = None
            if count is not None:
                return count
        return int(collection.num_entities)

    def _searcher(self, name: str, collection: Any) -> LiteSearcher:
        """The fast search path of collection ``name`` (one per name: a dropped and recreated
        collection is a new object, and replaces the old one's cache)."""
        from memsearch.store.lite.fast_search import LiteSearcher

        searcher = self._searchers.get(name)
        if searcher is None or searcher.collection is not collection:
            searcher = self._searchers[name] = LiteSearcher(collection)
        return searcher

    @_engine_call
    def query(
        self, name: str, *, filter: str = "", output_fields: list[str] | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        collection = self._collection(name)
        if output_fields == ["count(*)"]:
            if not filter:
                return [{"count(*)": self._count(name, collection)}]
            return [{"count(*)": len(self._rows(name, collection, filter, [], None))}]
        return self._rows(name, collection, filter, output_fields, limit)

    @_engine_call
    def query_iterator(
        self, name: str, *, batch_size: int, filter: str = "", output_fields: list[str] | None = None
    ) -> _Pages:
        collection = self._collection(name)
        if compat.supported():
            searcher = self._searcher(name, collection)
            try:
                found = searcher.matches(filter or None, order_by_pk=True)
            except Exception as exc:  # a case the fast path misjudged: the engine's query answers
                compat.failed(exc)
                found = None
            if found is not None:  # each page read when it is asked for (a cursor over the snapshot)
                return _Pages(found, batch_size, lambda page: searcher.rows(page, output_fields))
        rows = collection.query(filter or None, output_fields=output_fields, order_by_pk=True)
        return _Pages(rows, batch_size)

    def _rows(
        self,
        name: str,
        collection: Any,
        filter: str,
        output_fields: list[str] | None,
        limit: int | None,
        *,
        order_by_pk: bool = False,
    ) -> list[dict[str, Any]]:
        """``Collection.query``'s rows: from the search snapshot when it applies (the engine's
        query reads every row of the store first: ``LiteSearcher.query``)."""
        if compat.supported():
            try:
                fast = self._searcher(name, collection).query(
                    filter or None, output_fields, limit, order_by_pk=order_by_pk
                )
            except Exception as exc:  # a case the fast path misjudged: the engine's query answers
                compat.failed(exc)
                fast = None
            if fast is not None:
                return fast
        rows: list[dict[str, Any]] = collection.query(
            filter or None, output_fields=output_fields, limit=limit, order_by_pk=order_by_pk
        )
        return rows

    def close(self) -> None:
        path, self._path = self._path, ""
        if path:
            _release(path)
