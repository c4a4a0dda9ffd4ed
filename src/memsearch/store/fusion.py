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

#: Weight of the dense leg for a query not in a CJK script (BM25 has 1.0). Any value above ~1.15
#: makes the dense leg win every tie and near-tie; on the evaluation sets 1.05-3 gave the same
#: Recall@5 and 1.5 was within 0.01 MRR of the best everywhere (evaluation/README.md).
HYBRID_TILT = 1.5
#: A query word that names one thing (an identifier, error code, ticket number or hash): ASCII
#: letters and digits, maybe joined by ``_ - . : # /``, at least 4 characters, and either mixing
#: letters and digits, holding an underscore, in camelCase, or all digits.
_WORD_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:#/-]*[A-Za-z0-9])?")
_NAMES_ONE_THING = (
    re.compile(r"(?=.*\d)(?=.*[A-Za-z])"),
    re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]"),
    re.compile(r"[a-z][A-Z]"),
    re.compile(r"^\d+$"),
)
#: Han, kana and hangul: scripts that general-purpose English embedding models read poorly and that
#: the jieba BM25 analyzer segments.
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


#: (dense, BM25) fusion weights by the script of the query (:func:`query_script`).
QUERY_WEIGHTS: dict[str, tuple[float, float]] = {
    # English (and any other non-CJK) questions: both legs vote, the dense leg leads.
    "other": (HYBRID_TILT, 1.0),
    # Chinese, Japanese, Korean: BM25 with jieba alone. The default (English) model ranks Chinese
    # text near chance, and under RRF any vote of it outweighs BM25's own order: at 1 : 1.5 hybrid
    # MRR on manpages-zh was 0.708 against BM25's 0.796, and Chinese time-scoped questions found
    # their day's turn first in 58 % of cases (90 % with this row). Measured in evaluation/README.md.
    "cjk": (0.0, 1.0),
}


def query_script(query: str) -> str:
    """``"cjk"`` when ``query`` holds a Han, kana or hangul character, else ``"other"``."""
    return "cjk" if _CJK_RE.search(query) else "other"


def hybrid_weights(query: str) -> tuple[float, float]:
    """(dense, BM25) fusion weights for ``query``: its script's row of :data:`QUERY_WEIGHTS`.

    Why: plain RRF lets the weaker leg drag the stronger one down. On the evaluation sets the dense
    leg beats BM25 on English questions, while BM25 with Chinese segmentation beats the (English)
    default model on Chinese by a wide margin; leaning towards the stronger leg (for Chinese, to it
    alone) made hybrid at least as good as either leg alone.
    """
    return QUERY_WEIGHTS[query_script(query)]


def exact_words(query: str) -> list[str]:
    """The words of ``query`` that name one thing (see ``_NAMES_ONE_THING``), in order."""
    found = []
    for word in _WORD_RE.findall(query):
        if len(word) >= 4 and any(p.search(word) for p in _NAMES_ONE_THING) and word not in found:
            found.append(word)
    return found


def holds_word(hit: Any, word: str) -> bool:
    """Whether a raw hit's text holds ``word`` as a whole word (any case)."""
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", re.IGNORECASE)
    return bool(pattern.search((hit.get("entity") or {}).get("content") or ""))


def rare_count(candidates: int) -> int:
    """The most holders a word may have among ``candidates`` and still count as rare."""
    return max(1, candidates // 2)


def _exact_first(hits: list[Any], words: list[str]) -> list[str]:
    """Keys of BM25 hits whose text holds one of ``words`` as a whole word, when few of them do.

    Why: a token that occurs in one note (``zq31337x``, ``ERR_1042``, a ticket number) puts that
    note first in the BM25 list, but one BM25 rank is worth less than the dense leg's top ~30 under
    the tilt towards the dense leg, so the note fell out of the top k. The word is rare when at
    most half of BM25's candidates (and at least one) hold it; a word most of them hold (``utf-8``
    in an FAQ) is left to the fusion."""
    keys: list[str] = []
    for word in words:
        holding = [_key(hit) for hit in hits if holds_word(hit, word)]
        if 0 < len(holding) <= rare_count(len(hits)):
            keys += [key for key in holding if key not in keys]
    return keys


def exact_holders_first(
    query: str, sparse: list[Any], top_k: int, holders: Callable[[str, int], list[dict[str, Any]]]
) -> list[Any]:
    """The BM25 hits, led by the few chunks that hold an exact word of ``query`` BM25 missed.

    Why: the BM25 analyzer splits an identifier into its parts (``TM-2026`` into ``tm`` and
    ``2026``), and when the parts are common (every ticket starts ``TM-``, every date holds
    ``2026``) the one note holding the whole identifier is not among BM25's hits, so the slot of
    :func:`fuse` cannot put it first. ``holders(word, limit)`` (the store's literal match on the
    stored text) finds it; it is kept only when rare (the slot's own rule), and asked only for words
    no BM25 hit holds."""
    extra: list[Any] = []
    for word in exact_words(query):
        if any(holds_word(hit, word) for hit in sparse):
            continue
        found = [
            {"id": row["chunk_hash"], "distance": 0.0, "entity": row} for row in holders(word, top_k + 1)
        ]
        found = [hit for hit in found if holds_word(hit, word)]
        if 0 < len(found) <= rare_count(top_k):
            extra += found
    if not extra:
        return sparse
    seen = {hit["id"] for hit in extra}
    return extra + [hit for hit in sparse if _key(hit) not in seen]


def _key(hit: Any) -> str:
    return str(hit.get("id") or (hit.get("entity") or {}).get("chunk_hash"))


def fuse(
    ranked: dict[str, list[Any]], weights: tuple[float, float] | None, top_k: int, query: str = ""
) -> list[dict[str, Any]]:
    """Fuse the legs' raw hits (``{"dense": [...], "sparse": [...]}``, best first) by RRF.

    ``weights`` (dense, BM25) weighs each leg's ``1 / (k + rank)``; ``None`` is plain RRF, as in the
    original. Scores are normalised so rank 1 in every list scores 1.0. Hits are visited heaviest
    leg first, so a tie keeps the heavier leg's order.

    With weights (memsearch's fusion), BM25 hits that hold a rare exact word of ``query``
    (:func:`exact_words`, :func:`_exact_first`) come first, in BM25 order, scored as the best hit.
    """
    weight = dict(zip(LEGS, weights or (1.0, 1.0), strict=True))
    scores: dict[str, float] = {}
    hits: dict[str, Any] = {}
    for name in sorted(ranked, key=lambda n: -weight[n]):
        for rank, hit in enumerate(ranked[name], 1):
            key = _key(hit)
            scores[key] = scores.get(key, 0.0) + weight[name] / (RRF_K + rank)
            hits.setdefault(key, hit)
    best = sum(weight[name] for name in ranked) / (RRF_K + 1)
    first = _exact_first(ranked.get("sparse", []), exact_words(query)) if weights and query else []
    order = first + [k for k in sorted(scores, key=lambda k: -scores[k]) if k not in first]  # stable
    top = max(scores.values(), default=0.0)
    fused = []
    for key in order[:top_k]:
        result = hit_to_result(hits[key], float)
        score = top if key in first else scores[key]
        result["score"] = min(1.0, score / best)  # rank 1 in both: 1.0, not 1.0000000000000002
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
