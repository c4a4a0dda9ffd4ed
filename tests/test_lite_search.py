"""The fast Milvus Lite search path (memsearch.store.lite.fast_search) answers exactly as the engine does.

Real Lite stores with several sealed segments, keys upserted again in a later segment, flushed
deletes, duplicate vectors and texts (ties), a zero vector, English and Chinese queries, filters
and limits from 1 to more than the rows: every search through the fast path must equal, hit for
hit (ids, distances to the last bit, fields), what milvus-lite's own ``Collection.search`` returns
on the same collection. Writes not flushed yet are left to the engine.

The tests call ``LiteSearcher`` directly, past the version gate (``memsearch.store.lite.compat``):
``python -m evaluation.lite_drift`` runs this file against the newest milvus-lite to tell whether
the pinned range can be widened. That this milvus-lite is in the range is tests/test_lite_fence.py's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsearch.config.schema import DEFAULT_CANDIDATES
from memsearch.store import MilvusStore, fuse, source_prefix_filter
from memsearch.store.fusion import leg_order
from memsearch.store.lite import LiteClient
from memsearch.store.lite.fast_search import LiteSearcher
from memsearch.store.rows import QUERY_FIELDS

DIM = 16
COLLECTION = "memsearch_chunks"
ENGLISH = "alpha beta milvus lite search index memory journal agent hook deploy rollback cache token"
CHINESE = "记忆 搜索 索引 部署 回滚 缓存 向量 令牌 融合"
WORDS = [*ENGLISH.split(), *CHINESE.split()]
QUERIES = [
    "alpha milvus search",
    "deploy rollback cache",
    "vector fusion memory agent",
    "记忆 搜索 部署",
    "回滚 缓存 token",
    "nothing-matches-this",
    "",
]
LEGS = {"dense": ("embedding", "COSINE"), "sparse": ("sparse_vector", "BM25")}
FILTERS = [None, source_prefix_filter("/n/a"), "heading_level == 2", 'source == "/n/b.md"']


def _rows(rng: random.Random, prefix: str, count: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        vector = [rng.choice((0.0, 0.5, 1.0, -1.0, 0.25)) for _ in range(DIM)]
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
        rows.append(
            {
                "chunk_hash": f"{prefix}{i:03d}",
                "embedding": vector,
                "content": text,
                "source": rng.choice(("/n/a.md", "/n/b.md", "/n/ab.md")),
                "heading": f"H{i % 3}",
                "heading_level": 1 + i % 3,
                "start_line": i,
                "end_line": i + 2,
            }
        )
    # Ties: the same vector and text under other keys, and a zero vector.
    rows.append({**rows[0], "chunk_hash": f"{prefix}dup0"})
    rows.append({**rows[1], "chunk_hash": f"{prefix}dup1", "source": "/n/b.md"})
    rows.append({**rows[2], "chunk_hash": f"{prefix}zero", "embedding": [0.0] * DIM})
    return rows


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MilvusStore]:
    """A Lite store of three sealed segments, with upserted-again keys and flushed deletes."""
    rng = random.Random(7)
    with MilvusStore(str(tmp_path / "milvus.db"), dimension=DIM, analyzer="jieba") as opened:
        first = _rows(rng, "a", 80)
        opened.upsert(first)
        opened.flush()
        again = [
            {**row, "content": row["content"] + " rollback", "embedding": row["embedding"][::-1]}
            for row in first[:15]
        ]
        opened.upsert(again + _rows(rng, "b", 60))
        opened.flush()
        opened.delete_by_hashes(["a020", "a021", "b005", "b006", "a001"])
        opened.flush()
        opened.upsert(_rows(rng, "c", 30))
        opened.flush()
        yield opened


def _query_vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1.0, 1.0) for _ in range(DIM)]


def _segments(collection: Any) -> tuple[int, ...]:
    """The sealed segments a search reads now. Milvus Lite merges segments in the background after a
    flush; the engine's own answers differ across a merge (ties change order, a distance its last
    bit: the product runs over differently shaped arrays), so a comparison is redone if one
    happened in between."""
    return tuple(id(segment) for segment in collection._read_snapshot()[0])


def _compare(client: LiteClient, searcher: LiteSearcher, *, fast_path: bool) -> int:
    """Every query, leg, filter and limit through the engine and through ``searcher``; returns the
    number of non-empty answers compared."""
    collection = client._collection(COLLECTION)
    rng = random.Random(11)
    compared = 0
    for text in QUERIES:
        vector = _query_vector(rng)
        for leg, (field, metric) in LEGS.items():
            query: Any = vector if leg == "dense" else text
            for expr in FILTERS:
                for limit in (1, 5, 17, 400):
                    while True:  # both on one snapshot (see _segments)
                        before = _segments(collection)
                        engine = collection.search(
                            [query],
                            top_k=limit,
                            metric_type=metric,
                            expr=expr,
                            output_fields=QUERY_FIELDS,
                            anns_field=field,
                        )
                        fast = searcher.search(
                            query,
                            field=field,
                            metric=metric,
                            limit=limit,
                            expr=expr,
                            output_fields=QUERY_FIELDS,
                        )
                        through_client = client.search(
                            COLLECTION,
                            data=[query],
                            anns_field=field,
                            search_params={"metric_type": metric, "params": {}},
                            limit=limit,
                            filter=expr or "",
                            output_fields=QUERY_FIELDS,
                        )
                        if _segments(collection) == before:
                            break
                    if fast_path:
                        assert fast == engine, (leg, text, expr, limit)
                    else:
                        assert fast is None
                    assert through_client == engine, (leg, text, expr, limit)
                    compared += bool(engine and engine[0])
    return compared


def _bm25(searcher: LiteSearcher, text: str) -> Any:
    return searcher.search(
        text, field="sparse_vector", metric="BM25", limit=3, expr=None, output_fields=QUERY_FIELDS
    )


def test_fast_path_equals_the_engine_on_sealed_segments(store: MilvusStore) -> None:
    client = LiteClient(store.uri)
    try:
        searcher = LiteSearcher(client._collection(COLLECTION))
        assert _compare(client, searcher, fast_path=True) > 100
        segments, tombstones = client._collection(COLLECTION)._read_snapshot()
        assert len(segments) >= 2 and tombstones._map  # what the masks are for
    finally:
        client.close()


def test_unflushed_writes_go_to_the_engine_and_a_flush_renews_the_cache(store: MilvusStore) -> None:
    client = LiteClient(store.uri)
    try:
        searcher = LiteSearcher(client._collection(COLLECTION))
        assert _compare(client, searcher, fast_path=True)
        fresh = _rows(random.Random(3), "d", 10)
        fresh[0]["content"] = "zebra unicorn"
        store.upsert(fresh)
        store.delete_by_hashes(["c001"])
        assert _compare(client, searcher, fast_path=False)
        store.flush()
        _compare(client, searcher, fast_path=True)
        hits = _bm25(searcher, "zebra unicorn")
        assert hits is not None and hits[0][0]["id"] == "d000"
        store.delete_by_hashes(["d000"])
        store.flush()
        _compare(client, searcher, fast_path=True)
        hits = _bm25(searcher, "zebra unicorn")
        assert hits == [[]]
    finally:
        client.close()


def test_store_search_results_are_the_engines(store: MilvusStore) -> None:
    """MilvusStore.search (both legs, RRF over the default candidates) over the fast path ranks and
    scores as over the engine."""
    rng = random.Random(5)
    collection = LiteClient(store.uri)
    try:
        engine_collection = collection._collection(COLLECTION)
        for text in QUERIES:
            vector = _query_vector(rng)
            while True:  # both on one snapshot (see _segments)
                before = _segments(engine_collection)
                got = store.search(vector, query_text=text, top_k=10, weights=(1.5, 1.0))
                legs = {
                    leg: leg_order(
                        engine_collection.search(
                            [vector if leg == "dense" else text],
                            top_k=DEFAULT_CANDIDATES,
                            metric_type=metric,
                            output_fields=QUERY_FIELDS,
                            anns_field=field,
                        )[0],
                        leg,
                    )
                    for leg, (field, metric) in LEGS.items()
                }
                if _segments(engine_collection) == before:
                    break
            assert got == fuse(legs, (1.5, 1.0), 10)
    finally:
        collection.close()


def test_dense_leg_on_one_blas_thread_equals_the_engine_on_all_of_them(tmp_path: Path) -> None:
    """At 3,000 x 384 OpenBLAS splits the engine's product over every core; the fast path runs it on
    one thread: the distances must still be the same to the last bit."""
    rng = random.Random(2)
    dim = 384
    rows = [
        {
            "chunk_hash": f"r{i:05d}",
            "embedding": [rng.gauss(0.0, 1.0) for _ in range(dim)],
            "content": f"row {i}",
            "source": "/n/a.md",
            "heading": "",
            "heading_level": 0,
            "start_line": i,
            "end_line": i,
        }
        for i in range(3000)
    ]
    with MilvusStore(str(tmp_path / "big.db"), dimension=dim) as big:
        big.upsert(rows)
        big.flush()
        client = LiteClient(big.uri)
        try:
            collection = client._collection(COLLECTION)
            searcher = LiteSearcher(collection)
            for _ in range(20):
                query = [rng.gauss(0.0, 1.0) for _ in range(dim)]
                engine = collection.search(
                    [query],
                    top_k=10,
                    metric_type="COSINE",
                    output_fields=QUERY_FIELDS,
                    anns_field="embedding",
                )
                fast = searcher.search(
                    query, field="embedding", metric="COSINE", limit=10, expr=None, output_fields=QUERY_FIELDS
                )
                assert fast == engine
        finally:
            client.close()
