"""The chunk collection's schema and indexes (the original memsearch's), built with any driver.

Why a module of its own: the schema is what makes an index built here open in the original
memsearch (and the other way round), so it is stated once, apart from the store's calls; each
driver supplies its own field and function types (:meth:`StoreDriver.schema_types`).
"""

from __future__ import annotations

from typing import Any

from memsearch.store.driver import IndexParams, SchemaBuilder, StoreDriver
from memsearch.store.rows import FIELD_MAX_BYTES


def chunk_schema(
    driver: StoreDriver, dimension: int, description: str, analyzer_params: dict[str, Any] | None
) -> tuple[SchemaBuilder, IndexParams]:
    """(schema, index params) of a chunk collection with ``dimension``-wide vectors: a FLAT cosine
    index on ``embedding`` and BM25 over ``content`` (``analyzer_params``: its tokenizer)."""
    DataType, Function, FunctionType = driver.schema_types()
    schema = driver.create_schema(enable_dynamic_field=True, description=description)
    schema.add_field(
        "chunk_hash", DataType.VARCHAR, max_length=FIELD_MAX_BYTES["chunk_hash"], is_primary=True
    )
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=dimension)
    content_params: dict[str, Any] = {"max_length": FIELD_MAX_BYTES["content"], "enable_analyzer": True}
    if analyzer_params is not None:
        content_params["analyzer_params"] = analyzer_params
    schema.add_field("content", DataType.VARCHAR, **content_params)
    schema.add_field("sparse_vector", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("source", DataType.VARCHAR, max_length=FIELD_MAX_BYTES["source"])
    schema.add_field("heading", DataType.VARCHAR, max_length=FIELD_MAX_BYTES["heading"])
    schema.add_field("heading_level", DataType.INT64)
    schema.add_field("start_line", DataType.INT64)
    schema.add_field("end_line", DataType.INT64)
    schema.add_function(
        Function(
            name="bm25_fn",
            function_type=FunctionType.BM25,
            input_field_names=["content"],
            output_field_names=["sparse_vector"],
        )
    )
    index_params = driver.prepare_index_params()
    index_params.add_index(field_name="embedding", index_type="FLAT", metric_type="COSINE")
    index_params.add_index(field_name="sparse_vector", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    return schema, index_params
