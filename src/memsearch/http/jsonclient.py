"""The standard-library transport: :class:`JsonClient`, a JSON POST on a kept-alive
``http.client`` connection, ``urllib``'s reading of the proxy variables, one deadline per call,
at most one quick retry. ``http.client`` and ``urllib.request`` are imported only when a request
is made."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsearch.http.wording import CONNECT_TIMEOUT, RETRY_DELAY, ApiErrors

if TYPE_CHECKING:
    import http.client


# --- the stdlib transport --------------------------------------------------------------------


#: Statuses worth one more try: rate limiting and passing server trouble.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Bytes per read of an answer (the deadline is checked between reads).
_READ_CHUNK = 64 * 1024


class _ConnectFailed(Exception):
    """Opening a new connection failed; ``reason`` is the ``OSError`` (worded as "could not connect")."""

    def __init__(self, reason: OSError) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Route:
    """Where a request goes: the server, the path to ask for, and the proxy in between (if any)."""

    scheme: str
    host: str
    port: int
    path: str
    #: ``host:port`` of the proxy, and its ``Proxy-Authorization`` value ("" for none).
    proxy: str = ""
    proxy_auth: str = ""

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.scheme, self.host, self.port, self.proxy)


def _route(url: str) -> _Route:
    """Split ``url`` and find its proxy the way ``urllib`` does (``*_proxy`` and ``no_proxy``
    variables, read at each request)."""
    import urllib.request
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise _ConnectFailed(OSError(f"not an http(s) URL: {url!r}"))
    host = parts.hostname
    port = parts.port or (443 if scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy_url = urllib.request.getproxies().get(scheme, "")
    if not proxy_url or urllib.request.proxy_bypass(f"{host}:{port}" if parts.port else host):
        return _Route(scheme, host, port, path)
    proxy = urlsplit(proxy_url if "://" in proxy_url else f"http://{proxy_url}")
    auth = ""
    if proxy.username is not None:
        import base64

        pair = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
        auth = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    proxy_port = proxy.port or (443 if proxy.scheme == "https" else 80)
    return _Route(scheme, host, port, path, f"{proxy.hostname}:{proxy_port}", auth)


class JsonClient:
    """A JSON-over-HTTP client that keeps its connections open between requests (HTTP keep-alive).

    One instance per remote service (an embedding provider, an LLM backend, the reranker), so a
    search pays for its TCP (and TLS) handshake once, not once per query. Connections are kept per
    server, one per concurrent request (threads may share the client); a connection the server
    closed while it sat idle is noticed on its next use and replaced at once, without counting as
    the request's retry. :meth:`close` closes them (so does garbage collection); after a ``fork``
    the child starts with no connections rather than sharing the parent's sockets.
    """

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, int, str], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def __enter__(self) -> JsonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every idle connection (one in use by a request in flight is kept for reuse when
        that request ends; the client stays usable and connects again when asked)."""
        with self._lock:
            idle = [conn for conns in self._idle.values() for conn in conns]
            self._idle.clear()
        for conn in idle:
            conn.close()

    def __del__(self) -> None:
        # A provider dropped without close(): its sockets close with it, quietly (as a file's do),
        # instead of each warning "unclosed socket" when collected on its own.
        with contextlib.suppress(Exception):
            self.close()

    def post_json(
        self,
        url: str,
        body: Any,
        *,
        headers: dict[str, str],
        errors: ApiErrors,
        timeout: float = 60.0,
        retries: int = 1,
    ) -> Any:
        """POST ``body`` as JSON to ``url`` and return the decoded JSON answer.

        ``timeout`` is a total deadline for the call, retry included: a server that accepts the
        connection and then never answers (or trickles its answer) fails after ``timeout``
        seconds, not after one read timeout per attempt. Connecting has its own short limit
        (:data:`CONNECT_TIMEOUT`). Connection refused and unknown hosts fail at once (retrying
        would not help); a reset connection, HTTP 429 or 5xx is retried once after a short pause
        if time is left; timeouts are not retried (that would double a stall). Every failure is
        the error class of ``errors``'s service (an :class:`~memsearch.errors.EmbeddingAPIError`
        for embeddings), worded by ``errors``; a rejected key names the env var that holds it.
        """
        import http.client

        data = json.dumps(body).encode("utf-8")
        request_headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": _user_agent(),
            **headers,
        }
        deadline = time.monotonic() + timeout
        for attempt in range(retries + 1):
            may_retry = attempt < retries and _time_for_retry(deadline)
            try:
                status, raw = self._exchange(_route(url), data, request_headers, deadline)
            except _ConnectFailed as exc:
                reason = exc.reason
                if isinstance(reason, TimeoutError):
                    raise errors.timed_out(url, min(CONNECT_TIMEOUT, timeout)) from None
                if isinstance(reason, ConnectionResetError) and may_retry:
                    time.sleep(RETRY_DELAY)
                    continue
                raise errors.unreachable(url, _reason_text(reason)) from None
            except TimeoutError:
                raise errors.timed_out(url, timeout) from None
            except (OSError, http.client.HTTPException) as exc:
                if may_retry and isinstance(exc, (ConnectionError, http.client.HTTPException)):
                    time.sleep(RETRY_DELAY)
                    continue
                raise errors.unreachable(url, _reason_text(exc)) from None
            if not 200 <= status < 300:
                if status in RETRY_STATUSES and may_retry:
                    time.sleep(RETRY_DELAY)
                    continue
                raise errors.http_status(url, status, raw.decode("utf-8", "replace")) from None
            try:
                return json.loads(raw)
            except ValueError:
                snippet = raw[:80].decode("utf-8", "replace")
                raise errors.bad_response(url, f"not JSON ({snippet!r})") from None
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    # --- connections -----------------------------------------------------------------------

    def _exchange(
        self, route: _Route, data: bytes, headers: dict[str, str], deadline: float
    ) -> tuple[int, bytes]:
        """One request and its whole answer, on an idle connection if there is one.

        A reused connection that turns out closed before any answer arrived (the server dropped it
        while idle) is replaced by a new one and the request sent again, once.
        """
        import http.client

        conn = self._checkout(route)
        try:
            if conn is None:
                conn = self._connect(route, deadline)
                response = self._send(conn, route, data, headers, deadline)
            else:
                try:
                    response = self._send(conn, route, data, headers, deadline)
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                    conn.close()
                    conn = self._connect(route, deadline)
                    response = self._send(conn, route, data, headers, deadline)
            raw = _read_all(conn, response, deadline)
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        if response.will_close:
            conn.close()
        else:
            self._checkin(route, conn)
        return response.status, raw

    def _checkout(self, route: _Route) -> http.client.HTTPConnection | None:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's connections are not ours to use
                for conn in (conn for conns in self._idle.values() for conn in conns):
                    conn.close()  # our copy of the descriptor only: the parent's stays open
                self._idle.clear()
                self._pid = os.getpid()
            idle = self._idle.get(route.key)
            return idle.pop() if idle else None

    def _checkin(self, route: _Route, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if self._pid == os.getpid():
                self._idle.setdefault(route.key, []).append(conn)
                return
        conn.close()

    @staticmethod
    def _connect(route: _Route, deadline: float) -> http.client.HTTPConnection:
        """A new connection to ``route``'s server (through its proxy), connected within
        :data:`CONNECT_TIMEOUT` (or what is left of the deadline, if less)."""
        import http.client

        conn: http.client.HTTPConnection
        try:
            limit = min(CONNECT_TIMEOUT, _remaining(deadline))
            if route.proxy:
                proxy_host, _, proxy_port = route.proxy.rpartition(":")
                if route.scheme == "https":  # a CONNECT tunnel through the proxy, then TLS
                    conn = http.client.HTTPSConnection(proxy_host, int(proxy_port), timeout=limit)
                    conn.set_tunnel(route.host, route.port, headers=_proxy_headers(route))
                else:
                    conn = http.client.HTTPConnection(proxy_host, int(proxy_port), timeout=limit)
            elif route.scheme == "https":
                conn = http.client.HTTPSConnection(route.host, route.port, timeout=limit)
            else:
                conn = http.client.HTTPConnection(route.host, route.port, timeout=limit)
            conn.connect()
        except OSError as exc:
            raise _ConnectFailed(exc) from None
        return conn

    @staticmethod
    def _send(
        conn: http.client.HTTPConnection,
        route: _Route,
        data: bytes,
        headers: dict[str, str],
        deadline: float,
    ) -> http.client.HTTPResponse:
        """Send the request and read the status line and headers by ``deadline``."""
        if conn.sock is not None:
            conn.sock.settimeout(_remaining(deadline))
        target = route.path
        extra: dict[str, str] = {}
        if route.proxy and route.scheme == "http":  # a plain proxy takes the whole URL
            default = route.port == 80
            target = f"http://{route.host}{'' if default else f':{route.port}'}{route.path}"
            extra = _proxy_headers(route)
        conn.request("POST", target, body=data, headers={**headers, **extra})
        return conn.getresponse()


def _proxy_headers(route: _Route) -> dict[str, str]:
    return {"Proxy-Authorization": route.proxy_auth} if route.proxy_auth else {}


def _user_agent() -> str:
    from memsearch.version import package_version

    return f"memsearch/{package_version()}"


def _remaining(deadline: float) -> float:
    """Seconds left before ``deadline``; raises ``TimeoutError`` when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _time_for_retry(deadline: float) -> bool:
    return deadline - time.monotonic() > RETRY_DELAY


def _read_all(conn: http.client.HTTPConnection, response: http.client.HTTPResponse, deadline: float) -> bytes:
    """The whole answer, read by ``deadline``: the socket timeout is what is left of it before
    each read, so neither a silent server nor one sending a byte at a time can stretch the call."""
    chunks: list[bytes] = []
    while True:
        if conn.sock is not None:
            conn.sock.settimeout(_remaining(deadline))
        chunk = response.read1(_READ_CHUNK)
        if not chunk:
            response.close()  # done with the answer; the connection stays open for the next
            return b"".join(chunks)
        chunks.append(chunk)


def _reason_text(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__
