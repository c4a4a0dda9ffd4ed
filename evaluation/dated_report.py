"""The tables of the ``dated-journals`` set: plain vs time-aware search, overall and per category.

Besides the usual overall table, R@1, R@5 and MRR per category (``time-en``, ``time-zh``,
``plain-en``, ``plain-zh``), paired sign tests of each time-aware row against plain search on
the time-scoped and on the plain questions, and the questions whose day window
``memsearch.engine.timeframe`` resolves differently from the set's own calendar rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.dataset import Dataset
from evaluation.dated_run import PLAIN, window_mismatches
from evaluation.metrics import Comparison, compare
from evaluation.report import category_table, comparison_table, overall_table
from evaluation.runner import RunResult

#: Question groups of the paired comparisons: (label, category prefix).
GROUPS = (("time-scoped", "time-"), ("plain", "plain-"))


def group_comparison(a: RunResult, b: RunResult, dataset: Dataset, prefix: str, metric: str) -> Comparison:
    """A against B on the questions whose category starts with ``prefix``."""
    qids = {q.qid for q in dataset.queries if q.category.startswith(prefix)}
    pick = lambda run: {q: s for q, s in run.per_query.items() if q in qids}  # noqa: E731
    return compare(pick(a), pick(b), metric)


def render_dated(dataset: Dataset, runs: Sequence[RunResult], note: str) -> str:
    parts = []
    if note:
        parts.append(f"Not run: {note}.")
    parts.append(overall_table(runs))
    for metric, label in (("recall@1", "Recall@1"), ("recall@5", "Recall@5"), ("mrr", "MRR")):
        parts.append(f"{label} per category:\n\n" + category_table(list(runs), metric))
    plain = next((r for r in runs if r.config.name == PLAIN), None)
    pairs: list[tuple[str, str, Comparison]] = []
    for run in runs:
        if plain is None or run is plain:
            continue
        for label, prefix in GROUPS:
            for metric in ("recall@1", "recall@5", "mrr"):
                comparison = group_comparison(run, plain, dataset, prefix, metric)
                pairs.append((f"{run.config.name}, {label}", PLAIN, comparison))
    if pairs:
        parts.append(
            "Paired comparison against plain search (per-query wins/losses, two-sided sign test):\n\n"
            + comparison_table(pairs)
        )
    mismatches = window_mismatches(dataset)
    if mismatches:
        parts.append(
            "Questions whose day window `memsearch.engine.timeframe` resolves differently from the set's "
            "calendar rules:\n\n" + "\n".join(f"- {line}" for line in mismatches)
        )
    return "\n\n".join(parts)
