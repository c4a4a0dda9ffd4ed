"""Which memories the console shows, and each one's memory, opened once and shared by the pages.

A project is what the agent plugins call one: a memory folder (``<project>/.memsearch``, or a
shared ``MEMSEARCH_DIR``) and the collection named after it (``hooks.collection``), with the
project's configuration. ``memsearch ui`` shows the current project (the plugins' rules, as
``memsearch mcp``: ``memsearch.mcp.scope.McpScope``) or ``--project DIR``; ``--all`` adds every
memory folder memsearch's journal writer wrote into on this machine (``engine.written``: the
record every host's capture and the MCP ``remember`` tool leave), so nothing is guessed from a
disk walk.

A project's memory is opened on first use (a search, an expand, a forget), through the store's
owner like every other face (``open_memory``: a store nobody owns gets a background service when
``service.autostart`` allows, else this process owns it and serves the others), its memory folder
indexed once then (as the MCP server does: unchanged files cost nothing), and used by one request
at a time.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.engine.interface import Memory
    from memsearch.mcp.scope import McpScope

__all__ = ["ALL", "Project", "machine_projects"]

#: The key of the view over every project (the timeline and search merge them).
ALL = "all"


@dataclass
class Project:
    """One project's memory folder, collection and configuration, and its memory once opened."""

    scope: McpScope
    _memory: Memory | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def key(self) -> str:
        """A short stable name for URLs (from the memory folder's path)."""
        return hashlib.sha256(os.fsencode(self.scope.memsearch_dir)).hexdigest()[:12]

    @property
    def name(self) -> str:
        return self.scope.project_dir.name or str(self.scope.project_dir)

    @property
    def memory_dir(self) -> Path:
        return self.scope.memory_dir

    @property
    def memsearch_dir(self) -> Path:
        return self.scope.memsearch_dir

    @property
    def files_root(self) -> Path:
        return self.scope.files_root

    @property
    def config(self) -> Any:
        return self.scope.config

    @property
    def collection(self) -> str:
        return self.scope.collection

    def describe(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "label": f"{self.name} ({self.scope.project_dir})"}

    @contextmanager
    def memory(self) -> Iterator[Memory]:
        """The project's memory, for one request at a time (opened on first use)."""
        with self._lock:
            if self._memory is None:
                from memsearch.engine.lifecycle import ModelLifecycle
                from memsearch.engine.memory import open_memory

                self._memory = open_memory(
                    self.config,
                    [str(self.memory_dir)],
                    start=True,
                    lifecycle=ModelLifecycle.KEEP,  # a console searches often, for as long as it runs
                    description=self.scope.description(),
                    follow_links=False,
                )
                if self.memory_dir.is_dir():  # journals written while no plugin ran (as `mcp` does)
                    self._memory.index()
            yield self._memory

    def close(self) -> None:
        with self._lock:
            if self._memory is not None:
                self._memory.close()
                self._memory = None


def _scope_of(memory_dir: Path, flags: dict[str, Any]) -> McpScope:
    """The scope a hook of that memory folder's project has: a ``.memsearch`` folder belongs to the
    folder above it; any other memory folder is a shared ``MEMSEARCH_DIR`` (the collection is named
    after it)."""
    from memsearch.agent.hooks.collection import derive_collection
    from memsearch.cli.flags import config_from_flags
    from memsearch.mcp.scope import McpScope

    memsearch_dir = memory_dir.parent
    project_dir = memsearch_dir.parent if memsearch_dir.name == ".memsearch" else memsearch_dir
    collection = derive_collection(project_dir if memsearch_dir.name == ".memsearch" else memsearch_dir)
    given = {**flags, "collection": flags.get("collection") or collection}
    cfg = config_from_flags(given, cwd=project_dir)
    return McpScope(project_dir, memsearch_dir, cfg.milvus.collection, cfg)


def machine_projects(first: McpScope | None, flags: dict[str, Any]) -> list[Project]:
    """``first`` (the current project, when it has a memory folder), then every memory folder
    memsearch wrote a journal into on this machine, each once."""
    from memsearch.engine.written import memory_folders

    found: dict[Path, Project] = {}
    if first is not None:
        found[first.memsearch_dir] = Project(first)
    for folder in memory_folders():
        scope = _scope_of(folder, {k: v for k, v in flags.items() if k != "collection"})
        found.setdefault(scope.memsearch_dir, Project(scope))
    return list(found.values())
