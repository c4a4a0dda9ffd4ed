"""``memsearch`` as a user runs it: a real ``python -m memsearch`` process (test helper).

Shared by the tests that need the whole command (its exit code, stdout, stderr) rather than the
library: the environment is the test's own (conftest's isolated HOME) plus ``env``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def memsearch(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 180,
    cwd: Path | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``memsearch ARGS``; ``input`` is fed to its stdin (then closed, as a pipe ends)."""
    return subprocess.run(
        [sys.executable, "-m", "memsearch", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
