"""How busy a memory service is: its open connections, the requests using its store, and since
when it has been idle.

Why one object: the idle exit, the idle time ``ping`` reports (``memsearch service status``, the
cap's least-recently-used choice) and ``stop``'s wait for the work in flight all read the same
counters, and the idle exit must decide and remove the socket under the same lock that counts
connections, so that no client slips in between. ``ping`` and ``stop`` are not use: a status check
every minute must not keep an idle service alive. Standard library only.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator


class Activity:
    """The counters, under one lock (:attr:`lock`, for a caller that must act while none changes)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connections = 0  # open now (a watch session is one for its whole life)
        self._busy = 0  # requests (and watch sessions) using the store now
        self._last = time.monotonic()  # when the last of them finished (the start, before any)
        self._used = False  # whether any has finished yet

    @contextlib.contextmanager
    def connection(self) -> Iterator[None]:
        with self.lock:
            self.connections += 1
        try:
            yield
        finally:
            with self.lock:
                self.connections -= 1

    @contextlib.contextmanager
    def using(self) -> Iterator[None]:
        """A request (or watch session) using the store: the idle time starts when the last ends."""
        with self.lock:
            self._busy += 1
        try:
            yield
        finally:
            with self.lock:
                self._busy -= 1
                self._last = time.monotonic()
                self._used = True

    def idle_seconds(self) -> float:
        """Seconds since the last request finished (since the start if none has): 0 while one runs."""
        with self.lock:
            return 0.0 if self._busy else time.monotonic() - self._last

    def last_request(self) -> float | None:
        """When the last request finished (epoch seconds), or None when none has."""
        idle = self.idle_seconds()
        return time.time() - idle if self._used else None

    def expired(self, limit: float, then: Callable[[], None]) -> bool:
        """True once nothing has used the store for ``limit`` seconds and no connection is open;
        ``then`` runs first, under the lock (the service removes its socket there)."""
        with self.lock:
            if self.connections or self._busy or time.monotonic() - self._last < limit:
                return False
            then()
        return True
