"""Fusing the retrievers: which legs exist, and weighted RRF over their candidates.

The fusion is computed here from the legs' raw hits, the same way on Milvus Lite and on a server
(Milvus' own RRF ranker gives the same scores; only the order of exact ties may differ), so a
score means the same thing wherever the index lives.

Rank once, cut late: the legs are asked for a number of candidates that does not depend on how
many results the caller wants (``search.candidates``), the fusion ranks all of them, and only
then is the list cut. A leg's hits are put in one order that does not depend on how they were
fetched (:func:`leg_order`: by score, ties by chunk hash), so the hits of several filtered calls
merge into the list one call would give (:func:`merge_legs`). The first :data:`VOTING_RANKS` of
each leg vote; deeper candidates only order what the votes leave unplaced. So the top N at any
``top_k`` up to the depth is the first N of any longer list, and the hits the votes place are
the same at any depth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memsearch.store.rows import QUERY_FIELDS
from memsearch.store.weights import (
    HYBRID_TILT,
    MULTILINGUAL,
    Weights,
    as_weights,
    hit_content,
    hybrid_weights,
    query_script,
)

__all__ = ["HYBRID_TILT", "LEGS", "MULTILINGUAL", "Weights", "fuse", "hybrid_weights", "query_script"]

#: The two retrievers: leg -> (vector field, search params, its distance as a score). Milvus Lite
#: reports BM25 negated (smaller = better), a server positive: abs() is the score on both. Cosine
#: similarity is already "higher is better".
LEGS: dict[str, tuple[str, dict[str, Any], Callable[[float], float]]] = {
    "dense": ("embedding", {"metric_type": "COSINE", "params": {}}, float),
    "sparse": ("sparse_vector", {"metric_type": "BM25"}, abs),
}
#: What ``MilvusStore.search`` can ask: both legs fused by RRF, or one leg alone.
SEARCH_MODES = ("hybrid", *LEGS)
#: Every leg's distance as a score: the chunk collection's two, and the multilingual leg's (cosine
#: similarity of the second vectors, in the store's sidecar: ``store.multilingual``).
LEG_SCORES: dict[str, Callable[[float], float]] = {
    **{leg: score for leg, (_, _, score) in LEGS.items()},
    MULTILINGUAL: float,
}

#: RRF constant (as the original's ``RRFRanker(60)``). Fused scores are divided by the best score
#: the legs can give together (rank 1 in both lists), so 1.0 means "top of both lists".
RRF_K = 60
#: The ranks of each leg that vote in memsearch's weighted fusion (:func:`fuse`). With RRF's k of
#: 60 a rank counts almost as much as the one above it, so over deep candidate lists a chunk ranked
#: 40th by both legs outscores the first hit of one (on the evaluation sets, fusing 50 hits per leg
#: lost 0.10 to 0.16 MRR on manpages-zh and 0.02 on debian-faq against 10: docs/architecture.md
#: #ranking). Ten voting ranks rank exactly as the fusion the evaluation tables measured; the
#: deeper candidates only order what those votes leave unplaced.
VOTING_RANKS = 10

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


#: The most notes a word may be in and still count as rare (:func:`rare_count`).
RARE_HOLDERS = 5


def rare_count(candidates: int) -> int:
    """The most holders a word may have among ``candidates`` BM25 hits and still count as rare: at
    most half of them, and never more than :data:`RARE_HOLDERS` (a word in a dozen notes names no
    one thing, however deep the candidate lists are)."""
    return max(1, min(RARE_HOLDERS, candidates // 2))


def _exact_first(hits: list[Any], words: list[str]) -> list[str]:
    """Keys of BM25 hits whose text holds one of ``words`` as a whole word, when few of them do.

    Why: a token that occurs in one note (``zq31337x``, ``ERR_1042``, a ticket number) puts that
    note first in the BM25 list, but one BM25 rank is worth less than the dense leg's top ~30 under
    the tilt towards the dense leg, so the note fell out of the top k. The word is rare when at
    most half of ``hits`` (BM25's voting ranks), and at least one, hold it; a word most of them hold
    (``utf-8`` in an FAQ) is left to the fusion."""
    keys: list[str] = []
    for word in words:
        holding = [_key(hit) for hit in hits if holds_word(hit, word)]
        if 0 < len(holding) <= rare_count(len(hits)):
            keys += [key for key in holding if key not in keys]
    return keys


def exact_holders_first(
    query: str, sparse: list[Any], depth: int, holders: Callable[[str, int], list[dict[str, Any]]]
) -> list[Any]:
    """The BM25 hits, led by the few chunks that hold an exact word of ``query`` BM25 missed.

    Why: the BM25 analyzer splits an identifier into its parts (``TM-2026`` into ``tm`` and
    ``2026``), and when the parts are common (every ticket starts ``TM-``, every date holds
    ``2026``) the one note holding the whole identifier is not among BM25's hits, so the slot of
    :func:`fuse` cannot put it first. ``holders(word, limit)`` (the store's literal match on the
    stored text) finds it; it is kept only when rare (the slot's own rule), and asked only for
    words no voting BM25 hit holds (:data:`VOTING_RANKS`; deeper ones move up). Holders with equal
    (zero) scores come in chunk-hash order, whatever order the store listed them in."""
    extra: list[Any] = []
    rare = rare_count(min(depth, VOTING_RANKS))
    for word in exact_words(query):
        if any(holds_word(hit, word) for hit in sparse[:VOTING_RANKS]):
            continue
        found = [{"id": row["chunk_hash"], "distance": 0.0, "entity": row} for row in holders(word, rare + 1)]
        found = leg_order([hit for hit in found if holds_word(hit, word)], "sparse")
        if 0 < len(found) <= rare:
            extra += found
    if not extra:
        return sparse
    seen = {hit["id"] for hit in extra}
    return extra + [hit for hit in sparse if _key(hit) not in seen]


def hit_key(hit: Any) -> str:
    """A raw hit's chunk hash."""
    return str(hit.get("id") or (hit.get("entity") or {}).get("chunk_hash"))


_key = hit_key


@dataclass
class Ranking:
    """A hybrid search's candidates, fused and best first (``hits``: result dicts), the cosine
    similarity to the query of each candidate the dense leg returned (by chunk hash), and of each
    the multilingual leg returned (``crossing``: the multilingual model's similarity)."""

    hits: list[dict[str, Any]]
    similarity: dict[str, float] = field(default_factory=dict)
    crossing: dict[str, float] = field(default_factory=dict)


def leg_score(hit: Any, leg: str) -> float:
    """A raw hit's score in ``leg``, higher is better (cosine similarity, or the BM25 score)."""
    return LEG_SCORES[leg](float(hit.get("distance", 0.0)))


def leg_order(hits: list[Any], leg: str) -> list[Any]:
    """``hits`` best first by their ``leg`` score, equal scores by chunk hash: one order whatever
    call (or calls) returned them, so that the ranking never depends on how it was fetched."""
    return sorted(hits, key=lambda hit: (-leg_score(hit, leg), _key(hit)))


def merge_legs(lists: list[list[Any]], leg: str, depth: int) -> list[Any]:
    """The best ``depth`` of several calls' hits of one leg (each hit once), in :func:`leg_order`.

    Why it is exact: a chunk's score does not depend on the call's filter (cosine similarity is the
    chunk's own; BM25's term statistics are the collection's, not the filtered rows'), so the
    calls' lists, each filtered to a part of the rows, merge into the list of one call over all of
    them."""
    seen: dict[str, Any] = {}
    for hits in lists:
        for hit in hits:
            seen.setdefault(_key(hit), hit)
    return leg_order(list(seen.values()), leg)[:depth]


def fuse(
    ranked: dict[str, list[Any]],
    weights: Weights | tuple[float, float] | None,
    top_k: int | None = None,
    query: str = "",
) -> list[dict[str, Any]]:
    """Fuse the legs' raw hits (``{"dense": [...], "sparse": [...]}``, and ``"multilingual"`` when
    that leg ran; each best first) by RRF; every fused hit, or the first ``top_k``.

    ``weights`` weighs each leg's ``1 / (k + rank)`` (:class:`~memsearch.store.weights.Weights`:
    per leg, by whether the chunk is in the query's script; a (dense, BM25) pair weighs every
    chunk alike); ``None`` is plain RRF over every rank, as in the original. Scores are normalised
    so rank 1 in every list that votes scores 1.0. Hits are visited heaviest leg first, so a tie
    keeps the heavier leg's order (and then that leg's :func:`leg_order`).

    With weights (memsearch's fusion), only the first :data:`VOTING_RANKS` ranks of each leg vote:
    the score is their weighted RRF, and a candidate below them in every leg (or that no leg gives
    weight) scores 0, ordered after the others by its deeper ranks. BM25 hits that hold a rare exact
    word of ``query`` (:func:`exact_words`, :func:`_exact_first`) come first, in BM25 order, scored
    as the best hit.
    """
    table = as_weights(weights)
    voting = VOTING_RANKS if table else None
    scores: dict[str, float] = {}  # the votes: what the score is
    deep: dict[str, float] = {}  # every rank: orders what the votes leave tied
    hits: dict[str, Any] = {}
    for name in sorted(ranked, key=lambda n: -(table.heaviest(n) if table else 1.0)):
        for rank, hit in enumerate(ranked[name], 1):
            key = _key(hit)
            hits.setdefault(key, hit)
            weight = table.of(name, hit_content(hits[key])) if table else 1.0
            share = weight / (RRF_K + rank)
            deep[key] = deep.get(key, 0.0) + share
            scores[key] = scores.get(key, 0.0) + (share if voting is None or rank <= voting else 0.0)
    best = (table.best(ranked) if table else len(ranked)) / (RRF_K + 1)
    # The slot looks at the voting ranks alone, so it too is the same at every candidate depth.
    voters = ranked.get("sparse", [])[:voting]
    first = _exact_first(voters, exact_words(query)) if table and query else []
    rest = sorted((k for k in scores if k not in first), key=lambda k: (-scores[k], -deep[k]))  # stable
    top = max(scores.values(), default=0.0)
    fused = []
    for key in (first + rest)[:top_k] if top_k is not None else first + rest:
        result = hit_to_result(hits[key], float)
        score = top if key in first else scores[key]
        # rank 1 in every leg that votes: 1.0, not 1.0000000000000002
        result["score"] = min(1.0, score / best) if best else 0.0
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
