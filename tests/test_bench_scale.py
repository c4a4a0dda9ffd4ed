"""``make bench-scale`` must not rot: evaluation/scale.py measures every row on a tiny memory.

Real processes throughout, as in the real run: our CLI, a memory service and client processes, the
original 0.4.23 from its side venv, ``strace`` and the row counter for the counts, a real
``milvus-lite server`` for the migration row. The stores are built into the test's own folder; the
numbers of a 150-chunk memory mean nothing, only that every row is measured and printed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import debs

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.server

#: Rows the original runs too (a figure in its column, a ratio).
BOTH = [
    "no-op re-index: time",
    "search p50, in-process `MemSearch`",
    "service start-up on the existing store (original: a cold CLI search)",
    "one changed file, no service: time",
    "`stats`, no service",
    "`watch` start-up (until it watches)",
]
#: Rows of ours alone (the original has no such operation, or cannot share a store).
OURS = [
    "search p95, 2 `MemSearch` processes at once",
    "window search p50, all 3 years, through the service",
    "one changed file, service running: `index`",
    "first search after that change",
    "`forget --session` (one project's journals)",
    "`recent --days 30` over every file",
    "`migrate` to a `milvus-lite server` (copy and verify)",
]


def test_the_scale_bench_prints_every_row(tmp_path: Path) -> None:
    debs.ensure("strace", "strace")  # the counting runs
    command = [sys.executable, "-m", "evaluation.scale", "--sizes", "150", "--repeat", "1"]
    command += ["--clients", "2", "--settle", "0", "--edit-timeout", "10", "--cache", str(tmp_path / "cache")]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT, env={**os.environ})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^\*\*150 chunks\*\*: \d+ journals .* Run of .* CPUs", proc.stdout, re.M), proc.stdout
    cells = {
        line.split(" | ")[0][2:]: line.split(" | ")[1:]
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| figure")
    }
    for name in BOTH:
        original, ours, ratio = cells[name][:3]
        assert re.match(r"[\d.,]+ (s|ms|MB)", original) and re.match(r"[\d.,]+ (s|ms|MB)", ours), name
        assert re.match(r"\d+\.\d\d$", ratio), name
    for name in OURS:
        assert re.match(r"[\d.,]+ (s|ms|MB)", cells[name][1]), name
    assert cells["search p95, 2 `MemSearch` processes at once"][0] == "1 of 2 processes fail"
    stated, read = (
        cells["no-op re-index: markdown files stat'ed"],
        cells["no-op re-index: rows read from the store"],
    )
    assert stated[1] == "15" and int(stated[0]) > 15  # ours: each of the 15 files once
    assert read[1] == "0" and int(read[0].replace(",", "")) > 0  # ours: the manifest answers
