"""What ``forget``'s rewrite of Milvus Lite's files costs (``make bench`` prints it; docs/scaling.md).

A forget deletes rows; Milvus Lite keeps them in their data file until its own compaction, so
memsearch then rewrites every data file that holds a deleted row (``MilvusStore.purge``). Its cost
is that of rewriting those files: in a store indexed in one run every row is in one file, so the
worst case is one deleted chunk in a store of N. This builds a Lite store of N chunks (synthetic
384-dimension vectors, journal-sized texts, one data file as one index run leaves it), then
``repeat`` times deletes one chunk and times the purge, beside the delete alone.

Run alone: ``python -m evaluation.purge_cost --chunks 1000,10000``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DIMENSION = 384  # all-MiniLM-L6-v2's
#: The words of the synthetic chunk texts.
TEXT = "checkout timeout retry queue worker deploy staging database index migration cache token session"


@dataclass(frozen=True)
class PurgeCost:
    chunks: int
    delete_seconds: float
    purge_seconds: float
    files: int
    repeat: int


def _rows(first: int, n: int, rng: random.Random) -> list[dict[str, object]]:
    rows, words = [], TEXT.split()
    for i in range(first, first + n):
        text = " ".join(rng.choice(words) for _ in range(70))  # ~500 characters, a journal turn
        rows.append(
            {
                "chunk_hash": f"{i:016x}",
                "embedding": [rng.uniform(-1, 1) for _ in range(DIMENSION)],
                "content": f"### 10:{i % 60:02d}\n- {text}",
                "source": f"/memory/2026-01-{i % 28 + 1:02d}.md",
                "heading": "10:00",
                "heading_level": 3,
                "start_line": i % 400 + 1,
                "end_line": i % 400 + 3,
            }
        )
    return rows


def measure(chunks: int, repeat: int = 3, seed: int = 36) -> PurgeCost:
    """Medians of ``repeat`` deletes of one chunk, each followed by a purge, in a store of ``chunks``."""
    from memsearch.store import MilvusStore

    rng = random.Random(seed)
    with (
        tempfile.TemporaryDirectory(prefix="memsearch-purge-") as work,
        MilvusStore(str(Path(work) / "purge.db"), dimension=DIMENSION) as store,
    ):
        for first in range(0, chunks, 1000):
            store.upsert(_rows(first, min(1000, chunks - first), rng))
        store.flush()
        store.purge()  # the store as an index run leaves it (one data file), nothing deleted
        deletes, purges, files = [], [], []
        for k in range(repeat):
            began = time.perf_counter()
            store.delete_by_hashes([f"{k * 7919 % chunks:016x}"])  # a different chunk each time
            deletes.append(time.perf_counter() - began)
            began = time.perf_counter()
            done = store.purge()
            purges.append(time.perf_counter() - began)
            files.append(done.get("files", 0))
    return PurgeCost(chunks, statistics.median(deletes), statistics.median(purges), max(files), repeat)


def table(costs: list[PurgeCost]) -> str:
    lines = [
        "| chunks in the store | delete one chunk | rewrite the files (purge) | data files rewritten | N |",
        "|---|---|---|---|---|",
    ]
    for c in costs:
        lines.append(
            f"| {c.chunks:,} | {c.delete_seconds * 1000:.1f} ms | {c.purge_seconds * 1000:.0f} ms "
            f"| {c.files} | {c.repeat} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", default="1000,10000", help="store sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(table([measure(int(n), args.repeat) for n in args.chunks.split(",") if n.strip()]))


if __name__ == "__main__":
    main()
