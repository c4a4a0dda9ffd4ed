"""``python -m evaluation.window``: what a window of days costs a search at thousands of files.

A corpus of ``--files`` daily journals, one turn each (``evaluation/gen_corpus.py``), is indexed
with ``MemSearch`` into a temporary Milvus Lite store; the vectors come from the bench's hashing
endpoint (384 dimensions, as the default model's: embedding 12,000 chunks with the model would
take most of an hour and measure the model, not the window). Then ``MemSearch.search`` (top 5) runs
the corpus's queries with no window, and with windows of 1,000, 5,000 and 10,000 files (the first
files of the corpus, shifted by one file three times so that each is a new window): the time of
each window's first search (its filters compiled and evaluated by the store) and the median of
the next ones (kept per filter text). A window of more than 1,000 files is searched in parts of
1,000 (``memsearch.engine.time_search``); docs/time.md has the figures.

    python -m evaluation.window                 # 12,000 files
    python -m evaluation.window --files 3000 --sizes 1000,2000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path


async def measure(folder: Path, url: str, sizes: list[int]) -> list[str]:
    from evaluation import gen_corpus
    from evaluation.original import LOCAL_KEY, MODEL
    from memsearch import MemSearch

    queries = gen_corpus.QUERIES
    names = sorted(p.name for p in (folder / "memory").glob("*.md"))
    lines = ["| window | first search | next searches, p50 |", "|---|---|---|"]
    ms = MemSearch(
        [str(folder / "memory")],
        milvus_uri=str(folder / "window.db"),
        embedding_provider="openai",
        embedding_model=MODEL,
        embedding_base_url=url,
        embedding_api_key=LOCAL_KEY,
    )
    try:
        started = time.perf_counter()
        chunks = await ms.index()
        print(f"indexed {chunks:,} chunks in {time.perf_counter() - started:.0f} s", flush=True)

        async def timed(**window: str) -> float:
            started = time.perf_counter()
            await ms.search(queries[0], top_k=5, **window)
            return (time.perf_counter() - started) * 1000

        await timed()
        plain = statistics.median([await timed() for _ in queries * 2])
        lines.append(f"| none ({len(names):,} files) | | {plain:.1f} ms |")
        for size in sizes:
            firsts, nexts = [], []
            for shift in range(3):
                window = {"since": names[shift][:10], "until": names[shift + size - 1][:10]}
                firsts.append(await timed(**window))
                nexts += [await timed(**window) for _ in queries]
            row = (
                f"| {size:,} files | {statistics.median(firsts):.0f} ms | {statistics.median(nexts):.1f} ms |"
            )
            lines.append(row)
            print(row, flush=True)
    finally:
        ms.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    from evaluation import gen_corpus
    from evaluation.original import serving_hashed_vectors

    parser = argparse.ArgumentParser(prog="python -m evaluation.window", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=12_000)
    parser.add_argument("--sizes", default="1000,5000,10000")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="memsearch-window-") as work, serving_hashed_vectors() as url:
        gen_corpus.generate(Path(work), files=args.files, chunks=args.files)
        print("\n".join(asyncio.run(measure(Path(work), url, sizes))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
