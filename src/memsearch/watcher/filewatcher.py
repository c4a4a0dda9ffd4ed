"""The :class:`FileWatcher`: watchdog events debounced per path, handed in order to one worker
thread with its own event loop; fences for ``wait_idle``/``flush``."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from memsearch.errors import ConfigValueError, WatcherError
from memsearch.scanner import DEFAULT_EXTENSIONS
from memsearch.watcher.events import (
    DEFAULT_DEBOUNCE_MS,
    FENCE_PREFIX,
    KEEP_PREVIOUS,
    Callback,
    PathLike,
    Pending,
    WatchEvent,
    is_under,
    pairs_to,
    takes_one_argument,
)

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent
    from watchdog.observers.api import BaseObserver


logger = logging.getLogger("memsearch.watcher")

#: Seconds between two looks, while nothing is pending, at whether each watched folder is still
#: there: watchdog says nothing when a watched folder itself is moved away, or (a root is no folder
#: below a root) deleted.
ROOT_CHECK_SECONDS = 1.0

# --- the watcher ----------------------------------------------------------------------------


def _make_handler(watcher: FileWatcher) -> Any:
    """A watchdog handler that forwards every raw event to ``watcher`` (imported lazily)."""
    from watchdog.events import FileSystemEventHandler

    class _Forward(FileSystemEventHandler):
        def dispatch(self, event: FileSystemEvent) -> None:
            try:
                watcher._on_raw(event)
            except Exception:  # never let a bug kill watchdog's dispatcher thread
                logger.exception("memsearch watcher: could not handle %r", event)

    return _Forward()


class FileWatcher:
    """Watch markdown files under ``paths`` and call ``callback`` with debounced events.

    - Directory roots are watched recursively; a file root is watched through its parent directory
      (not recursively), and only events for that file count. Roots that do not exist are skipped.
    - Debounce: a path's event is processed once ``debounce_ms`` have passed without a newer event
      for it; the newer event replaces the older (a ``moved`` keeps its old path through later
      edits of the new one, and an old path that a replaced event carried is still processed, as
      ``deleted``). Paths are independent of each other.
    - ``path_filter`` (e.g. an :class:`IndexPolicy`) decides which created or modified files
      count; deletions and the old end of a move are never filtered, so the chunks of a file that
      is now ignored can still be removed.
    - ``callback(event)`` runs on one worker thread, one event at a time, earliest due first; if
      it returns an awaitable, that runs on the worker's own event loop (closed by :meth:`stop`).
      An exception from the callback is logged and the watcher carries on.
    - A directory root that is no longer there (moved away or deleted) becomes a ``deleted``
      directory event, as a folder below it would, within :data:`ROOT_CHECK_SECONDS` of the
      watcher being idle; that path is not watched any more.
    """

    def __init__(
        self,
        paths: Iterable[PathLike],
        callback: Callback | Callable[[str, Path], Any],
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        path_filter: Callable[[Path], bool] | None = None,
        *,
        extensions: Sequence[str] = DEFAULT_EXTENSIONS,
    ) -> None:
        if debounce_ms < 0:
            raise ConfigValueError(
                f"debounce_ms must be >= 0 (got {debounce_ms})", hint="set watch.debounce_ms to 0 or more"
            )
        self.paths = tuple(Path(p).expanduser().resolve() for p in paths)
        self.callback: Callback = (
            cast(Callback, callback)
            if takes_one_argument(callback)
            else pairs_to(cast("Callable[[str, Path], Any]", callback))
        )
        self.debounce_ms = debounce_ms
        self.path_filter = path_filter
        self.extensions = tuple(e.lower() for e in extensions)
        self._cond = threading.Condition()
        self._pending: dict[str, Pending] = {}
        self._busy = False
        self._stopping = False
        self._fences_seen: set[str] = set()
        self._fence_ids = itertools.count()
        self._observer: BaseObserver | None = None
        self._worker: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dir_roots: tuple[str, ...] = ()
        self._file_roots: frozenset[str] = frozenset()
        self._watched: tuple[str, ...] = ()

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    @property
    def watched_directories(self) -> tuple[str, ...]:
        """The directories given to the OS watcher while running (file roots add their parent)."""
        return self._watched

    def start(self) -> FileWatcher:
        """Start the observer and the worker; a no-op if already running. Returns ``self``."""
        if self.is_running:
            return self
        from watchdog.observers import Observer

        # watchdog warns when a directory it already watches is registered again (a folder created
        # and moved quickly); the watch carries on, so the warning is only noise on stderr.
        warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
        self._plan()
        observer = Observer()
        handler = _make_handler(self)
        file_parents = {str(Path(f).parent) for f in self._file_roots}
        try:
            for directory in self._watched:
                observer.schedule(handler, directory, recursive=directory not in file_parents)
            observer.start()
        except OSError as exc:
            with contextlib.suppress(Exception):
                observer.stop()
            raise WatcherError(
                f"Cannot watch {', '.join(self._watched)}: {exc.strerror or exc}",
                hint="on Linux, raise fs.inotify.max_user_watches (sysctl) or watch fewer folders",
            ) from exc
        with self._cond:
            self._pending.clear()
            self._stopping = False
            self._busy = False
        worker = threading.Thread(target=self._run_worker, name="memsearch-watch-worker", daemon=True)
        self._observer = observer
        self._worker = worker
        worker.start()
        return self

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop watching: drop events still waiting out their debounce, let the one being processed
        finish, stop the observer, join both threads and close the worker's event loop."""
        with self._cond:
            self._stopping = True
            self._pending.clear()
            self._cond.notify_all()
        observer, worker = self._observer, self._worker
        if observer is not None:
            with contextlib.suppress(Exception):
                observer.stop()
            if threading.current_thread() is not observer:
                observer.join(timeout)
        if worker is not None and threading.current_thread() is not worker:
            worker.join(timeout)
        self._observer = None
        if worker is None or not worker.is_alive():
            self._worker = None

    def __enter__(self) -> FileWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _plan(self) -> None:
        """Which directories to watch, and which paths are in scope."""
        dirs = sorted({str(p) for p in self.paths if p.is_dir()})
        # A directory inside another root is already covered by the recursive watch.
        dirs = [d for d in dirs if not any(is_under(d, other) for other in dirs if other != d)]
        files = {str(p) for p in self.paths if p.is_file() and not any(is_under(str(p), d) for d in dirs)}
        self._dir_roots = tuple(dirs)
        self._file_roots = frozenset(files)
        self._watched = tuple(dirs) + tuple(sorted({str(Path(f).parent) for f in files} - set(dirs)))
        for p in self.paths:
            if not p.exists():
                logger.info("not watching %s: it does not exist", p)

    # -- waiting --------------------------------------------------------------------------

    @property
    def pending_count(self) -> int:
        """Events waiting out their debounce or being processed."""
        with self._cond:
            return len(self._pending) + (1 if self._busy else 0)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every change made on disk before this call has been processed.

        Debounce still applies (events are processed when they fall due). To make sure the OS has
        delivered every earlier event, a short-lived hidden marker file is created and removed in
        each watched directory and the call waits to see it (a *fence*). Returns False on timeout.
        """
        return self._wait(timeout, flush=False)

    def flush(self, timeout: float | None = None) -> bool:
        """Like :meth:`wait_idle`, but process pending events now instead of after their debounce."""
        return self._wait(timeout, flush=True)

    def _wait(self, timeout: float | None, *, flush: bool) -> bool:
        if self._worker is not None and threading.current_thread() is self._worker:
            raise RuntimeError("cannot wait for the watcher from its own callback")
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.is_running and not self._fence(deadline):
            return False
        with self._cond:
            if flush:
                for pending in self._pending.values():
                    pending.due = 0.0
                self._cond.notify_all()
            while (self._pending or self._busy) and self.is_running:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def _fence(self, deadline: float | None) -> bool:
        """Create and remove a marker in each watched directory; wait until all are seen."""
        names: list[str] = []
        for directory in self._watched:
            name = f"{FENCE_PREFIX}{os.getpid()}-{next(self._fence_ids)}"
            marker = os.path.join(directory, name)
            try:
                with open(marker, "x", encoding="utf-8"):
                    pass
                os.unlink(marker)
            except OSError:  # a read-only folder: nothing to fence with, nothing can change there
                continue
            names.append(name)
        with self._cond:
            try:
                while not self._fences_seen.issuperset(names):
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if (remaining is not None and remaining <= 0) or not self.is_running:
                        return False
                    self._cond.wait(remaining)
            finally:
                self._fences_seen.difference_update(names)
        return True

    # -- raw events (observer thread) -----------------------------------------------------

    def _on_raw(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        src = os.fsdecode(event.src_path)
        if os.path.basename(src).startswith(FENCE_PREFIX):
            if kind == "created":
                with self._cond:
                    self._fences_seen.add(os.path.basename(src))
                    self._cond.notify_all()
            return
        handler = self._RAW_HANDLERS.get(kind)
        if handler is None:  # opened, closed, attrib...: a write also sends "modified"
            return
        dest = os.fsdecode(getattr(event, "dest_path", "") or "")
        with self._cond:
            if self._stopping:
                return
            handler(self, src, dest, event.is_directory)
            self._cond.notify_all()

    def _raw_changed(self, src: str, _dest: str, is_dir: bool, kind: str = "modified") -> None:
        if not is_dir and self._indexable(src):
            self._put(src, WatchEvent(kind, Path(src)))

    def _raw_created(self, src: str, dest: str, is_dir: bool) -> None:
        self._raw_changed(src, dest, is_dir, "created")

    def _raw_deleted(self, src: str, _dest: str, is_dir: bool) -> None:
        if is_dir:
            if self._visible_dir(src):
                self._put(src, WatchEvent("deleted", Path(src), is_directory=True))
        elif self._markdown_in_scope(src):
            self._put(src, WatchEvent("deleted", Path(src)))

    def _raw_moved(self, src: str, dest: str, is_dir: bool) -> None:
        if is_dir:
            # The files inside arrive as their own moved events; the old folder is gone as a whole.
            self._raw_deleted(src, "", True)
            return
        old_counts = self._markdown_in_scope(src)
        new_counts = bool(dest) and self._indexable(dest)
        if old_counts:
            previous = self._pending.pop(src, None)
            if previous is not None and previous.event.src_path is not None:
                self._orphan(previous.event.src_path)
        if new_counts:
            event = (
                WatchEvent("moved", Path(dest), Path(src))
                if old_counts
                else WatchEvent("modified", Path(dest))  # e.g. an editor's temp file renamed over it
            )
            self._put(dest, event)
        elif old_counts:
            self._put(src, WatchEvent("deleted", Path(src)))

    _RAW_HANDLERS: ClassVar[dict[str, Callable[[FileWatcher, str, str, bool], None]]] = {
        "created": _raw_created,
        "modified": _raw_changed,
        "deleted": _raw_deleted,
        "moved": _raw_moved,
    }

    def _put(self, key: str, event: WatchEvent) -> None:
        """Schedule ``event`` for ``key`` (lock held), merging with what is already pending."""
        old = self._pending.pop(key, None)
        if old is not None:
            previous = old.event
            if (previous.event_type, event.event_type) in KEEP_PREVIOUS:
                event = previous
            elif previous.src_path is not None and previous.src_path != event.src_path:
                self._orphan(previous.src_path)
        # Re-inserted at the end: dict order is arrival order, the tie-break between equal due times.
        self._pending[key] = Pending(event, time.monotonic() + self.debounce_ms / 1000)

    def _orphan(self, path: Path) -> None:
        """The old path of a replaced move still needs its chunks removed (lock held)."""
        if str(path) not in self._pending:
            self._pending[str(path)] = Pending(
                WatchEvent("deleted", path), time.monotonic() + self.debounce_ms / 1000
            )

    def _in_scope(self, path: str) -> bool:
        return path in self._file_roots or any(is_under(path, root) for root in self._dir_roots)

    def _markdown_in_scope(self, path: str) -> bool:
        return os.path.splitext(path)[1].lower() in self.extensions and self._in_scope(path)

    def _indexable(self, path: str) -> bool:
        if not self._markdown_in_scope(path):
            return False
        return self.path_filter is None or bool(self.path_filter(Path(path)))

    def _visible_dir(self, path: str) -> bool:
        """A folder below a directory root whose relative path has no hidden component."""
        for root in self._dir_roots:
            if is_under(path, root) and path != root:
                rel = os.path.relpath(path, root)
                return not any(part.startswith(".") for part in Path(rel).parts)
        return False

    # -- the worker -----------------------------------------------------------------------

    def _next(self) -> WatchEvent | None:
        """Block until an event falls due (then mark the worker busy), or None when stopping."""
        with self._cond:
            while True:
                if self._stopping:
                    return None
                if self._pending:
                    key, first = min(self._pending.items(), key=lambda item: item[1].due)
                    wait = first.due - time.monotonic()
                    if wait <= 0:
                        del self._pending[key]
                        self._busy = True
                        return first.event
                    self._cond.wait(wait)
                else:
                    self._cond.wait(ROOT_CHECK_SECONDS)
                    self._check_roots()

    def _check_roots(self) -> None:
        """Each directory root that is gone takes its chunks along (lock held); see the class."""
        gone = [root for root in self._dir_roots if not os.path.isdir(root)]
        if gone:
            self._dir_roots = tuple(root for root in self._dir_roots if root not in gone)
            for root in gone:
                logger.info("%s is gone: its chunks are removed, and it is not watched any more", root)
                self._put(root, WatchEvent("deleted", Path(root), is_directory=True))

    def _run_worker(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            while (event := self._next()) is not None:
                try:
                    result = self.callback(event)
                    if inspect.isawaitable(result):
                        loop.run_until_complete(result)
                except Exception:
                    logger.exception("watch callback failed for %s", event.path)
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
                self._loop = None
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
