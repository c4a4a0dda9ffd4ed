"""The file watcher: filesystem events → debounced per-path events → one worker → the index.

This package owns three pieces, each usable on its own:

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

The package is split along those pieces; this module re-exports their names, so
``from memsearch.watcher import ...`` keeps working:

- :mod:`~memsearch.watcher.events`: :class:`WatchEvent`, the callback shapes, the debounce's merge rule;
- :mod:`~memsearch.watcher.policy`: :class:`IndexPolicy`;
- :mod:`~memsearch.watcher.filewatcher`: :class:`FileWatcher` (debounce, the worker, fences);
- :mod:`~memsearch.watcher.updater`: :class:`IndexUpdater` and :func:`watch_index`.
"""

from memsearch.errors import WatcherError
from memsearch.watcher.events import (
    DEFAULT_DEBOUNCE_MS,
    FENCE_PREFIX,
    Callback,
    OnError,
    OnEvent,
    PathLike,
    WatchEvent,
)
from memsearch.watcher.filewatcher import FileWatcher
from memsearch.watcher.policy import IndexPolicy
from memsearch.watcher.updater import IndexUpdater, watch_index

__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "FENCE_PREFIX",
    "Callback",
    "FileWatcher",
    "IndexPolicy",
    "IndexUpdater",
    "OnError",
    "OnEvent",
    "PathLike",
    "WatchEvent",
    "WatcherError",
    "watch_index",
]
