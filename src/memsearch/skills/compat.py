"""The original memsearch's function names (``skills.add``, ``skills.install``) over this store."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from memsearch.errors import (
    NoInstallTargetError,
)
from memsearch.skills.installing import install_candidate
from memsearch.skills.names import slugify
from memsearch.skills.write import write_candidate


def _original_roots(project_dir: str | Path | None, memsearch_dir: str | Path | None) -> tuple[Path, Path]:
    """The original's rule: the project is ``project_dir`` or the current folder; the store's
    folder is ``memsearch_dir``, else ``$MEMSEARCH_DIR``, else ``<project>/.memsearch`` (a relative
    one is taken from the project)."""
    project = Path(project_dir or Path.cwd()).expanduser().absolute()
    chosen = Path(memsearch_dir or os.environ.get("MEMSEARCH_DIR") or project / ".memsearch").expanduser()
    return project, chosen if chosen.is_absolute() else project / chosen


def add(
    name: str,
    description: str,
    body: str,
    *,
    project_dir: str | Path | None = None,
    memsearch_dir: str | Path | None = None,
) -> str:
    """The original's ``skills.add``: save a candidate (one commit) and return its slug."""
    _project, ms = _original_roots(project_dir, memsearch_dir)
    return write_candidate(
        ms, name, description, body, message=f"Add candidate {slugify(name)} (manual)"
    ).slug


def install(
    name: str,
    paths: Sequence[str],
    *,
    project_dir: str | Path | None = None,
    memsearch_dir: str | Path | None = None,
) -> list[str]:
    """The original's ``skills.install``: install into ``paths`` (relative ones are taken from the
    project) and return the SKILL.md paths; a skill memsearch did not write is not replaced."""
    if not paths:
        raise NoInstallTargetError(
            "no install paths given", "ask the user where to install the skill, e.g. .claude/skills"
        )
    project, ms = _original_roots(project_dir, memsearch_dir)
    return [str(r.path) for r in install_candidate(ms, name, [project / Path(p).expanduser() for p in paths])]
