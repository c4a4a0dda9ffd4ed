"""``MemSearch.watch`` when another process owns the store: the watch runs in that owner.

Why: the watcher updates the index, and only the store's owner may write it
(``memsearch.service.owner``). So a program whose store is owned elsewhere (a ``memsearch serve``, an
agent hook's service, another program) asks the owner to watch its paths for as long as it wants,
and gets the same ``on_event``/``on_error`` calls it would get from a watcher of its own. When the
owner goes away, this process takes the store over and watches it here, or joins the next owner.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import ServiceGoneError

if TYPE_CHECKING:
    from memsearch.core import MemSearch
    from memsearch.service.server import Engine
    from memsearch.watcher import FileWatcher, OnError, OnEvent


def watch_at_owner(
    ms: MemSearch, on_event: OnEvent | None, on_error: OnError | None, debounce_ms: int | None, engine: Engine
) -> OwnerWatch | None:
    """A started watch at the store's owner when that is another process; None when this process
    owns the store (claimed now if nobody did): then ``ms`` watches it itself."""
    from memsearch.service import owner

    if owner.owner(ms._uri, ms, engine=engine) is None:
        return None
    watch = OwnerWatch(ms, on_event=on_event, on_error=on_error, debounce_ms=debounce_ms, engine=engine)
    return watch.start()


class OwnerWatch:
    """A started watch of ``ms``'s paths that runs wherever the store's owner is.

    Answers the parts of :class:`~memsearch.watcher.FileWatcher` a caller uses: :meth:`stop`,
    :attr:`is_running`, :meth:`wait_idle`/:meth:`flush` (exact once the watch runs here; at a
    remote owner they return True at once: its events are processed there) and ``with``.
    """

    def __init__(
        self,
        ms: MemSearch,
        *,
        on_event: OnEvent | None,
        on_error: OnError | None,
        debounce_ms: int | None,
        engine: Engine,
    ) -> None:
        self._ms = ms
        self._engine = engine
        self._on_event = on_event
        self._on_error = on_error
        self._debounce_ms = debounce_ms
        self._stopping = threading.Event()
        self._watching = threading.Event()
        self._sock: socket.socket | None = None
        self._local: FileWatcher | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="memsearch-owner-watch", daemon=True)

    def start(self, timeout: float = 120.0) -> OwnerWatch:
        """Start, and return once the owner watches (so a change made after this is seen)."""
        self._thread.start()
        self._watching.wait(timeout)
        if self._failure is not None:
            raise self._failure
        return self

    def _run(self) -> None:
        from memsearch.service import owner

        try:
            while not self._stopping.is_set():
                client = owner.owner(self._ms._uri, self._ms, engine=self._engine)
                if client is None:  # this process owns the store now: watch here
                    self._local = self._ms._watch_here(self._on_event, self._on_error, self._debounce_ms)
                    self._watching.set()
                    return
                settings = {**self._ms._settings, "paths": [str(Path(p).resolve()) for p in self._ms._paths]}
                with contextlib.suppress(ServiceGoneError):
                    client.watch(
                        settings,
                        {"debounce_ms": self._debounce_ms},
                        self._message,
                        on_connect=self._connected,
                    )
        except BaseException as exc:  # told to the caller of start(), or logged below
            self._failure = exc
            self._watching.set()

    def _connected(self, sock: socket.socket) -> None:
        self._sock = sock
        if self._stopping.is_set():
            self._hang_up()

    def _hang_up(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def _message(self, message: dict[str, Any]) -> None:
        from memsearch.service.protocol import error_from_payload

        if message.get("ok") is False:
            raise error_from_payload(message.get("error") or {})
        if message.get("watching"):
            self._watching.set()
        elif "error" in message and self._on_error is not None:
            self._on_error(
                str(message.get("event")), error_from_payload(message["error"]), Path(message["path"])
            )
        elif "summary" in message and self._on_event is not None:
            self._on_event(str(message.get("event")), str(message["summary"]), Path(message["path"]))

    @property
    def is_running(self) -> bool:
        return self._thread.is_alive() or (self._local is not None and self._local.is_running)

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self._local.wait_idle(timeout) if self._local is not None else True

    def flush(self, timeout: float | None = None) -> bool:
        return self._local.flush(timeout) if self._local is not None else True

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stopping.set()
        self._hang_up()
        self._thread.join(timeout)
        if self._local is not None:
            self._local.stop(timeout)

    def __enter__(self) -> OwnerWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
