"""What the watcher hands on: :class:`WatchEvent`, the callback shapes (ours and the original's),
the debounce's merge rule, and path containment."""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
KEEP_PREVIOUS = frozenset({("moved", "modified"), ("moved", "created"), ("created", "modified")})


@dataclass
class Pending:
    event: WatchEvent
    due: float


def takes_one_argument(callback: Callable[..., Any]) -> bool:
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


def pairs_to(callback: Callable[[str, Path], Any]) -> Callback:
    """Adapt a callback of the original's shape: ``(event_type, path)`` with ``created``,
    ``modified`` or ``deleted`` (a move is its old path deleted, then its new path created)."""

    def adapted(event: WatchEvent) -> Any:
        if event.event_type != "moved":
            return callback(event.event_type, event.path)
        if event.src_path is not None:
            callback("deleted", event.src_path)
        return callback("created", event.path)

    return adapted


def is_under(path: str, root: str) -> bool:
    """``path`` is ``root`` or inside it (on path boundaries: ``docs2`` is not under ``docs``)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
