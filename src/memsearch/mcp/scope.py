"""Which memory the MCP server serves: project, memory folder, collection and store settings.

A host plugin (``memsearch.agent.hooks``) finds a project's memory by the git root of its working
folder, or ``MEMSEARCH_DIR``, and names its collection after that folder
(``hooks.collection.derive_collection``). The MCP server follows the same rules when no
``--collection`` is given, so an agent talking to the server and the same agent's plugin read and
write one memory. ``--collection`` and ``--milvus-uri`` (and the config files) pick another store,
as they do for every command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.interface import Memory

__all__ = ["McpScope"]


@dataclass(frozen=True)
class McpScope:
    """The memory one server serves, fixed at start-up."""

    project_dir: Path
    memsearch_dir: Path
    collection: str
    config: MemSearchConfig

    @property
    def memory_dir(self) -> Path:
        return self.memsearch_dir / "memory"

    @property
    def files_root(self) -> Path:
        """The folder memory files must stay inside to be read (``memsearch.engine.project_files``)."""
        from memsearch.engine.project_files import files_root

        return files_root(self.project_dir, self.memsearch_dir)

    @classmethod
    def build(cls, flags: dict[str, Any], project: str | None = None) -> McpScope:
        """From the command's store flags and ``--project`` (default: the working folder's git
        root, else the working folder), with ``MEMSEARCH_DIR`` as the plugins read it."""
        from memsearch.agent.hooks.base import MEMSEARCH_DIR_ENV, find_git_root
        from memsearch.agent.hooks.collection import absolute_path, derive_collection
        from memsearch.cli.flags import config_from_flags

        start = Path(absolute_path(project))
        project_dir = start if project else (find_git_root(start) or start)
        shared = os.environ.get(MEMSEARCH_DIR_ENV, "").strip()
        memsearch_dir = Path(absolute_path(shared)) if shared else project_dir / ".memsearch"
        given = dict(flags)
        if not given.get("collection"):  # the plugins' collection, whatever a config file names
            given["collection"] = derive_collection(shared or project_dir)
        cfg = config_from_flags(given, cwd=project_dir)
        return cls(project_dir, memsearch_dir, cfg.milvus.collection, cfg)

    def description(self) -> str:
        """The collection description the plugins give (so the owner shares the watch's engine)."""
        emb = self.config.embedding
        return f"{self.project_dir.name or '.'} | {emb.provider}/{emb.model or 'default'}"

    def open(self) -> Memory:
        """The memory, through the store's owner; contained like the plugins' (no link is indexed).

        No background service is started for it (unlike a CLI search): the server lives as long as
        its session, so when nobody owns the store it owns it itself, serving the CLI and the hooks
        meanwhile, and hands it on when stdin closes; nothing of its making outlives the session."""
        from memsearch.engine.lifecycle import ModelLifecycle
        from memsearch.engine.memory import open_memory

        return open_memory(
            self.config,
            [str(self.memory_dir)],
            lifecycle=ModelLifecycle.KEEP,  # it lives as long as its session, searching often
            description=self.description(),
            follow_links=False,
        )
