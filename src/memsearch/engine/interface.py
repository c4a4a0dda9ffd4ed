"""The synchronous face of a memory: :class:`Memory`, what the CLI, the hooks, the MCP tools,
maintenance and ``forget`` hold; and :class:`ChunkSource`, what ``compact`` needs.

Why synchronous: none of those callers runs an event loop, and most calls are answered by the
store's owner over its socket, which blocks anyway. So ``memory.search(q, top_k=5)`` returns the
hits. Its methods are exactly the operations of ``memsearch.engine.operations.OPERATIONS`` (a test checks
the signatures against the table): each checks its arguments there once and hands them to
``memsearch.service.owner.perform``, which sends them to the owner or runs them here. A routed call
never starts (or imports) asyncio; work done here that embeds gets a loop of its own.

The awaitable face of the same operations is ``memsearch.MemSearch`` (the original library API);
a ``Memory`` wraps one (``memsearch.engine.memory.open_memory`` builds it). Standard library only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from memsearch.core import MemSearch
    from memsearch.engine.expand import Expansion
    from memsearch.engine.indexer import IndexReport, Progress

T = TypeVar("T")

__all__ = ["ChunkSource", "Memory", "drive"]


class ChunkSource(Protocol):
    """What ``memsearch.compact`` needs from a memory: the stored chunks, and indexing a new file
    (a ``Memory`` answers it at once, a ``MemSearch`` with an awaitable)."""

    def query_chunks(self, source: str | None = None) -> list[dict[str, Any]]: ...

    def index_file(self, path: str | Path) -> int | Awaitable[int]: ...


class Memory:
    """Index, search and read one store's memory, synchronously, wherever the store is owned.

    Results are identical whether this process or the store's memory service does the work
    (``tests/test_service.py`` checks that).
    """

    def __init__(self, memsearch: MemSearch) -> None:
        self._ms = memsearch

    def _do(self, name: str, args: dict[str, Any]) -> Any:
        return self._ms._now(name, args)  # checked once, run at the owner (MemSearch._perform)

    def search(
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
        min_relevance: float | None = None,
    ) -> list[dict[str, Any]]:
        """Hybrid search; results sorted by descending score (``MemSearch.search`` says more)."""
        result: list[dict[str, Any]] = self._do("search", locals())
        return result

    def index_with_report(self, *, force: bool = False, progress: Progress | None = None) -> IndexReport:
        """Index the configured paths; per-file failures are in the report, not raised."""
        report: IndexReport = self._do("index_with_report", locals())
        return report

    def index(self, *, force: bool = False) -> int:
        """Index the configured paths; returns the number of chunks embedded in this run."""
        return self.index_with_report(force=force).indexed_chunks

    def index_file(self, path: str | Path) -> int:
        """Index one file (no ignore rules apply); returns the chunks embedded."""
        return int(self._do("index_file", locals()))

    def remove_file(self, path: str | Path) -> dict[str, int]:
        """Delete one file's chunks (it may be gone) and its manifest entry; chunks removed per source."""
        removed: dict[str, int] = self._do("remove_file", locals())
        return removed

    def purge(self) -> dict[str, int]:
        """Rewrite the store's files without its deleted rows (Milvus Lite; a server is asked to
        compact): ``purged``, ``files`` rewritten, ``rows`` dropped."""
        purged: dict[str, int] = self._do("purge", locals())
        return purged

    def query_chunks(self, source: str | None = None) -> list[dict[str, Any]]:
        """The stored rows of every chunk, or of those whose ``source`` is the file ``source`` or a
        file under the folder ``source`` (an absolute, resolved path; see ``compact.normalize_source``)."""
        rows: list[dict[str, Any]] = self._do("query_chunks", locals())
        return rows

    def get_chunk(self, chunk_hash: str) -> dict[str, Any]:
        """The stored row of one chunk; ChunkNotFoundError when there is none."""
        row: dict[str, Any] = self._do("get_chunk", locals())
        return row

    def expand(self, chunk_hash: str, *, section: bool = True, context_lines: int | None = None) -> Expansion:
        """The full section (or ±N lines) around a chunk, read from its markdown file."""
        expansion: Expansion = self._do("expand", locals())
        return expansion

    def count(self, *, missing_ok: bool = True) -> int:
        """Number of chunks in the collection; 0 for none, unless ``missing_ok`` is false."""
        return int(self._do("count", locals()))

    def reset(self) -> None:
        """Drop the collection and forget the manifest; the markdown files are untouched."""
        self._do("reset", locals())

    def close(self) -> None:
        """Release what this memory holds here (the store, the model, the ownership of the store)."""
        self._ms.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (``service.owner.perform``: an answer from the store's
    owner, over its socket, or work here that starts its own loop) to its end, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("a memsearch coroutine suspended outside an event loop")
