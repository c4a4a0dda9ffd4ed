"""The store as a git repository: running git (no signing, no hooks, no inherited repository),
committing hand edits on their own, one writer at a time, and writing files in one step."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from memsearch.errors import (
    GitCommandError,
    GitNotFoundError,
    MemSearchError,
    SkillWriteError,
)
from memsearch.files import atomic_write, lock_file
from memsearch.skills.names import META_FILE

#: Identity of the automatic commits, so ``git log`` tells them from a person's.
GIT_AUTHOR = ("memsearch", "memsearch@localhost")
#: Inherited git variables that would point git at another repository (e.g. inside a git hook).
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX")
_LOCK_NAME = ".skill-candidates.lock"


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    env.update(
        GIT_AUTHOR_NAME=GIT_AUTHOR[0],
        GIT_AUTHOR_EMAIL=GIT_AUTHOR[1],
        GIT_COMMITTER_NAME=GIT_AUTHOR[0],
        GIT_COMMITTER_EMAIL=GIT_AUTHOR[1],
        GIT_TERMINAL_PROMPT="0",
    )
    return env


def _git(root: Path, *args: str) -> str:
    """Run one git command in the store; its stdout. Signing and hooks are off: an automatic
    commit must not wait for a passphrase or run the user's scripts."""
    exe = shutil.which("git")
    if exe is None:
        raise GitNotFoundError(
            "git is not installed (or not on PATH); the skill candidate store is a git repository",
            "install git (e.g. `apt install git` or `brew install git`) and run the command again",
        )
    cmd = [exe, "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", *args]
    verb = next((a for a in args if not a.startswith("-") and "=" not in a), "command")
    try:
        proc = subprocess.run(
            cmd, cwd=root, env=_git_env(), capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitCommandError(f"git {verb} failed in {root}: {exc}") from None
    if proc.returncode != 0:
        detail = " ".join((proc.stderr or proc.stdout).split())[:300]
        raise GitCommandError(
            f"git {verb} failed in {root} (exit {proc.returncode}): {detail}",
            f"inspect the store with `git -C {root} status`",
        )
    return proc.stdout


def ensure_repo(root: Path) -> None:
    if (root / ".git").exists():
        return
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "-c", "init.defaultBranch=main", "init", "-q")


def commit_all(root: Path, message: str) -> str:
    """Stage everything and commit; the new commit's id, or "" when nothing changed."""
    _git(root, "add", "-A")
    if not _git(root, "status", "--porcelain"):
        return ""
    _git(root, "commit", "-q", "--no-verify", "-m", message)
    return _git(root, "rev-parse", "--short", "HEAD").strip()


def keep_manual_edits(root: Path, before: str) -> None:
    """Commit whatever a person changed in the store by hand, before an automatic change, so the
    automatic one is its own commit and the hand edits are in history, never lost."""
    commit_all(root, f"Keep manual edits (before: {before.splitlines()[0] if before else ''})")


@contextlib.contextmanager
def file_errors(what: str) -> Iterator[None]:
    """A file that cannot be written (a read-only disk, a path through a file) is one error line."""
    try:
        yield
    except MemSearchError:
        raise
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise SkillWriteError(
            f"cannot {what}: {exc.strerror or exc}{where}", "check that the folder exists and is writable"
        ) from None


@contextlib.contextmanager
def store_lock(memsearch_dir: Path) -> Iterator[None]:
    """One writer at a time (two sessions may distil or install at once); git's own index lock
    would make the second fail instead of wait."""
    with lock_file(memsearch_dir / _LOCK_NAME):  # a planted FIFO or link is refused (OSError)
        yield


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` in one step (a reader never sees half a file)."""
    atomic_write(path, text)


def write_meta(skill_dir: Path, meta: Mapping[str, Any]) -> None:
    write_text(skill_dir / META_FILE, json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
