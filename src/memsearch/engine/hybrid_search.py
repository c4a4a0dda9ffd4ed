"""The one hybrid search of the engine: both legs, fused by the store, reranked when set.

Why a module of its own: ``MemSearch.search`` (``core``) adds the caller's arguments around it (a
window of days, recency: ``time_search``), and this is the part that touches the model and the
store; on a cold start it overlaps the two (below).

Rank once, cut late: the legs fetch ``search.candidates`` hits each whatever the caller wants
(more only when it wants more), and this returns every candidate ranked; the caller reweights and
cuts. So the top N at any ``top_k`` up to the depth is the first N of a longer list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.core import MemSearch
    from memsearch.embeddings import EmbeddingProvider
    from memsearch.store import MilvusStore

#: Hybrid candidates a reranker rescores (the best of the fusion; ``top_k`` when larger). Fixed,
#: so that a reranked list too is the same at every ``top_k`` up to it.
RERANK_CANDIDATES = 30


@dataclass
class Ranked:
    """A search's candidates, best first, and what their relevance needs: the query's vector, the
    store, and the cosine similarities the dense leg already gave (by chunk hash)."""

    hits: list[dict[str, Any]]
    vector: Sequence[float] = ()
    store: MilvusStore | None = None
    similarity: dict[str, float] = field(default_factory=dict)
    model: str = ""  # the embedding model (the similarity's calibration is per model)
    #: The multilingual model's similarities of the candidates its leg returned, and the query's
    #: vector of that model (the leg on; looked up for the other hits as :attr:`similarity` is).
    crossing: dict[str, float] = field(default_factory=dict)
    crossing_vector: Sequence[float] | None = None

    def add_relevance(self, query: str, hits: list[dict[str, Any]]) -> None:
        """Give each of ``hits`` (some of :attr:`hits`, after the cut) its ``relevance``
        (``memsearch.engine.relevance``). A hit the dense leg did not return gets its similarity
        from one dense call restricted to those chunks."""
        from memsearch.engine.relevance import QueryTerms, relevance
        from memsearch.store.weights import MULTILINGUAL

        missing = [h["chunk_hash"] for h in hits if h["chunk_hash"] not in self.similarity]
        if missing and self.store is not None and self.vector:
            self.similarity.update(self.store.similarity(self.vector, missing))
        missing = [h["chunk_hash"] for h in hits if h["chunk_hash"] not in self.crossing]
        if missing and self.store is not None and self.crossing_vector is not None:
            self.crossing.update(self.store.similarity(self.crossing_vector, missing, MULTILINGUAL))
        terms = QueryTerms.of(query)
        for hit in hits:
            content = str(hit.get("content") or "")
            key = hit["chunk_hash"]
            hit["relevance"] = relevance(
                terms, content, self.similarity.get(key), self.model, self.crossing.get(key)
            )


async def hybrid(ms: MemSearch, query: str, *, wanted: int, filters: Sequence[str] = ("",)) -> Ranked:
    """Every candidate of the hybrid search of ``query`` among the chunks any of ``filters``
    selects, best first (reranked when a reranker model is set). ``wanted`` is how many results
    the caller will keep: each leg fetches ``search.candidates`` hits, or ``wanted`` when more."""
    import asyncio

    from memsearch.store import hybrid_weights

    embedder = ms.embedder
    depth = max(ms._candidates, wanted)

    def lexical() -> tuple[MilvusStore, list[Any]]:
        store = ms._search_store()
        return store, store.leg("sparse", query, depth, filters)

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
    # The store runs the legs not run yet and fuses them (MilvusStore.ranked: the one place), on a
    # worker thread: the memory service answers many clients from one event loop, and the store's
    # work (NumPy, which lets go of the GIL) then runs for two of them at once on two cores.
    crossing = await _crossing_vector(ms, store, query)
    ranking = await asyncio.to_thread(
        store.ranked,
        vectors[0],
        query_text=query,
        depth=depth,
        filters=filters,
        weights=hybrid_weights(query),
        leg_hits=leg_hits,
        multilingual=crossing,
    )
    hits = ranking.hits
    if ms._reranker_model and hits:
        from memsearch.reranker import rerank_async

        keep = max(RERANK_CANDIDATES, wanted)
        hits = await rerank_async(query, hits[:keep], model_name=ms._reranker_model, top_k=keep)
    return Ranked(hits, vectors[0], store, ranking.similarity, ms.model_name, ranking.crossing, crossing)


async def _crossing_vector(ms: MemSearch, store: MilvusStore, query: str) -> list[float] | None:
    """The query's vector of the multilingual model, when ``ms`` has the leg on and the store has
    its vectors (``engine.multilingual``); None otherwise (two legs). A store indexed before the
    leg was turned on is searched with two legs, and says so once."""
    if not ms._multilingual:
        return None
    if not store.multilingual.exists():
        from memsearch.engine.multilingual import warn_no_vectors

        warn_no_vectors(ms)
        return None
    from memsearch.engine.multilingual import leg_embedder

    vectors = await _embed_query(leg_embedder(ms), query, ms._lifecycle.drops_after_use)
    return vectors[0]


async def _embed_query(embedder: EmbeddingProvider, query: str, release: bool) -> list[list[float]]:
    vectors = await embedder.embed_query([query])
    if release:
        embedder.release_model()
    return vectors
