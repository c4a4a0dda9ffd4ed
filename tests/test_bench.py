"""``make bench`` must not rot: evaluation/bench.py runs every measurement on a tiny corpus.

Real processes throughout (the CLI, a memory service, the default ONNX model); the numbers of a
60-chunk run mean nothing, only that each row is measured and printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GEN = ROOT / "evaluation" / "gen_corpus.py"  # bench.py's default too; passed explicitly all the same

ROWS = [
    "`memsearch --help`",
    "full index, 60 chunks (wall)",
    "full index throughput",
    "embedding-only throughput (same model, same texts)",
    "full index / embedding-only (median of back-to-back pairs)",
    "peak RSS of `memsearch index`, 60 chunks, default model",
    "no-op re-index, 60 chunks",
    "one changed file (incl. embedding it)",
    "CLI `search`, no service",
    "CLI `search`, service running",
    "one changed file, service running",
    "peak RSS while indexing 60 chunks (fast embedder)",
    "in-process search p50 at 60 chunks",
]


def test_bench_prints_every_row(tmp_path: Path) -> None:
    command = [
        sys.executable,
        str(ROOT / "evaluation" / "bench.py"),
        "--gen",
        str(GEN),
        "--chunks",
        "60",
        "--large",
        "0",
        "--repeat",
        "1",
        "--full-repeat",
        "1",
        "--work",
        str(tmp_path / "work"),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ})
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = [line.split("|") for line in proc.stdout.splitlines() if line.startswith("| ")]
    names = [cells[1].strip() for cells in table[1:]]  # past the header (the rule starts "|-")
    assert names == ROWS
    assert all(cells[2].strip() for cells in table[1:])  # every row has a value
