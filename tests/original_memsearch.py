"""The original memsearch 0.4.23 beside ours, for the compatibility tests.

The side venv, the source release and the local endpoint serving our packaged model live in
evaluation/original.py (``make bench`` uses them too); this module re-exports them and adds
:func:`run`, the tests' way to call either CLI.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from evaluation.original import MODEL, flags, original_cli, original_source, serving_packaged_model

__all__ = ["MODEL", "flags", "original_cli", "original_source", "run", "serving_packaged_model"]


def run(
    cli: Path | str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one tool's CLI with a fake API key (the endpoint ignores it). The original runs its own
    package: a PYTHONPATH naming our source tree (a run from a work tree) must not reach it, or
    both "tools" would be ours."""
    environ = {**os.environ, "OPENAI_API_KEY": "sk-local", **(env or {})}
    if Path(cli) == original_cli():
        environ.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(cli), *args], capture_output=True, text=True, env=environ, cwd=cwd, timeout=300
    )
