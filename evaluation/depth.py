"""``python -m evaluation.depth``: how deep each leg must fetch before fusion (``search.candidates``).

For each set of ``make eval`` and each candidate depth, every question is fused from that many hits
per leg (the product's ``MilvusStore.search``) and compared with the fusion of the legs' 1,000
best hits (the ranking the depth approximates): how often the first 1 and the first 10 hits are
those of the deep ranking, the quality (R@5, MRR against the gold), and the time of the store's
search (both legs and the fusion; the query vector is embedded once, outside the timing).

    python -m evaluation.depth                          # every installed set
    python -m evaluation.depth --sets debian-faq --depths 10,50,100
    python -m evaluation.depth --voting-ranks 1001      # every rank of a leg votes (no cut at 10)
    python -m evaluation.depth --voting-ranks 5         # the fusion the old default -k 5 made

``--voting-ranks`` is the experiment behind ``store.fusion.VOTING_RANKS``: it sets that constant for
this process (above any depth: plain weighted RRF over every candidate).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from evaluation.builders import ensure_set
from evaluation.metrics import DEPTH, query_scores
from evaluation.runner import Harness, IndexConfig, _to_hit

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
SETS = ("debian-faq", "gitfaq", "manpages-zh", "cri-persona", "dated-journals")
DEPTHS = (10, 15, 20, 30, 50, 100)
#: The reference: as deep as one leg may fetch.
REFERENCE = 1000


async def measure(names: list[str], depths: list[int]) -> str:
    from memsearch.embeddings import get_provider
    from memsearch.embeddings.cache import CachedEmbedder, EmbeddingCache
    from memsearch.store import hybrid_weights

    provider = get_provider("onnx")
    cached = CachedEmbedder(provider, EmbeddingCache(CACHE_DIR / "embeddings.sqlite"))
    lines = [
        "| set | depth | top-1 as at 1,000 | top-10 as at 1,000 | R@1 | R@5 | MRR | store search p50 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="memsearch-depth-") as workdir:
        harness = Harness(cached, provider, Path(workdir))
        try:
            for name in names:
                dataset = ensure_set(name, CACHE_DIR)
                if name == "dated-journals":
                    lines += await _dated(dataset, depths, Path(workdir))
                    continue
                store = await harness.store_for(dataset, IndexConfig(analyzer="jieba"))
                root = dataset.corpus.resolve()
                vectors = {q.qid: (await provider.embed_query([q.query]))[0] for q in dataset.queries}

                def ranked(
                    q: object, depth: int, store: object = store, vectors: dict = vectors
                ) -> list[dict]:
                    return store.search(  # type: ignore[attr-defined, no-any-return]
                        vectors[q.qid],  # type: ignore[attr-defined]
                        query_text=q.query,  # type: ignore[attr-defined]
                        top_k=DEPTH,
                        weights=hybrid_weights(q.query),  # type: ignore[attr-defined]
                        candidates=depth,
                    )

                reference = {q.qid: [h["chunk_hash"] for h in ranked(q, REFERENCE)] for q in dataset.queries}
                for depth in depths:
                    same1 = same10 = 0
                    took: list[float] = []
                    scores = []
                    for q in dataset.queries:
                        ranked(q, depth)  # warm
                        started = time.perf_counter()
                        hits = ranked(q, depth)
                        took.append((time.perf_counter() - started) * 1000)
                        keys = [h["chunk_hash"] for h in hits]
                        same1 += keys[:1] == reference[q.qid][:1]
                        same10 += keys == reference[q.qid]
                        scores.append(query_scores([_to_hit(h, root) for h in hits], q.gold))
                    n = len(dataset.queries)
                    r1 = statistics.fmean(s["recall@1"] for s in scores)
                    r5 = statistics.fmean(s["recall@5"] for s in scores)
                    mrr = statistics.fmean(s["mrr"] for s in scores)
                    lines.append(
                        f"| {name} | {depth} | {same1 / n:.3f} | {same10 / n:.3f} | {r1:.3f} | {r5:.3f} "
                        f"| {mrr:.3f} | {statistics.median(took):.1f} |"
                    )
                    print(lines[-1], file=sys.stderr, flush=True)
        finally:
            harness.close()
    return "\n".join(lines)


async def _dated(dataset: object, depths: list[int], workdir: Path) -> list[str]:
    """The dated journals through ``MemSearch`` (time phrases need it), one engine per depth."""
    from memsearch import MemSearch

    lines = []
    root = dataset.corpus.resolve()  # type: ignore[attr-defined]
    queries = dataset.queries  # type: ignore[attr-defined]
    uri = str(workdir / "dated.db")
    reference: dict[str, list[str]] = {}
    for depth in [REFERENCE, *depths]:
        ms = MemSearch([str(dataset.corpus)], milvus_uri=uri, search_candidates=depth)  # type: ignore[attr-defined]
        try:
            await ms.index()
            same1 = same10 = 0
            took: list[float] = []
            scores = []
            for q in queries:
                await ms.search(q.query, top_k=DEPTH)
                started = time.perf_counter()
                hits = await ms.search(q.query, top_k=DEPTH)
                took.append((time.perf_counter() - started) * 1000)
                keys = [h["chunk_hash"] for h in hits]
                if depth == REFERENCE:
                    reference[q.qid] = keys
                same1 += keys[:1] == reference[q.qid][:1]
                same10 += keys == reference[q.qid]
                scores.append(query_scores([_to_hit(h, root) for h in hits], q.gold))
        finally:
            await ms.aclose()
        if depth == REFERENCE:
            continue
        n = len(queries)
        r1 = statistics.fmean(s["recall@1"] for s in scores)
        r5 = statistics.fmean(s["recall@5"] for s in scores)
        mrr = statistics.fmean(s["mrr"] for s in scores)
        lines.append(
            f"| dated-journals | {depth} | {same1 / n:.3f} | {same10 / n:.3f} | {r1:.3f} | {r5:.3f} "
            f"| {mrr:.3f} | {statistics.median(took):.1f} (whole search) |"
        )
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.depth", description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--depths", default=",".join(map(str, DEPTHS)))
    parser.add_argument(
        "--voting-ranks", type=int, default=0, help="ranks of each leg that vote (default: 10)"
    )
    args = parser.parse_args(argv)
    if args.voting_ranks:
        from memsearch.store import fusion

        fusion.VOTING_RANKS = args.voting_ranks
    names = [n for n in args.sets.split(",") if n]
    depths = [int(d) for d in args.depths.split(",") if d]
    print(asyncio.run(measure(names, depths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
