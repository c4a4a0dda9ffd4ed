"""The file watcher: filesystem events → debounced per-path events → one worker → the index.

This module owns three pieces, each usable on its own:

- :class:`FileWatcher` turns watchdog events into debounced :class:`WatchEvent` s and hands them,
  one at a time and in order, to a callback running on a single worker thread with its own asyncio
  event loop. A coroutine callback runs on that loop, so events never run concurrently and never
  share a loop with another thread (timer threads driving one shared loop fail with "event loop is
  already running" as soon as two files change at once). It is an object a long-lived owner (the
  CLI, or the local memory service) starts and stops; ``start`` is idempotent, so using a started
  watcher as a context manager is safe (a second start of the observer thread would raise), and a
  stopped watcher can be started again.
- :class:`IndexPolicy` answers "would ``index`` pick up this path?" with the scanner's own rule
  (:func:`memsearch.scanner.should_index_path`), caching each verdict until one of the ignore files
  that could change it changes (by mtime, ctime, size and inode), so an event does not re-read and
  re-parse ignore files (a save burst would otherwise read every ignore file once per event).
- :class:`IndexUpdater` is the callback that keeps an index in step: for every path an event
  names it *reconciles* the index with the disk — a file that exists and should be indexed is
  indexed, anything else has its chunks removed. Acting on the disk state rather than on the event
  kind is what makes renames, editors' "write a temp file, rename it over the target" saves, and
  bursts of mixed events come out right whatever order they arrive in (a handler per event kind
  misses the rename at the end of an atomic save and leaves a renamed-away file's chunks behind).

Also: moves are handled at both ends (the old path's chunks go, the new path is indexed); a single
markdown file given as a root is watched (through its parent directory, filtered to that file,
since watchdog watches directories); a deleted or moved-away folder drops the chunks of everything that
was indexed below it; ``wait_idle``/``flush`` let a caller wait until everything that happened on
disk before the call has been processed (tests and the service use it instead of sleeping).
"""

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
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from memsearch.errors import ConfigValueError, SourceFileNotFoundError, WatcherError
from memsearch.scanner import DEFAULT_EXTENSIONS, should_index_path, validate_ignore_files

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent
    from watchdog.observers.api import BaseObserver

    from memsearch.indexer import Indexer

__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "FileWatcher",
    "IndexPolicy",
    "IndexUpdater",
    "WatchEvent",
    "WatcherError",
    "watch_index",
]

logger = logging.getLogger("memsearch.watcher")

#: How long a path must stay quiet before its event is processed (the original's default).
DEFAULT_DEBOUNCE_MS = 1500
#: Name prefix of the short-lived marker files ``wait_idle``/``flush`` create to fence the event stream.
FENCE_PREFIX = ".memsearch-watch-fence-"

PathLike = str | os.PathLike[str]
#: ``on_event(event_type, summary, path)``: one line of what an event did to the index.
OnEvent = Callable[[str, str, Path], None]
#: ``on_error(event_type, exc, path)``: an event failed for one path; the watcher keeps running.
OnError = Callable[[str, BaseException, Path], None]
#: What a :class:`FileWatcher` calls for each debounced event; may return an awaitable.
Callback = Callable[["WatchEvent"], "Awaitable[Any] | None"]


@dataclass(frozen=True)
class WatchEvent:
    """One debounced change.

    ``event_type`` is ``created``, ``modified``, ``deleted`` or ``moved``. For ``moved``, ``path``
    is the new path and ``src_path`` the old one. ``is_directory`` marks a folder that was deleted
    or moved away: everything indexed below it is gone. The type says what was seen; consumers
    should act on the disk state (see :class:`IndexUpdater`), as later changes may have followed.
    """

    event_type: str
    path: Path
    src_path: Path | None = None
    is_directory: bool = False


#: (pending type, newer type) pairs where the pending event stands: a move stays a move through
#: edits of its new path (its old path must still go), and a new file stays new.
_KEEP_PREVIOUS = frozenset({("moved", "modified"), ("moved", "created"), ("created", "modified")})


@dataclass
class _Pending:
    event: WatchEvent
    due: float


def _takes_one_argument(callback: Callable[..., Any]) -> bool:
    """Whether ``callback`` is this module's shape, ``callback(event)``; the original memsearch's
    ``callback(event_type, path)`` takes two."""
    try:
        signature = inspect.signature(callback)
    except (TypeError, ValueError):  # a builtin without a signature: assume ours
        return True
    try:
        signature.bind(None, None)
    except TypeError:
        return True
    try:
        signature.bind(None)
    except TypeError:
        return False
    return True


def _pairs_to(callback: Callable[[str, Path], Any]) -> Callback:
    """Adapt a callback of the original's shape: ``(event_type, path)`` with ``created``,
    ``modified`` or ``deleted`` (a move is its old path deleted, then its new path created)."""

    def adapted(event: WatchEvent) -> Any:
        if event.event_type != "moved":
            return callback(event.event_type, event.path)
        if event.src_path is not None:
            callback("deleted", event.src_path)
        return callback("created", event.path)

    return adapted


# --- which paths count ----------------------------------------------------------------------


class IndexPolicy:
    """``should_index_path`` for fixed roots, with verdicts cached per path.

    A cached verdict is reused while the ignore files in the directories from its root down to the
    path are unchanged (same mtime, ctime, size and inode, or still missing): checking costs a
    few ``stat`` calls, whereas the uncached rule reads and parses every ignore file on the way.
    Thread-safe; roots are resolved once, at construction.
    """

    def __init__(
        self,
        roots: Iterable[PathLike],
        *,
        ignore_files: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        extensions: Sequence[str] = DEFAULT_EXTENSIONS,
        max_entries: int = 10_000,
    ) -> None:
        self.roots = tuple(Path(r).expanduser().resolve() for r in roots)
        self.ignore_files = validate_ignore_files(ignore_files)
        self.exclude = tuple(exclude or ())
        self.extensions = tuple(e.lower() for e in extensions)
        self._dir_roots = tuple(r for r in self.roots if r.is_dir())
        self._max_entries = max_entries
        self._cache: dict[str, tuple[tuple[object, ...], bool]] = {}
        self._lock = threading.Lock()

    def __call__(self, path: PathLike) -> bool:
        candidate = Path(os.path.abspath(os.path.expanduser(path)))
        if candidate.suffix.lower() not in self.extensions:
            return False
        key = str(candidate)
        stamp = self._stamp(candidate)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        verdict = should_index_path(
            candidate,
            self.roots,
            extensions=self.extensions,
            ignore_files=self.ignore_files,
            exclude=self.exclude,
        )
        with self._lock:
            if len(self._cache) >= self._max_entries:
                self._cache.clear()
            self._cache[key] = (stamp, verdict)
        return verdict

    def _stamp(self, path: Path) -> tuple[object, ...]:
        """The state of every ignore file that can affect ``path``'s verdict."""
        if not self.ignore_files:
            return ()
        parts: list[object] = []
        for root in self._dir_roots:
            try:
                rel = path.relative_to(root)
            except ValueError:
                continue
            directory = root
            for depth in range(len(rel.parts)):
                if depth:
                    directory = directory / rel.parts[depth - 1]
                for name in self.ignore_files:
                    try:
                        st = os.stat(directory / name)
                    except OSError:
                        parts.append(None)
                        continue
                    parts.append((st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        return tuple(parts)


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
            if _takes_one_argument(callback)
            else _pairs_to(cast("Callable[[str, Path], Any]", callback))
        )
        self.debounce_ms = debounce_ms
        self.path_filter = path_filter
        self.extensions = tuple(e.lower() for e in extensions)
        self._cond = threading.Condition()
        self._pending: dict[str, _Pending] = {}
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
        dirs = [d for d in dirs if not any(_is_under(d, other) for other in dirs if other != d)]
        files = {str(p) for p in self.paths if p.is_file() and not any(_is_under(str(p), d) for d in dirs)}
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
            if (previous.event_type, event.event_type) in _KEEP_PREVIOUS:
                event = previous
            elif previous.src_path is not None and previous.src_path != event.src_path:
                self._orphan(previous.src_path)
        # Re-inserted at the end: dict order is arrival order, the tie-break between equal due times.
        self._pending[key] = _Pending(event, time.monotonic() + self.debounce_ms / 1000)

    def _orphan(self, path: Path) -> None:
        """The old path of a replaced move still needs its chunks removed (lock held)."""
        if str(path) not in self._pending:
            self._pending[str(path)] = _Pending(
                WatchEvent("deleted", path), time.monotonic() + self.debounce_ms / 1000
            )

    def _in_scope(self, path: str) -> bool:
        return path in self._file_roots or any(_is_under(path, root) for root in self._dir_roots)

    def _markdown_in_scope(self, path: str) -> bool:
        return os.path.splitext(path)[1].lower() in self.extensions and self._in_scope(path)

    def _indexable(self, path: str) -> bool:
        if not self._markdown_in_scope(path):
            return False
        return self.path_filter is None or bool(self.path_filter(Path(path)))

    def _visible_dir(self, path: str) -> bool:
        """A folder below a directory root whose relative path has no hidden component."""
        for root in self._dir_roots:
            if _is_under(path, root) and path != root:
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
                    self._cond.wait()

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


# --- keeping an index in step ---------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    indexed: bool
    chunks: int  # embedded when indexed, removed otherwise


class IndexUpdater:
    """The :class:`FileWatcher` callback that keeps an :class:`~memsearch.indexer.Indexer`'s index
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
                self._report(
                    "deleted", f"Removed chunks for {removed} file(s) under {event.path}", event.path
                )
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
                summary = f"Moved {moved_from} -> {event.path} (indexed {new.chunks} chunks)"
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
            from memsearch.indexer import format_error

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


def _indexed(chunks: int, path: Path) -> str:
    return f"Indexed {chunks} chunks from {path}"


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


# --- helpers --------------------------------------------------------------------------------


def _is_under(path: str, root: str) -> bool:
    """``path`` is ``root`` or inside it (on path boundaries: ``docs2`` is not under ``docs``)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
