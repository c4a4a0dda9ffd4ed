"""Keeping an index in step: :class:`IndexUpdater` reconciles each path an event names with the
disk, and :func:`watch_index` wires it to a started :class:`FileWatcher`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import SourceFileNotFoundError
from memsearch.watcher.events import DEFAULT_DEBOUNCE_MS, OnError, OnEvent, WatchEvent
from memsearch.watcher.filewatcher import FileWatcher
from memsearch.watcher.policy import IndexPolicy

if TYPE_CHECKING:
    from memsearch.engine.indexer import Indexer

logger = logging.getLogger("memsearch.watcher")

# --- keeping an index in step ---------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    indexed: bool
    chunks: int  # embedded when indexed, removed otherwise


class IndexUpdater:
    """The :class:`FileWatcher` callback that keeps an :class:`~memsearch.engine.indexer.Indexer`'s index
    in step with the disk.

    Each path an event names is reconciled: a file that exists and passes ``policy`` is indexed
    (only changed chunks are embedded), anything else has its chunks removed and is dropped from the
    manifest. ``on_event(event_type, summary, path)`` gets one line per real change
    (``Indexed N chunks from P``, ``Removed chunks for P``, ``Moved OLD -> NEW (indexed N chunks)``);
    removing a file that had no chunks is silent. ``on_error(event_type, exc, path)`` gets each
    failure, which never stops the watcher; without ``on_error`` failures are logged as warnings.
    """

    def __init__(
        self,
        indexer: Indexer,
        policy: Callable[[Path], bool],
        *,
        on_event: OnEvent | None = None,
        on_error: OnError | None = None,
    ) -> None:
        self.indexer = indexer
        self.policy = policy
        self.on_event = on_event
        self.on_error = on_error

    async def __call__(self, event: WatchEvent) -> None:
        if event.is_directory:
            removed = await self._guard(event.event_type, event.path, self._remove_tree(event.path))
            if removed:
                files = "1 file" if removed == 1 else f"{removed} files"
                self._report("deleted", f"Removed chunks for {files} under {event.path}", event.path)
            return
        moved_from: Path | None = None
        if event.src_path is not None:
            old = await self._guard(event.event_type, event.src_path, self._sync(event.src_path))
            if old is not None and old.indexed:  # the old path exists again: an index of its own
                self._report("modified", _indexed(old.chunks, event.src_path), event.src_path)
            elif old is not None and old.chunks:
                moved_from = event.src_path
        new = await self._guard(event.event_type, event.path, self._sync(event.path))
        if new is not None and new.indexed:
            if moved_from is not None:
                summary = f"Moved {moved_from} -> {event.path} (indexed {_chunks(new.chunks)})"
                self._report("moved", summary, event.path)
            else:
                kind = "modified" if event.event_type == "deleted" else event.event_type
                self._report(kind, _indexed(new.chunks, event.path), event.path)
            return
        if moved_from is not None:
            self._report("deleted", f"Removed chunks for {moved_from}", moved_from)
        if new is not None and new.chunks:
            self._report("deleted", f"Removed chunks for {event.path}", event.path)

    async def _sync(self, path: Path) -> _Outcome:
        """Make the index agree with the disk for one path."""
        if path.is_file() and self.policy(path):
            try:
                return _Outcome(True, await self.indexer.index_file(path))
            except SourceFileNotFoundError:
                pass  # deleted since the check: remove it below
        return _Outcome(False, sum(self.indexer.remove(path).values()))

    async def _remove_tree(self, path: Path) -> int:
        return len(self.indexer.remove(path, directory=True))

    async def _guard(self, event_type: str, path: Path, work: Awaitable[Any]) -> Any:
        """Run one path's work; a failure goes to ``on_error`` and yields None."""
        try:
            return await work
        except Exception as exc:
            from memsearch.index_report import format_error

            if self.on_error is None:
                logger.warning("watch: %s failed for %s: %s", event_type, path, format_error(exc))
                return None
            logger.debug("watch: %s failed for %s", event_type, path, exc_info=True)
            try:
                self.on_error(event_type, exc, path)
            except Exception:
                logger.exception("watch on_error callback failed")
            return None

    def _report(self, event_type: str, summary: str, path: Path) -> None:
        logger.info("%s", summary)
        if self.on_event is not None:
            try:
                self.on_event(event_type, summary, path)
            except Exception:
                logger.exception("watch on_event callback failed")


def _chunks(count: int) -> str:
    """``1 chunk``, ``2 chunks``: as ``memsearch index`` counts them."""
    return f"{count} chunk" if count == 1 else f"{count} chunks"


def _indexed(chunks: int, path: Path) -> str:
    return f"Indexed {_chunks(chunks)} from {path}"


def watch_index(
    indexer: Indexer,
    *,
    on_event: OnEvent | None = None,
    on_error: OnError | None = None,
    debounce_ms: int | None = None,
    runner: Callable[[Any], Any] | None = None,
) -> FileWatcher:
    """Watch ``indexer``'s paths with its ignore rules and keep its index in step; returns the
    started watcher (``MemSearch.watch`` is this, for the instance's own indexer).

    ``runner``, when given, runs each update coroutine instead of the watcher's own loop: the memory
    service passes its engine loop's runner, so watcher updates never run concurrently with the
    requests it serves on the same store.
    """
    settings = indexer.settings
    policy = IndexPolicy(settings.paths, ignore_files=settings.ignore_files, exclude=settings.exclude)
    updater = IndexUpdater(indexer, policy, on_event=on_event, on_error=on_error)
    delay = DEFAULT_DEBOUNCE_MS if debounce_ms is None else debounce_ms
    callback: Any = updater if runner is None else (lambda event: runner(updater(event)))
    return FileWatcher(settings.paths, callback, delay, path_filter=policy).start()
