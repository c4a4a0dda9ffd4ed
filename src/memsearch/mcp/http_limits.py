"""The bounds of ``memsearch mcp --http-port``: how many connections it holds, and how long a client
may take to send its request.

Why: uvicorn (the SDK's HTTP server) accepts every connection and waits for its request as long as
the client likes: it bounds only the idle time between two requests, not the time to send one, and
not the number of connections. Each connection holds a file descriptor, and the bearer token is
checked only once a request's head is in, so anyone on the machine could open connections that
send half a request and wait. Under the common limit of 1,024 open files, 1,100 of them took every
descriptor: the token holder timed out, ``accept()`` failed and was retried every second with a
traceback each time, and a server whose stderr was a pipe nobody read blocked writing that log and
served nobody again, even after the connections were closed.

So, per connection (:class:`BoundedProtocol`, uvicorn's h11 protocol with deadlines):

- the request's head must be in within :data:`HEAD_SECONDS` of connecting (or of the previous
  answer), and its body within :data:`BODY_SECONDS` of its head; a client that is slower is cut off;
- between requests a connection may stay idle :data:`IDLE_SECONDS` (uvicorn's keep-alive);
- at most :func:`connection_cap` connections are held, half the open-files limit at most: a new one
  beyond that closes the connection that has waited longest for its client (one that never got an
  answer first), and when every one is being answered the newcomer gets 503. A token holder's
  request is in within a millisecond, so a flood cannot starve it, and the server serves again as
  soon as the flood stops.

asyncio accepts up to uvicorn's ``backlog`` connections per turn of the event loop before any of
them is seen here, so that is small (:data:`ACCEPT_BATCH`) and counted in the cap's margin, while
the kernel's queue of connections not yet accepted (which hold no descriptor of ours) is long
(:data:`LISTEN_QUEUE`), so a token holder's connection waits there behind a flood for milliseconds
instead of being dropped and retried a second later; an ``accept()`` that fails anyway is logged
once a minute, not once per try (:func:`serve`).
"""

from __future__ import annotations

import asyncio
import errno
import math
import resource
import socket
import time
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["BoundedProtocol", "config", "connection_cap", "serve"]

#: Seconds from connecting (or from the previous answer) to a request's complete head.
HEAD_SECONDS = 10.0
#: Seconds from a request's head to its complete body (an MCP message is a few KiB of JSON).
BODY_SECONDS = 30.0
#: Seconds a connection may stay idle between two requests (uvicorn's keep-alive timeout).
IDLE_SECONDS = 5
#: Connections accepted per turn of the event loop (uvicorn's ``backlog``, also the listen queue).
ACCEPT_BATCH = 16
#: Connections the kernel queues until they are accepted.
LISTEN_QUEUE = 1024
#: The most connections held at once, whatever the open-files limit (a host uses two or three).
MAX_CONNECTIONS = 256
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 37\r\n\r\nmemsearch mcp: too many connections.\n"
)


def connection_cap(open_files: int | None = None) -> int:
    """The connections to hold at most under ``open_files`` descriptors (default: this process's
    soft ``RLIMIT_NOFILE``): half of them, less the connections accepted before they are counted
    (three turns of :data:`ACCEPT_BATCH`), at most :data:`MAX_CONNECTIONS`, at least 8. The other
    half is the store's (Milvus Lite's segment files), the model's, the owner's socket and Python's."""
    if open_files is None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        open_files = MAX_CONNECTIONS * 4 if soft == resource.RLIM_INFINITY else soft
    return max(8, min(MAX_CONNECTIONS, open_files // 2 - 4 * ACCEPT_BATCH))


class BoundedProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for whatever the client owes (a request's head, then
    its body) and the connection cap (see the module docstring). ``cap`` is set by
    :func:`bounded_protocol`."""

    cap = MAX_CONNECTIONS
    #: "head" / "body": what the client owes now, with a deadline; None: the server's turn.
    _waiting: str | None = None
    _since = 0.0
    _answered = False
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_client()
        if len(self.connections) > self.cap:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._await_client()

    def on_response_complete(self) -> None:
        self._answered = True
        super().on_response_complete()
        self._await_client()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clock()
        super().connection_lost(exc)

    def _await_client(self) -> None:
        """Start (or keep) the clock of what the client owes now: a head when h11 waits for a
        request, a body after a head; none while the request is the server's to answer."""
        state = self.conn.their_state
        waiting = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if waiting == self._waiting or self.transport.is_closing():
            return
        self._stop_clock()
        self._waiting, self._since = waiting, time.monotonic()
        if waiting is not None:
            limit = HEAD_SECONDS if waiting == "head" else BODY_SECONDS
            self._deadline = self.loop.call_later(limit, self._cut_off)

    def _stop_clock(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _cut_off(self) -> None:
        self._deadline = None
        self._waiting = None
        if not self.transport.is_closing():
            self.transport.abort()

    def _idle(self) -> bool:
        """Waiting for its client, with no request being answered: may be closed to make room."""
        answering = self.cycle is not None and not self.cycle.response_complete
        return self._waiting is not None and not answering and not self.transport.is_closing()

    def _make_room(self) -> None:
        """Over the cap: close the connection that has waited longest for its client (one never
        answered first: half-sent requests), or refuse this one when none waits."""
        idle = [c for c in self.connections if c is not self and isinstance(c, BoundedProtocol) and c._idle()]
        if not idle:
            self._stop_clock()
            self.transport.write(_BUSY)
            self.transport.close()
            return
        victim = min(idle, key=lambda c: (c._answered, c._since))
        victim._cut_off()


def config(app: Any, cap: int | None = None) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` with these bounds (``cap``: :func:`connection_cap`)."""
    protocol = type("BoundedProtocol", (BoundedProtocol,), {"cap": connection_cap() if cap is None else cap})
    return uvicorn.Config(
        app, log_level="warning", http=protocol, backlog=ACCEPT_BATCH, timeout_keep_alive=IDLE_SECONDS
    )


async def serve(settings: uvicorn.Config, listening: socket.socket) -> None:
    """Serve on ``listening`` (bound, not yet listening) until uvicorn is told to stop; asyncio
    listens with the accept batch as its queue, and the queue is lengthened once it does."""
    _quiet_accept_failures(asyncio.get_running_loop())
    server = uvicorn.Server(settings)
    serving = asyncio.ensure_future(server.serve(sockets=[listening]))
    while not (server.started or serving.done()):
        await asyncio.sleep(0.05)
    if server.started:
        listening.listen(LISTEN_QUEUE)
    await serving


def _quiet_accept_failures(loop: asyncio.AbstractEventLoop, every: float = 60.0) -> None:
    """Log an ``accept()`` that failed for want of descriptors at most once per ``every`` seconds
    (asyncio logs a traceback per retry, every second, for as long as it lasts); every other
    exception goes to the loop's handler as before."""
    last = -math.inf

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        nonlocal last
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            now = time.monotonic()
            if now - last < every:
                return
            last = now
            context = {"message": f"memsearch mcp: cannot accept connections: {exc.strerror}"}
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
