"""Exact tokens: does a rare identifier find the one note that holds it?

An identifier, error code, ticket number or hash that occurs in one note must surface that note.
The corpus is memsearch's own benchmark journals (``evaluation/gen_corpus.py``, 10,000 chunks by
default); every word that :func:`memsearch.store.fusion.exact_words` accepts and that occurs in
exactly one turn becomes a query whose gold is that turn (at most ``--queries`` of them, spread
over the corpus). Each query runs the two legs once and fuses them three ways, so the rows differ
only in the fusion: BM25 alone, memsearch's weighted fusion without the exact-word slot (0.4.x of
this package), and the default (with it). The original's plain RRF is the fourth row.

    python -m evaluation.exact_tokens [--chunks 10000] [--queries 300]

Embeddings are cached in ``evaluation/.cache`` like ``python -m evaluation``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from evaluation.dataset import Dataset, Gold, Query, write_queries
from evaluation.metrics import query_scores, summarize
from evaluation.runner import Harness, IndexConfig, _to_hit

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
_TURN = re.compile(r"^### \d\d:\d\d")
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def turns(path: Path) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each ``### HH:MM`` turn of a journal (1-based, inclusive)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if _TURN.match(line)]
    out = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("## ")):
            end -= 1
        out.append((start + 1, end, "\n".join(lines[start:end])))
    return out


#: Identifier shapes planted in the corpus beside its own tickets (``TM-1234``): an error code, a
#: short commit hash, a camelCase setting, a host name, another tracker's ticket.
SHAPES = (
    lambda r: f"ERR_{r.choice(['PAY', 'AUTH', 'SYNC', 'CACHE'])}_{r.randrange(1000, 9999)}",
    lambda r: "".join(r.choice("0123456789abcdef") for _ in range(10)),
    lambda r: f"{r.choice(['retry', 'flush', 'poll'])}{r.choice(['Budget', 'Delay'])}{r.randrange(10, 99)}Ms",
    lambda r: f"db-replica-{r.randrange(10, 99)}.eu{r.randrange(1, 9)}",
    lambda r: f"OPS-{r.randrange(10000, 99999)}",
)


def plant(corpus: Path, count: int) -> None:
    """Append ``- Ref: <identifier>`` to ``count`` turns picked at random (seeded): rare tokens in
    notes about something else, as a pasted error code or commit hash is."""
    import random

    rng = random.Random(31337)
    days = sorted(corpus.glob("*.md"))
    for n in range(count):
        day = rng.choice(days)
        lines = day.read_text(encoding="utf-8").splitlines()
        starts = [i for i, line in enumerate(lines) if _TURN.match(line)]
        at = rng.choice(starts) + 1
        while at < len(lines) and lines[at].strip() and not lines[at].startswith("#"):
            at += 1
        lines.insert(at, f"- Ref: {SHAPES[n % len(SHAPES)](rng)}")
        day.write_text("\n".join(lines) + "\n", encoding="utf-8")


def build(root: Path, chunks: int, limit: int) -> Dataset:
    """The corpus and its queries under ``root`` (built once, then reused)."""
    from evaluation.gen_corpus import generate
    from memsearch.store.fusion import exact_words

    corpus = root / "corpus"
    if not (root / "queries.jsonl").exists():
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp), files=max(60, chunks // 30), chunks=chunks, seed=7)
            corpus.mkdir(parents=True, exist_ok=True)
            for day in sorted((Path(tmp) / "memory").glob("*.md")):
                (corpus / day.name).write_text(day.read_text(encoding="utf-8"), encoding="utf-8")
        plant(corpus, limit // 2)
        holders: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
        spelled: dict[str, str] = {}
        for day in sorted(corpus.glob("*.md")):
            for first, last, text in turns(day):
                for word in exact_words(_COMMENT.sub(" ", text)):  # not the anchors' ids
                    holders[word.lower()].add((day.name, first, last))
                    spelled.setdefault(word.lower(), word)
        # A number alone is a latency or a count as often as a ticket: the queries are identifiers.
        single = sorted(w for w, where in holders.items() if len(where) == 1 and not w.isdigit())
        step = max(1, len(single) // limit)
        queries = []
        for n, word in enumerate(single[::step][:limit]):
            ((name, first, last),) = holders[word]
            # Every other query asks in words around the token, as a person would.
            text = spelled[word] if n % 2 == 0 else f"what did we find about {spelled[word]}?"
            queries.append(Query(f"exact-{n}", text, "exact", (Gold(name, first, last),)))
        write_queries(root / "queries.jsonl", queries)
    from evaluation.dataset import load_dataset

    return load_dataset(root, "exact-tokens")


async def run(dataset: Dataset, harness: Harness) -> dict[str, dict[str, float]]:
    from memsearch.store import hybrid_weights
    from memsearch.store.fusion import LEGS, fuse, hit_to_result

    store = await harness.store_for(dataset, IndexConfig(analyzer="auto"))
    root = dataset.corpus.resolve()
    rows: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for q in dataset.queries:
        vector = (await harness.query_embedder.embed_query([q.query]))[0]
        legs = {
            "dense": store.search_leg("dense", vector, top_k=10),
            "sparse": store.search_leg("sparse", q.query, top_k=10),
        }
        weights = hybrid_weights(q.query)
        ranked: dict[str, list[dict[str, Any]]] = {
            "BM25 alone": [hit_to_result(h, LEGS["sparse"][2]) for h in legs["sparse"]],
            "hybrid RRF (original)": fuse(legs, None, 10),
            "weighted fusion, no exact-word slot": fuse(legs, weights, 10),
            # The product's path: the slot, and the literal match for a word BM25's hits lack.
            "weighted fusion + exact-word slot (default)": store.search(
                vector, query_text=q.query, top_k=10, weights=weights, leg_hits=legs
            ),
        }
        for name, results in ranked.items():
            scores = query_scores([_to_hit(r, root) for r in results], q.gold)
            rows[name][q.qid] = scores
    return {name: summarize(dataset.queries, per)["all"] for name, per in rows.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.exact_tokens", description=__doc__)
    parser.add_argument("--chunks", type=int, default=10_000, help="corpus size in chunks")
    parser.add_argument("--queries", type=int, default=300, help="at most this many queries")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from memsearch.embeddings import get_provider
    from memsearch.embeddings.cache import CachedEmbedder, EmbeddingCache

    started = time.perf_counter()
    dataset = build(CACHE_DIR / f"exact-tokens-{args.chunks}", args.chunks, args.queries)
    provider = get_provider("onnx")
    cached = CachedEmbedder(provider, EmbeddingCache(CACHE_DIR / "embeddings.sqlite"))
    with tempfile.TemporaryDirectory(prefix="memsearch-exact-") as workdir:
        harness = Harness(cached, provider, Path(workdir))
        try:
            table = asyncio.run(run(dataset, harness))
        finally:
            harness.close()
    print(f"{len(dataset.queries)} queries, {args.chunks} chunks, {time.perf_counter() - started:.0f} s")
    print("| fusion | top-1 (R@1) | R@5 | MRR |\n|---|---:|---:|---:|")
    for name, overall in table.items():
        print(f"| {name} | {overall['recall@1']:.3f} | {overall['recall@5']:.3f} | {overall['mrr']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
