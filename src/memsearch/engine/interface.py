"""The one seam between callers and the memory: :class:`Memory`, and the narrower :class:`ChunkSource`.

Why: the CLI and the agent hooks either open the store in their own process (``MemSearch``, in
``memsearch.core``) or ask the store's memory service (``ServiceMemory``, in
``memsearch.service.client``). Both implement this interface with the same shapes, so a caller holds
a ``Memory`` and never asks which one it got (``memsearch.engine.memory.open_memory`` decides, once).

The shape is the engine's: the calls that embed (``search``, ``index_with_report``, ``index_file``)
are coroutines, the rest are plain calls. Synchronous callers run a coroutine with
:meth:`Memory.run`, which each implementation answers in the cheapest way it can: the service's
coroutines never wait on anything, so running them needs no event loop (a routed ``memsearch search``
never imports asyncio, 30 ms of its 80 ms otherwise).

Standard library only: the service client imports this module, and it must stay light.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from memsearch.engine.expand import Expansion
    from memsearch.engine.indexer import IndexReport, Progress

T = TypeVar("T")

__all__ = ["ChunkSource", "Memory", "drive"]


class ChunkSource(ABC):
    """What ``memsearch.compact`` needs from a memory: the stored chunks, and indexing a new file."""

    @abstractmethod
    def query_chunks(self, source: str | None = None) -> list[dict[str, Any]]:
        """The stored rows of every chunk, or of those whose ``source`` is the file ``source`` or a
        file under the folder ``source`` (an absolute, resolved path; see ``compact.normalize_source``)."""

    @abstractmethod
    async def index_file(self, path: str | Path) -> int:
        """Index one file (no ignore rules apply); returns the chunks embedded."""


class Memory(ChunkSource):
    """Index, search and read one store's memory: the methods the CLI and the hooks use.

    Implementations: ``memsearch.core.MemSearch`` (this process opens the store) and
    ``memsearch.service.client.ServiceMemory`` (the store's memory service answers). Results are
    identical either way; ``tests/test_service.py`` checks that.
    """

    @abstractmethod
    async def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        source_prefix: str | None = None,
        since: str | dt.date | None = None,
        until: str | dt.date | None = None,
        time_phrases: bool = True,
        recency_half_life: float | None = None,
        today: str | dt.date | None = None,
    ) -> list[dict[str, Any]]:
        """Hybrid search; results sorted by descending score. The time arguments are
        ``MemSearch.search``'s (a window of days, the query's time phrase, recency)."""

    @abstractmethod
    async def index_with_report(
        self, *, force: bool = False, progress: Progress | None = None
    ) -> IndexReport:
        """Index the configured paths; per-file failures are in the report, not raised."""

    async def index(self, *, force: bool = False) -> int:
        """Index the configured paths; returns the number of chunks embedded in this run."""
        return (await self.index_with_report(force=force)).indexed_chunks

    @abstractmethod
    def expand(self, chunk_hash: str, *, section: bool = True, context_lines: int | None = None) -> Expansion:
        """The full section (or ±N lines) around a chunk, read from its markdown file."""

    @abstractmethod
    def count(self, *, missing_ok: bool = True) -> int:
        """Number of chunks in the collection; 0 for none, unless ``missing_ok`` is false."""

    @abstractmethod
    def reset(self) -> None:
        """Drop the collection and forget the manifest; the markdown files are untouched."""

    def close(self) -> None:
        """Release what this memory holds (the default holds nothing)."""

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of this memory's coroutines to completion from synchronous code (the CLI, the
        hooks). The default starts an event loop for it."""
        import asyncio

        return asyncio.run(coro)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (an answer from the store's owner, over its socket) to
    its end, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("a memsearch coroutine suspended outside an event loop")
