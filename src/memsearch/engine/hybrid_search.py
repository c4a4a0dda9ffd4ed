"""The one hybrid search of the engine: both legs, fused by the store, reranked when set.

Why a module of its own: ``MemSearch.search`` (``core``) adds the caller's arguments around it (a
window of days, recency: ``time_search``), and this is the part that touches the model and the
store; on a cold start it overlaps the two (below).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.core import MemSearch
    from memsearch.embeddings import EmbeddingProvider
    from memsearch.store import MilvusStore

#: Hybrid candidates per final result handed to the reranker.
RERANK_FACTOR = 3


async def hybrid(ms: MemSearch, query: str, *, top_k: int, filter_expr: str = "") -> list[dict[str, Any]]:
    """The hybrid search of ``query`` among the chunks ``filter_expr`` selects, reranked when
    a reranker model is set."""
    import asyncio

    from memsearch.store import hybrid_weights

    embedder = ms.embedder
    fetch_k = top_k * RERANK_FACTOR if ms._reranker_model else top_k

    def lexical() -> tuple[MilvusStore, list[Any]]:
        store = ms._search_store()
        return store, store.search_leg("sparse", query, top_k=fetch_k, filter_expr=filter_expr)

    leg_hits: dict[str, list[Any]] = {}
    if ms._store is None:
        # A cold start (one CLI search): open the store (Milvus Lite start, jieba) and run the
        # BM25 leg, which needs no vector, on a worker thread while the model loads and embeds
        # the query; the model's work releases the GIL, so the two overlap on 2 cores. Once
        # both are loaded, the same overlap measured no faster (GIL hand-offs eat the gain).
        release = ms._lifecycle.drops_after_use
        await asyncio.to_thread(embedder.prepare)  # a first run's model files, before the store
        vectors, (store, leg_hits["sparse"]) = await asyncio.gather(
            _embed_query(embedder, query, release), asyncio.to_thread(lexical)
        )
        if ms._embedder is not embedder:  # the store settled another model (_settle_model)
            vectors = await _embed_query(ms.embedder, query, release)
    else:
        vectors = await _embed_query(embedder, query, ms._lifecycle.drops_after_use)
        store = ms._search_store()
    # The store runs the legs not run yet and fuses them (MilvusStore.search: the one place), on a
    # worker thread: the memory service answers many clients from one event loop, and the store's
    # work (NumPy, which lets go of the GIL) then runs for two of them at once on two cores.
    results: list[dict[str, Any]] = await asyncio.to_thread(
        store.search,
        vectors[0],
        query_text=query,
        top_k=fetch_k,
        filter_expr=filter_expr,
        weights=hybrid_weights(query),
        leg_hits=leg_hits,
    )
    if ms._reranker_model and results:
        from memsearch.reranker import rerank_async

        results = await rerank_async(query, results, model_name=ms._reranker_model, top_k=top_k)
    return results[:top_k]


async def _embed_query(embedder: EmbeddingProvider, query: str, release: bool) -> list[list[float]]:
    vectors = await embedder.embed_query([query])
    if release:
        embedder.release_model()
    return vectors
