"""``MilvusStore``'s reads by filter: all rows a page at a time, one chunk, the chunks of files,
the indexed files, the count, and the store a page at a time with its vectors.

A part of :class:`~memsearch.store.milvus.MilvusStore` of its own (``StoreReads``, which it
derives from): the scalar queries every indexing run, ``compact``, ``forget`` and ``migrate`` make.
Each goes through the store's driver like the rest of the store (``_guard``); on Milvus Lite the
driver answers them from the search snapshot when it can (``memsearch.store.lite``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from memsearch.store.driver_errors import quiet
from memsearch.store.filters import escape_filter_value, source_equals, source_prefix_filter
from memsearch.store.rows import QUERY_FIELDS, chunked, stored_value

if TYPE_CHECKING:
    from memsearch.store.driver import StoreDriver

P = ParamSpec("P")
R = TypeVar("R")
IN_BATCH = 256  # values per ``source in [...]`` query


class StoreReads:
    """The reads of :class:`~memsearch.store.milvus.MilvusStore` (see the module docstring)."""

    _collection: str
    page_size: int

    if TYPE_CHECKING:

        def _guard(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R: ...
        def _driver(self) -> StoreDriver: ...
        def _require_collection(self) -> None: ...
        @property
        def uri(self) -> str: ...
        @property
        def dimension(self) -> int | None: ...
        @property
        def analyzer(self) -> str: ...

    def _iter_rows(self, filter_expr: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        """All rows matching ``filter_expr``, a page at a time.

        One plain query answers small results; when a full page comes back, a query iterator
        (primary-key cursor) walks the rest without Milvus's 16,384 offset+limit window.
        """
        self._require_collection()
        page = max(1, int(self.page_size))
        first = self._guard(
            self._driver().query, self._collection, filter=filter_expr, output_fields=fields, limit=page
        )
        if len(first) < page:
            yield from first
            return
        iterator = self._guard(
            self._driver().query_iterator,
            self._collection,
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
