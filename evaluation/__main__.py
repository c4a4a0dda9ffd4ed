"""``python -m evaluation``: build the sets, run every configuration, print the tables.

Everything runs offline: the sets come from installed packages, the embedding model from the
installed default (or ``--model``), the reranker only from disk (``HF_HUB_OFFLINE`` is set for
this process). Built corpora and document embeddings are cached under ``evaluation/.cache``, so a
second run only pays for the searches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from evaluation.builders import SETS, SourceMissingError, ensure_set
from evaluation.dataset import Dataset
from evaluation.dated_report import render_dated
from evaluation.dated_run import StaleSetError, run_dated
from evaluation.metrics import compare
from evaluation.report import category_table, comparison_table, overall_table
from evaluation.runner import Harness, IndexConfig, RunConfig, RunResult

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
README = Path(__file__).resolve().parent / "README.md"
TABLE_START = "<!-- eval-tables:start -->"
TABLE_END = "<!-- eval-tables:end -->"

STANDARD = IndexConfig(analyzer="standard")
JIEBA = IndexConfig(analyzer="jieba")
ORIGINAL = "hybrid RRF, standard (original)"
SEGMENTED = "hybrid RRF + jieba"
#: The configuration memsearch ships (analyzer "auto" is jieba when installed, as it is here).
DEFAULT = "+ weighted fusion (default)"
#: The default with ``embedding.multilingual`` on, and the multilingual model alone as the dense leg.
LEG = "+ multilingual leg"
ML_DENSE = "multilingual model as the dense leg"


def configurations(reranker: str, *, chunking: bool, multilingual: bool = False) -> list[RunConfig]:
    """The report's rows, in order: the baselines, the shipped default, then its variants."""
    rows = [
        RunConfig("BM25-only (standard)", STANDARD, "sparse"),
        RunConfig("dense-only", STANDARD, "dense"),
        RunConfig(ORIGINAL, STANDARD, "hybrid", fusion="rrf"),
        RunConfig("BM25-only (jieba)", JIEBA, "sparse"),
        RunConfig(SEGMENTED, JIEBA, "hybrid", fusion="rrf"),
        RunConfig(DEFAULT, JIEBA, "hybrid"),
    ]
    if multilingual:
        rows += [
            RunConfig(LEG, replace(JIEBA, multilingual=True)),
            RunConfig(ML_DENSE, replace(JIEBA, provider="use")),
        ]
    if reranker:
        rows.append(RunConfig("+ reranker", JIEBA, "hybrid", reranker))
    if chunking:
        rows += [
            RunConfig("+ heading breadcrumbs", replace(JIEBA, breadcrumbs=True)),
            RunConfig("+ merge sections < 200 chars", replace(JIEBA, merge_below=200)),
            RunConfig("chunk size 3000", replace(JIEBA, max_chunk_size=3000)),
        ]
    return rows


#: Paired comparisons printed per set: (A, B).
COMPARISONS = (
    (SEGMENTED, ORIGINAL),
    (DEFAULT, SEGMENTED),
    (DEFAULT, "BM25-only (jieba)"),
    (DEFAULT, "dense-only"),
    (LEG, DEFAULT),
    (ML_DENSE, DEFAULT),
    ("+ reranker", DEFAULT),
    ("+ heading breadcrumbs", DEFAULT),
    ("+ merge sections < 200 chars", DEFAULT),
    ("chunk size 3000", DEFAULT),
)


#: Per set, what its run could not do (the dated set: a missing time-aware or recency option).
NOTES: dict[str, str] = {}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _multilingual_provider() -> Any:
    """The multilingual leg's provider, or None when its package is not installed."""
    from memsearch.embeddings import get_provider
    from memsearch.engine.multilingual import PROVIDER
    from memsearch.errors import MissingDependencyError

    try:
        return get_provider(PROVIDER)
    except MissingDependencyError:
        return None


def _reranker_problem(model: str) -> str:
    """Why ``model`` cannot rerank on this machine ("" when it can)."""
    from memsearch.errors import MemSearchError
    from memsearch.reranker import CrossEncoderReranker, backend_problem

    problem = backend_problem()
    if problem:
        return problem
    try:
        CrossEncoderReranker(model)
    except MemSearchError as exc:
        return f"{model} is not installed or cached on this machine ({type(exc).__name__})"
    return ""


async def evaluate(
    datasets: list[Dataset],
    configs: list[RunConfig],
    harness: Harness,
    provider: str = "onnx",
    model: str | None = None,
) -> dict[str, list[RunResult]]:
    results: dict[str, list[RunResult]] = {}
    for dataset in datasets:
        if SETS[dataset.name].runner == "memsearch":
            started = time.perf_counter()
            workdir = harness.workdir / dataset.name
            workdir.mkdir(parents=True, exist_ok=True)
            results[dataset.name], NOTES[dataset.name] = await run_dated(dataset, workdir, provider, model)
            for result in results[dataset.name]:
                _log(
                    f"  {dataset.name:12} {result.config.name:32} R@5 {result.summary['all']['recall@5']:.3f}"
                )
            _log(f"  ({time.perf_counter() - started:.1f} s)")
            continue
        results[dataset.name] = []
        for config in configs:
            started = time.perf_counter()
            result = await harness.run(dataset, config)
            results[dataset.name].append(result)
            _log(
                f"  {dataset.name:12} {config.name:32} R@5 {result.summary['all']['recall@5']:.3f} "
                f"({time.perf_counter() - started:.1f} s)"
            )
    return results


def render(
    datasets: list[Dataset],
    results: dict[str, list[RunResult]],
    model: str,
    reranker_note: str,
    leg_note: str = "",
) -> str:
    parts = [
        f"Embedding model: `{model}`."
        + (f" {leg_note}." if leg_note else "")
        + (f" Reranker: {reranker_note}." if reranker_note else "")
    ]
    for dataset in datasets:
        runs = results[dataset.name]
        by_name = {r.config.name: r for r in runs}
        n_files = len(list(dataset.corpus.rglob("*.md")))
        parts.append(
            f"### {dataset.name} ({SETS[dataset.name].language}, {len(dataset.queries)} queries, "
            f"{n_files} files; {SETS[dataset.name].origin})"
        )
        if SETS[dataset.name].runner == "memsearch":
            parts.append(render_dated(dataset, runs, NOTES.get(dataset.name, "")))
            continue
        parts.append(overall_table(runs))
        shown = {"BM25-only (jieba)", "dense-only", SEGMENTED, DEFAULT, LEG}
        key = [r for r in runs if r.config.name in shown]
        parts.append("Recall@5 per category:\n\n" + category_table(key, "recall@5"))
        pairs = []
        for a, b in COMPARISONS:
            if a in by_name and b in by_name:
                for metric in ("recall@5", "mrr"):
                    pairs.append((a, b, compare(by_name[a].per_query, by_name[b].per_query, metric)))
        parts.append(
            "Paired comparison (per-query wins/losses, two-sided sign test):\n\n" + comparison_table(pairs)
        )
    return "\n\n".join(parts) + "\n"


def update_readme(text: str) -> None:
    readme = README.read_text(encoding="utf-8")
    start, end = readme.find(TABLE_START), readme.find(TABLE_END)
    if start < 0 or end < start:
        raise SystemExit(f"{README} has no {TABLE_START} ... {TABLE_END} block")
    README.write_text(readme[: start + len(TABLE_START)] + "\n" + text + readme[end:], encoding="utf-8")


def write_json(path: Path, results: dict[str, list[RunResult]]) -> None:
    data = {
        name: [
            {
                "config": r.config.name,
                "summary": r.summary,
                "latency_p50_ms": r.latency_p50,
                "chunks": r.chunks,
                "per_query": r.per_query,
            }
            for r in runs
        ]
        for name, runs in results.items()
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    from memsearch.reranker import DEFAULT_RERANKER

    parser = argparse.ArgumentParser(prog="python -m evaluation", description=__doc__)
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, from: {', '.join(SETS)}")
    parser.add_argument("--provider", default="onnx", help="embedding provider (default onnx)")
    parser.add_argument("--model", default=None, help="embedding model (default: the provider's)")
    parser.add_argument("--reranker", default=DEFAULT_RERANKER, help='cross-encoder model ("" = none)')
    parser.add_argument("--no-chunking", action="store_true", help="skip the chunking variants")
    parser.add_argument("--update-readme", action="store_true", help="write the tables into README.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network during an evaluation
    # gRPC's keep-alive chatter with the embedded Milvus Lite server is not evaluation output.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")

    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    unknown = [n for n in names if n not in SETS]
    if unknown:
        parser.error(f"unknown set(s) {', '.join(unknown)}; valid: {', '.join(SETS)}")
    datasets = []
    for name in names:
        try:
            datasets.append(ensure_set(name, CACHE_DIR))
        except SourceMissingError as exc:
            print(
                f"Error: cannot build set {name}: {exc}. Hint: {exc.hint} (or run `make eval`)",
                file=sys.stderr,
            )
            return 2

    reranker_note = ""
    reranker = args.reranker
    if reranker:
        problem = _reranker_problem(reranker)
        if problem:
            reranker_note = f"not run — {problem}"
            reranker = ""
        else:
            reranker_note = f"`{reranker}`"

    from memsearch.embeddings import get_provider
    from memsearch.embeddings.cache import CachedEmbedder, EmbeddingCache

    provider = get_provider(args.provider, model=args.model)
    cache = EmbeddingCache(CACHE_DIR / "embeddings.sqlite")
    cached = CachedEmbedder(provider, cache)
    leg = _multilingual_provider()
    leg_note = (
        f"Multilingual model: `{leg.model_name}`"
        if leg is not None
        else "Multilingual rows: not run — the multilingual model is not installed "
        '(pip install -e ".[multilingual]")'
    )
    configs = configurations(reranker, chunking=not args.no_chunking, multilingual=leg is not None)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memsearch-eval-") as workdir:
        harness = Harness(cached, provider, Path(workdir))
        if leg is not None:
            harness.add_provider("use", CachedEmbedder(leg, cache), leg)
        try:
            results = asyncio.run(evaluate(datasets, configs, harness, args.provider, args.model))
        except StaleSetError as exc:
            print(f"Error: {exc}. Hint: run again (the set is rebuilt for the new day)", file=sys.stderr)
            return 2
        finally:
            harness.close()
    _log(f"evaluation finished in {time.perf_counter() - started:.0f} s")
    text = render(datasets, results, provider.model_name, reranker_note, leg_note)
    print(text)
    write_json(CACHE_DIR / "results.json", results)
    if args.update_readme:
        update_readme(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
