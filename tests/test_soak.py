"""``make soak`` must not rot: evaluation/soak.py runs its whole loop for a few seconds.

Real processes (a ``memsearch watch`` with the default model, routed searches, file edits); the
numbers of a 30-second run mean nothing, only that every column is measured and printed. (12 s
were too few on a loaded machine, e.g. beside the other pytest-xdist workers of ``make test``: the
first routed search, which warms the service, took them all and only one row was printed.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_soak_prints_samples_and_the_growth_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "evaluation.soak", "--minutes", "0.5", "--chunks", "30", "--sample", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [
        line
        for line in proc.stdout.splitlines()
        if re.match(r"\s+\d+\.\d+\s+\d+\.\d+\s+\d+\s+\d+\s+\d+", line)
    ]
    assert len(rows) >= 3
    assert int(rows[-1].split()[4]) > 0  # searches were answered by the service
    assert re.search(
        r"\d+ searches, \d+ edits; RSS after warm-up [\d.]+ MB, at the end [\d.]+ MB", proc.stdout
    )
