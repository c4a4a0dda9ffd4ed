"""Fusing the two retrievers: which legs exist, their weights for a query, and weighted RRF.

The fusion is computed here from the legs' raw hits, the same way on Milvus Lite and on a server
(Milvus' own RRF ranker gives the same scores; only the order of exact ties may differ), so a
score means the same thing wherever the index lives.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from memsearch.store.rows import QUERY_FIELDS

#: The two retrievers: leg -> (vector field, search params, its distance as a score). Milvus Lite
#: reports BM25 negated (smaller = better), a server positive: abs() is the score on both. Cosine
#: similarity is already "higher is better".
LEGS: dict[str, tuple[str, dict[str, Any], Callable[[float], float]]] = {
    "dense": ("embedding", {"metric_type": "COSINE", "params": {}}, float),
    "sparse": ("sparse_vector", {"metric_type": "BM25"}, abs),
}
#: What ``MilvusStore.search`` can ask: both legs fused by RRF, or one leg alone.
SEARCH_MODES = ("hybrid", *LEGS)

#: RRF constant (as the original's ``RRFRanker(60)``). Fused scores are divided by the best score
#: the legs can give together (rank 1 in both lists), so 1.0 means "top of both lists".
RRF_K = 60

#: Weight of the favoured leg in :func:`hybrid_weights` (the other leg has 1.0). Any value above
#: ~1.15 makes the favoured leg win every tie and near-tie; on the evaluation sets 1.05-3 gave the
#: same Recall@5 and 1.5 was within 0.01 MRR of the best everywhere (evaluation/README.md).
HYBRID_TILT = 1.5
#: Han, kana and hangul: scripts that general-purpose English embedding models read poorly and that
#: the jieba BM25 analyzer segments.
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def hybrid_weights(query: str) -> tuple[float, float]:
    """(dense, BM25) fusion weights for ``query``: BM25 leads for CJK text, the dense leg otherwise.

    Why: plain RRF lets the weaker leg drag the stronger one down. On the evaluation sets the dense
    leg beats BM25 on English questions, while BM25 with Chinese segmentation beats the (English)
    default model on Chinese by a wide margin; leaning towards the stronger leg made hybrid at
    least as good as either leg alone on every set.
    """
    return (1.0, HYBRID_TILT) if _CJK_RE.search(query) else (HYBRID_TILT, 1.0)


def fuse(
    ranked: dict[str, list[Any]], weights: tuple[float, float] | None, top_k: int
) -> list[dict[str, Any]]:
    """Fuse the legs' raw hits (``{"dense": [...], "sparse": [...]}``, best first) by RRF.

    ``weights`` (dense, BM25) weighs each leg's ``1 / (k + rank)``; ``None`` is plain RRF, as in the
    original. Scores are normalised so rank 1 in every list scores 1.0. Hits are visited heaviest
    leg first, so a tie keeps the heavier leg's order.
    """
    weight = dict(zip(LEGS, weights or (1.0, 1.0), strict=True))
    scores: dict[str, float] = {}
    hits: dict[str, Any] = {}
    for name in sorted(ranked, key=lambda n: -weight[n]):
        for rank, hit in enumerate(ranked[name], 1):
            key = str(hit.get("id") or (hit.get("entity") or {}).get("chunk_hash"))
            scores[key] = scores.get(key, 0.0) + weight[name] / (RRF_K + rank)
            hits.setdefault(key, hit)
    best = sum(weight[name] for name in ranked) / (RRF_K + 1)
    fused = []
    for key in sorted(scores, key=lambda k: -scores[k])[:top_k]:  # stable: ties keep visiting order
        result = hit_to_result(hits[key], float)
        result["score"] = min(1.0, scores[key] / best)  # rank 1 in both: 1.0, not 1.0000000000000002
        fused.append(result)
    return fused


def hit_to_result(hit: Any, score: Callable[[float], float]) -> dict[str, Any]:
    """A result dict; ``score`` maps the driver's distance to the result's score."""
    entity = hit.get("entity") or {}
    result = {field: entity.get(field) for field in QUERY_FIELDS}
    if result["chunk_hash"] is None:
        result["chunk_hash"] = hit.get("chunk_hash", hit.get("id"))
    distance = float(hit.get("distance", 0.0))
    result["score"] = float(score(distance))
    return result
