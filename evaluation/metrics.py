"""Retrieval metrics over line-span gold answers, and the paired comparison of two configurations.

The hit rule: a search result answers a gold span when its source path is the gold path and its
line range overlaps the gold range (``hit.start <= gold.end and gold.start <= hit.end``). A chunk
that shares one line with the answer counts: what a user (or an agent running ``expand``) needs is
to land in the right place.

Per query, with ``G`` the gold spans and results ranked 1..n (n <= 10):

- ``recall@k``: the share of gold spans answered by some result at rank <= k;
- ``rr`` (averaged into MRR): 1 / the rank of the first result answering any gold span, else 0;
- ``ndcg@10``: binary gains, where a result gains 1 when it answers a gold span no earlier result
  answered (several chunks of the same answer earn credit once); the ideal ranks one new gold span
  per position, ``IDCG = sum(1/log2(i+1) for i in 1..min(|G|, 10))``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from evaluation.dataset import Gold, Query

#: The cut-offs reported for recall.
RECALL_KS = (1, 5, 10)
#: Results fetched per query: the deepest cut-off any metric needs.
DEPTH = 10
#: Metric names in report order.
METRICS = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10")


@dataclass(frozen=True)
class Hit:
    """One search result, reduced to what the metrics need (``path`` relative to the corpus)."""

    path: str
    start_line: int
    end_line: int


def overlaps(hit: Hit, gold: Gold) -> bool:
    """The hit rule: same path and overlapping inclusive line ranges."""
    return hit.path == gold.path and hit.start_line <= gold.end_line and gold.start_line <= hit.end_line


def query_scores(hits: Sequence[Hit], gold: Sequence[Gold]) -> dict[str, float]:
    """Every metric of :data:`METRICS` for one ranked result list (only the top :data:`DEPTH` count)."""
    ranked = list(hits[:DEPTH])
    first_rank: dict[int, int] = {}  # gold index -> rank of the first result answering it
    first_any = 0
    dcg = 0.0
    for rank, hit in enumerate(ranked, 1):
        answered = [i for i, g in enumerate(gold) if overlaps(hit, g)]
        if answered and not first_any:
            first_any = rank
        new = [i for i in answered if i not in first_rank]
        for i in new:
            first_rank[i] = rank
        if new:
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold), DEPTH) + 1))
    scores = {f"recall@{k}": sum(1 for r in first_rank.values() if r <= k) / len(gold) for k in RECALL_KS}
    scores["mrr"] = 1.0 / first_any if first_any else 0.0
    scores["ndcg@10"] = dcg / ideal if ideal else 0.0
    return scores


def mean_scores(per_query: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each metric over queries (all zeros for no queries)."""
    rows = list(per_query)
    if not rows:
        return dict.fromkeys(METRICS, 0.0)
    return {m: sum(row[m] for row in rows) / len(rows) for m in METRICS}


def summarize(queries: Sequence[Query], per_query: Mapping[str, Mapping[str, float]]) -> dict[str, dict]:
    """``{"all": means, "<category>": means, ...}`` plus query counts under ``"n"``."""
    groups: dict[str, list[Mapping[str, float]]] = {"all": []}
    for q in queries:
        row = per_query[q.qid]
        groups["all"].append(row)
        groups.setdefault(q.category, []).append(row)
    return {name: {**mean_scores(rows), "n": len(rows)} for name, rows in groups.items()}


@dataclass(frozen=True)
class Comparison:
    """Per-query wins and losses of configuration A against B on one metric."""

    metric: str
    wins: int
    losses: int
    ties: int
    mean_a: float
    mean_b: float
    p_value: float

    @property
    def delta(self) -> float:
        return self.mean_a - self.mean_b


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test: how likely a split at least this uneven is under no difference."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def compare(
    a: Mapping[str, Mapping[str, float]], b: Mapping[str, Mapping[str, float]], metric: str = "mrr"
) -> Comparison:
    """Paired comparison over the queries both runs answered (ties: equal within 1e-9)."""
    qids = [q for q in a if q in b]
    wins = sum(1 for q in qids if a[q][metric] > b[q][metric] + 1e-9)
    losses = sum(1 for q in qids if a[q][metric] < b[q][metric] - 1e-9)
    ties = len(qids) - wins - losses
    mean_a = sum(a[q][metric] for q in qids) / len(qids) if qids else 0.0
    mean_b = sum(b[q][metric] for q in qids) / len(qids) if qids else 0.0
    return Comparison(metric, wins, losses, ties, mean_a, mean_b, sign_test(wins, losses))
