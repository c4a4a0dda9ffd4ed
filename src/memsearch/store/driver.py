"""The store's one driver interface: the calls ``MilvusStore`` makes, typed, for Lite and servers alike.

Why: the store used to call its client by method name as a string (``_call("upsert", ...)``), so a
misspelt or missing method, or a wrong argument, showed only when that line ran. :class:`StoreDriver`
names every operation with its arguments and result, and mypy checks each call against it. Two
classes satisfy it: :class:`memsearch.store.lite.LiteClient` (Milvus Lite in this process) and
:class:`ServerDriver`, which adapts pymilvus' ``MilvusClient`` for a Milvus server or Zilliz Cloud
(imported only there: pymilvus costs ~0.8 s and is the ``server`` extra).

Results keep pymilvus' shapes (``{"upsert_count": n}``, hits as ``{"id", "distance", "entity"}``
mappings), which the Lite client returns too, so the store has one code path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol


class SchemaBuilder(Protocol):
    """What ``create_schema`` returns: fields and functions are added, then the collection is created."""

    def add_field(self, field_name: str, datatype: Any, **params: Any) -> Any: ...

    def add_function(self, function: Any) -> Any: ...


class IndexParams(Protocol):
    """What ``prepare_index_params`` returns."""

    def add_index(self, field_name: str, index_type: str, metric_type: str, **params: Any) -> Any: ...


class RowPages(Protocol):
    """A query iterator: pages of rows until an empty one."""

    def next(self) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class StoreDriver(Protocol):
    """A connected database: every operation ``MilvusStore`` asks of Milvus Lite or a server."""

    def schema_types(self) -> tuple[Any, Any, Any]:
        """(DataType, Function, FunctionType) of this driver, for schema fields and the BM25 function."""
        ...

    def create_schema(
        self, *, enable_dynamic_field: bool = False, description: str = ""
    ) -> SchemaBuilder: ...

    def prepare_index_params(self) -> IndexParams: ...

    def has_collection(self, name: str) -> bool: ...

    def describe_collection(self, name: str) -> Mapping[str, Any]: ...

    def create_collection(
        self,
        name: str,
        *,
        schema: Any,
        properties: dict[str, Any] | None = None,
        consistency_level: str = "Strong",
    ) -> None: ...

    def create_index(self, name: str, index_params: Any, *, sync: bool = True) -> None: ...

    def load_collection(self, name: str) -> None: ...

    def drop_collection(self, name: str) -> None: ...

    def flush(self, name: str) -> None: ...

    def upsert(self, name: str, *, data: list[dict[str, Any]]) -> Mapping[str, Any]: ...

    def delete(
        self, name: str, *, filter: str = "", ids: Iterable[Any] | None = None
    ) -> Mapping[str, Any]: ...

    def purge(self, name: str) -> Mapping[str, int]:
        """Take deleted rows' bytes out of the store's files where the driver can (Milvus Lite:
        rewritten now; a server: compaction requested, done by the server when it decides)."""
        ...

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
    ) -> Sequence[Sequence[Any]]:
        """Hits per query vector (or text, for BM25), best first."""
        ...

    def distinct(self, name: str, field: str) -> set[Any] | None:
        """The distinct values of ``field`` among the live rows, or None: not answerable cheaply here
        (the store then queries every row)."""
        ...

    def query(
        self, name: str, *, filter: str = "", output_fields: list[str] | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]: ...

    def query_iterator(
        self, name: str, *, batch_size: int, filter: str = "", output_fields: list[str] | None = None
    ) -> RowPages: ...

    def close(self) -> None: ...


class ServerDriver:
    """pymilvus' ``MilvusClient`` (a Milvus server or Zilliz Cloud) as a :class:`StoreDriver`."""

    def __init__(self, client: Any, pymilvus: Any) -> None:
        self._client = client
        self._pymilvus = pymilvus

    def schema_types(self) -> tuple[Any, Any, Any]:
        return self._pymilvus.DataType, self._pymilvus.Function, self._pymilvus.FunctionType

    def create_schema(self, *, enable_dynamic_field: bool = False, description: str = "") -> SchemaBuilder:
        schema: SchemaBuilder = self._client.create_schema(
            enable_dynamic_field=enable_dynamic_field, description=description
        )
        return schema

    def prepare_index_params(self) -> IndexParams:
        params: IndexParams = self._client.prepare_index_params()
        return params

    def has_collection(self, name: str) -> bool:
        return bool(self._client.has_collection(name))

    def describe_collection(self, name: str) -> Mapping[str, Any]:
        info: Mapping[str, Any] = self._client.describe_collection(name)
        return info

    def create_collection(
        self,
        name: str,
        *,
        schema: Any,
        properties: dict[str, Any] | None = None,
        consistency_level: str = "Strong",
    ) -> None:
        self._client.create_collection(
            name, schema=schema, consistency_level=consistency_level, properties=properties or {}
        )

    def create_index(self, name: str, index_params: Any, *, sync: bool = True) -> None:
        self._client.create_index(name, index_params, sync=sync)

    def load_collection(self, name: str) -> None:
        self._client.load_collection(name)

    def drop_collection(self, name: str) -> None:
        self._client.drop_collection(name)

    def flush(self, name: str) -> None:
        self._client.flush(name)

    def upsert(self, name: str, *, data: list[dict[str, Any]]) -> Mapping[str, Any]:
        result: Mapping[str, Any] = self._client.upsert(name, data=data)
        return result

    def delete(self, name: str, *, filter: str = "", ids: Iterable[Any] | None = None) -> Mapping[str, Any]:
        if ids is not None:
            result: Mapping[str, Any] = self._client.delete(name, ids=list(ids))
        else:
            result = self._client.delete(name, filter=filter)
        return result

    def purge(self, name: str) -> Mapping[str, int]:
        self._client.compact(name)  # asynchronous: the server compacts when its scheduler runs it
        return {"purged": 0, "files": 0, "rows": 0, "requested": 1}

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
    ) -> Sequence[Sequence[Any]]:
        hits: Sequence[Sequence[Any]] = self._client.search(
            name,
            data=data,
            anns_field=anns_field,
            search_params=search_params,
            limit=limit,
            filter=filter,
            output_fields=output_fields,
        )
        return hits

    def distinct(self, name: str, field: str) -> set[Any] | None:
        return None  # a server has no cheaper way than the query the store makes then

    def query(
        self, name: str, *, filter: str = "", output_fields: list[str] | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        extra = {"limit": limit} if limit is not None else {}
        return list(self._client.query(name, filter=filter, output_fields=output_fields, **extra))

    def query_iterator(
        self, name: str, *, batch_size: int, filter: str = "", output_fields: list[str] | None = None
    ) -> RowPages:
        pages: RowPages = self._client.query_iterator(
            name, batch_size=batch_size, filter=filter, output_fields=output_fields
        )
        return pages

    def close(self) -> None:
        self._client.close()
