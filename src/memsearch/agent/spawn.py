"""memsearch starting itself as a child: the command line, a detached start, a quiet environment.

The hooks start watches, index runs and capture workers; maintenance starts its own worker and the
read commands a model may run. They all start *this* memsearch (:func:`memsearch_argv`: the same
interpreter, so a child uses the install its parent runs), often detached from the caller
(:func:`spawn_detached`), and a child that is itself an agent, or runs one, must not set our hooks
off again (:func:`quiet_env`). Standard library only, so both sides import it without importing
each other.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from memsearch.files import open_own

__all__ = ["DISABLE_ENV", "NO_WATCH_ENV", "memsearch_argv", "quiet_env", "spawn_detached"]

#: Set to 1 on every nested agent call: the hooks of that agent then do nothing (no re-entry).
DISABLE_ENV = "MEMSEARCH_DISABLE"
#: Set to 1 to keep the hooks from starting or stopping background processes.
NO_WATCH_ENV = "MEMSEARCH_NO_WATCH"


def quiet_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a child in which our hooks do nothing and start nothing (a nested agent, or a
    memsearch command a model runs)."""
    return {**env, DISABLE_ENV: "1", NO_WATCH_ENV: "1"}


def memsearch_argv(*args: str) -> list[str]:
    """Run memsearch with this very interpreter, so a child uses the same install as the hook."""
    return [sys.executable, "-m", "memsearch", *args]


def spawn_detached(
    argv: Sequence[str],
    *,
    log: Path | None = None,
    stdin_data: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    append: bool = False,
) -> int:
    """Start ``argv`` in a new session, output to ``log`` (or nowhere), and return its pid.

    The log is truncated first unless ``append`` (several workers sharing one log).
    ``stdin_data`` is written to the child's stdin, which is then closed; the call does not wait
    for the child.
    """
    out: int = subprocess.DEVNULL
    if log is not None:  # a FIFO or link planted under the log's name is refused (OSError)
        out = open_own(log, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), 0o666)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        if log is not None:
            os.close(out)  # the child holds its own descriptor
    if stdin_data is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin_data)
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
    # The child outlives us on purpose; mark it handled so Popen does not warn when collected.
    proc.returncode = 0
    return proc.pid
