"""Markdown tables of evaluation results (the console output and the README use the same text)."""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.metrics import METRICS, Comparison
from evaluation.runner import RunResult

_HEADERS = {"recall@1": "R@1", "recall@5": "R@5", "recall@10": "R@10", "mrr": "MRR", "ndcg@10": "nDCG@10"}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def overall_table(results: Sequence[RunResult]) -> str:
    """One row per configuration: the five metrics, chunk count and search latency."""
    header = ["configuration", *(_HEADERS[m] for m in METRICS), "chunks", "p50 ms", "mean ms"]
    rows = []
    for r in results:
        if r.skipped:
            rows.append([r.config.name, *("–" for _ in METRICS), "–", "–", f"skipped: {r.skipped}"])
            continue
        overall = r.summary["all"]
        rows.append(
            [
                r.config.name,
                *(f"{overall[m]:.3f}" for m in METRICS),
                str(r.chunks),
                f"{r.latency_p50:.1f}",
                f"{r.latency_mean:.1f}",
            ]
        )
    return _table(header, rows)


def category_table(results: Sequence[RunResult], metric: str = "recall@5") -> str:
    """Per-category values of one metric, one column per configuration."""
    shown = [r for r in results if not r.skipped]
    if not shown:
        return ""
    categories = [c for c in shown[0].summary if c != "all"]
    header = ["category", "n", *(r.config.name for r in shown)]
    rows = []
    for category in sorted(categories):
        n = int(shown[0].summary[category]["n"])
        rows.append([category, str(n), *(f"{r.summary[category][metric]:.3f}" for r in shown)])
    return _table(header, rows)


def comparison_table(comparisons: Sequence[tuple[str, str, Comparison]]) -> str:
    """Paired comparisons: A vs B, metric, means, per-query wins/losses/ties, sign-test p."""
    header = ["A", "B", "metric", "A", "B", "Δ", "wins", "losses", "ties", "p"]
    rows = [
        [
            a,
            b,
            _HEADERS.get(c.metric, c.metric),
            f"{c.mean_a:.3f}",
            f"{c.mean_b:.3f}",
            f"{c.delta:+.3f}",
            str(c.wins),
            str(c.losses),
            str(c.ties),
            f"{c.p_value:.3g}",
        ]
        for a, b, c in comparisons
    ]
    return _table(header, rows)
