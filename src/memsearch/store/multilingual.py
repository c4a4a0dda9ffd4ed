"""The multilingual leg's vectors: a sidecar collection beside the chunk collection, by chunk hash.

Why a sidecar and not a second vector field: the chunk collection is the original memsearch's
schema, and it must stay readable and writable by the original. A new required field would make
the original's inserts fail; a nullable one needs a schema change of an existing collection that
neither Milvus Lite releases nor older servers agree on. So the second vector of a chunk (made by
the multilingual model, ``embedding.multilingual``) lives in ``<collection>_multilingual`` with
just what the leg needs: the chunk's hash (the primary key, the same as the chunk's), its ``source``
(so every filter a search uses, which are filters on ``source``, applies unchanged) and the
vector. No text: a chunk's words are kept in one place only (``forget`` and ``purge`` have one
place to clean, and the sidecar's deletes follow the chunk collection's).

The sidecar is a shadow of a shadow, allowed to lag: a process with the leg off, or the original,
writes chunks without a second vector and may leave vectors of chunks it replaced. Searches only
use sidecar hits whose chunk is still in the chunk collection (:meth:`MilvusStore.search`), and
``index`` with the leg on fills what is missing and drops what is stale (``engine.multilingual``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memsearch import errors
from memsearch.store.filters import escape_filter_value, source_equals
from memsearch.store.rows import FIELD_MAX_BYTES, chunked, stored_value

if TYPE_CHECKING:
    from memsearch.store.milvus import MilvusStore

#: The sidecar of collection ``name`` is ``name + SUFFIX``.
SUFFIX = "_multilingual"
#: Description of a sidecar collection: the model whose vectors it holds follows the prefix.
MODEL_PREFIX = "memsearch multilingual leg: "
_FIELDS = ["chunk_hash", "source"]
#: Rows per upsert, and hashes per delete or ``in`` query.
_BATCH = 500


class Sidecar:
    """The multilingual vectors of one chunk collection (see the module docstring).

    Works through the chunk store's connection and error translation; it exists when its
    collection does (:meth:`exists`), is created by :meth:`ensure`, dropped with the chunk
    collection (``MilvusStore.drop``)."""

    def __init__(self, store: MilvusStore) -> None:
        self._store = store
        self.name = f"{store.collection}{SUFFIX}"
        self._loaded = False

    # -- the collection -------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the sidecar collection exists (loaded for searching on first sight)."""
        if not self._store.connected:
            return False
        found = bool(self._call("has_collection", self.name))
        if found and not self._loaded:
            self._call("load_collection", self.name)
            self._loaded = True
        if not found:
            self._loaded = False
        return found

    def model(self) -> str | None:
        """The model whose vectors the sidecar holds (None: no sidecar)."""
        if not self.exists():
            return None
        info = self._call("describe_collection", self.name)
        properties = info.get("properties") or {}
        text = str(info.get("description") or properties.get("memsearch.description", ""))
        return text.removeprefix(MODEL_PREFIX) if text.startswith(MODEL_PREFIX) else ""

    def dimension(self) -> int | None:
        if not self.exists():
            return None
        info = self._call("describe_collection", self.name)
        for field in info.get("fields", []):
            if field.get("name") == "embedding":
                dim = (field.get("params") or {}).get("dim")
                return int(dim) if dim is not None else None
        return None

    def ensure(self, model: str, dimension: int) -> bool:
        """Make the sidecar hold ``model``'s ``dimension``-wide vectors: create it, or drop and
        create it again when it holds another model's; True when it was (re)created (empty)."""
        if self.exists():
            if self.model() == model and self.dimension() == dimension:
                return False
            self.drop()
        driver = self._store.driver()
        DataType, _, _ = driver.schema_types()
        description = MODEL_PREFIX + model
        schema = driver.create_schema(enable_dynamic_field=False, description=description)
        schema.add_field(
            "chunk_hash", DataType.VARCHAR, max_length=FIELD_MAX_BYTES["chunk_hash"], is_primary=True
        )
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=dimension)
        schema.add_field("source", DataType.VARCHAR, max_length=FIELD_MAX_BYTES["source"])
        index_params = driver.prepare_index_params()
        index_params.add_index(field_name="embedding", index_type="FLAT", metric_type="COSINE")
        try:
            self._call(
                "create_collection",
                self.name,
                schema=schema,
                consistency_level="Strong",
                properties={"memsearch.description": description},
            )
        except errors.StoreError:
            if not self.exists():  # another process created it first: use theirs
                raise
            return False
        self._call("create_index", self.name, index_params, sync=False)
        self._call("load_collection", self.name)
        self._loaded = True
        return True

    def drop(self) -> None:
        if self._store.connected and self._call("has_collection", self.name):
            self._call("drop_collection", self.name)
        self._loaded = False

    # -- rows -----------------------------------------------------------------------------------

    def upsert(self, rows: Sequence[tuple[str, str, Sequence[float]]]) -> int:
        """Write ``(chunk_hash, source, vector)`` rows (replacing those of the same hash)."""
        for batch in chunked(list(rows), _BATCH):
            data = [
                {"chunk_hash": h, "source": stored_value("source", s), "embedding": list(v)}
                for h, s, v in batch
            ]
            self._call("upsert", self.name, data=data)
        return len(rows)

    def delete_by_source(self, source: str) -> None:
        if self.exists():
            self._call("delete", self.name, filter=source_equals(source))

    def delete_by_hashes(self, hashes: Iterable[str]) -> None:
        ids = list(dict.fromkeys(hashes))
        if ids and self.exists():
            for batch in chunked(ids, _BATCH):
                self._call("delete", self.name, ids=list(batch))

    def hashes(self) -> set[str]:
        """Every chunk hash the sidecar holds a vector for."""
        if not self.exists():
            return set()
        return {str(row["chunk_hash"]) for row in self._rows('chunk_hash != ""')}

    def hashes_where(self, expr: str) -> set[str]:
        """The chunk hashes of the sidecar's rows that ``expr`` (a filter on ``source``) selects."""
        if not self.exists():
            return set()
        return {str(row["chunk_hash"]) for row in self._rows(expr)}

    def count(self) -> int:
        if not self.exists():
            return 0
        rows = self._call("query", self.name, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def flush(self) -> None:
        if self.exists():
            self._call("flush", self.name)

    def purge(self) -> dict[str, int]:
        """Take deleted rows out of the files (with the chunk collection's ``purge``)."""
        return dict(self._call("purge", self.name)) if self.exists() else {}

    def search(self, vector: Sequence[float], *, limit: int, filter_expr: str = "") -> list[Any]:
        """The nearest vectors' raw hits, best first (``entity`` holds the hash and source only)."""
        if limit <= 0 or not self.exists():
            return []
        found = self._call(
            "search",
            self.name,
            data=[list(vector)],
            anns_field="embedding",
            search_params={"metric_type": "COSINE", "params": {}},
            limit=limit,
            filter=filter_expr,
            output_fields=_FIELDS,
        )
        return list(found[0]) if found else []

    def _rows(self, expr: str) -> list[dict[str, Any]]:
        return list(self._store.iter_rows_of(self.name, expr, _FIELDS))

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._store.driver_call(method, *args, **kwargs)


def hashes_filter(hashes: Iterable[str]) -> str:
    """``chunk_hash in [...]`` for ``hashes`` (escaped)."""
    return "chunk_hash in [" + ", ".join(f'"{escape_filter_value(h)}"' for h in hashes) + "]"
