"""The ``--help`` of the everyday commands ends with examples a user can copy.

Click rewraps docstring paragraphs, which would fold an example's lines into one; a ``\\b`` line
before the block keeps it as written. This checks what a user sees: the real command's output.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

EXAMPLES = {
    "search": ['memsearch search "redis connection timeout" --top-k 3'],
    "index": ["memsearch index ./memory", "memsearch index ./memory ./notes/decisions.md --force"],
    "expand": ["memsearch expand 3f2a9c1e8b7d6a50 --lines 5"],
}


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_help_shows_the_examples_line_by_line(command: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", command, "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line.strip() for line in proc.stdout.splitlines()]
    assert "Example:" in lines
    example_at = lines.index("Example:")
    assert example_at < lines.index("Options:")  # in the description, before the options
    for example in EXAMPLES[command]:
        # each example on a line of its own (not rewrapped into the paragraph before it)
        assert any(line == example or line.startswith(example + " ") for line in lines), example
