"""Talking to remote services: one JSON-over-HTTP helper, the SDK error translation, one wording.

This module owns what every remote caller shares, whatever it asks for (embeddings, an LLM
completion, a rerank): :class:`JsonClient` (a JSON POST on a kept-alive connection, with a short
connect timeout, one deadline per call, at most one quick retry of a transient failure, every
failure turned into a typed error); :func:`openai_client`, :class:`OpenAIClients` (one SDK client
per event loop, kept across calls) and :func:`sdk_errors` (the same for the openai SDK);
:class:`ApiErrors` (the wording of every failure) and :func:`resolve_api_key`. The domain modules
(``embeddings``, ``llm``, ``jev_reranker``) only bring their :class:`ServiceWording`: the noun, the
error classes and the hints that point at their own settings.

Why the standard library: each of those APIs is one JSON POST, so an SDK per vendor would add
install weight, import time and five different error types for nothing. ``http.client`` is used
directly (not ``urllib``, which closes the connection after every request) with ``urllib``'s
reading of the proxy variables; connecting has a short limit of its own (an endpoint that is not
there fails in seconds), and the whole call, reading included, is held to one deadline (a local
server may take a while to embed a large batch, but not forever).
The transport modules (``http.client`` brings ``email``) and the openai SDK are imported
only by the functions that use them, so importing this module stays cheap for the local providers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import AsyncGenerator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memsearch.errors import MemSearchError

if TYPE_CHECKING:
    import http.client

    import openai

#: How long to wait for a TCP (and TLS) connection: an endpoint that is not there fails fast.
CONNECT_TIMEOUT = 5.0
#: Pause before the single retry of a transient failure (HTTP 429/5xx, reset connection).
RETRY_DELAY = 0.3
#: HTTP 5xx, after the one retry ``JsonClient.post_json`` (and the openai SDK) makes.
SERVER_FAILED_HINT = "The server failed (also on one retry); try again later or check its logs."
#: Sent to OpenAI-compatible servers that take no key (the SDK refuses to run without one).
PLACEHOLDER_KEY = "memsearch-no-key"


# --- wording ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceWording:
    """What kind of service failed, and which settings the hints point at.

    One :class:`ApiErrors` class words every remote service (embeddings, the remote reranker, LLM
    endpoints); what differs between them is collected here: the noun in the messages (``kind``),
    the exception classes raised, and the hints. Templates may use ``{label}`` and ``{key_env}``.
    """

    #: "embedding", "reranking", "LLM": as in "the OpenAI embedding endpoint".
    kind: str
    error: type[MemSearchError]
    missing_key_error: type[MemSearchError]
    key_hint: str
    unreachable_hint: str
    timeout_hint: str
    bad_response_hint: str
    #: HTTP status -> hint, after the service's own ``status_hints``.
    status_hints: Mapping[int, str]


@dataclass(frozen=True)
class ApiErrors:
    """How one service's failures are worded: who failed, and which env var holds its key.

    ``wording`` says what kind of service it is (keyword-only: each domain module has its own,
    e.g. ``embeddings.base.EMBEDDING``), so the same methods word an embedding API, a reranker or
    an LLM endpoint without a copy of this class.
    """

    label: str
    key_envs: tuple[str, ...] = ()
    #: HTTP status -> hint, consulted before the generic hints.
    status_hints: tuple[tuple[int, str], ...] = ()
    wording: ServiceWording = field(kw_only=True)

    @property
    def kind(self) -> str:
        return self.wording.kind

    @property
    def key_env(self) -> str:
        return self.key_envs[0] if self.key_envs else "the provider's API key variable"

    def _fill(self, template: str) -> str:
        return template.format(label=self.label, key_env=self.key_env)

    def key_hint(self) -> str:
        return self._fill(self.wording.key_hint)

    def missing_key(self) -> MemSearchError:
        return self.wording.missing_key_error(
            f"No API key for the {self.label} {self.kind} provider.", self.key_hint()
        )

    def unreachable(self, url: str, reason: object) -> MemSearchError:
        return self.wording.error(
            f"Could not connect to the {self.label} {self.kind} endpoint at {url}: {reason}",
            hint=self._fill(self.wording.unreachable_hint),
        )

    def timed_out(self, url: str, seconds: float) -> MemSearchError:
        return self.wording.error(
            f"The {self.label} {self.kind} endpoint at {url} did not answer within {seconds:g} s.",
            hint=self._fill(self.wording.timeout_hint),
        )

    def http_status(self, url: str, status: int, body: str) -> MemSearchError:
        if status in (401, 403):
            return self.wording.error(
                f"The {self.label} API rejected the API key (HTTP {status}).", self.key_hint()
            )
        detail = " ".join(body.split())[:300]
        return self.wording.error(
            f"The {self.label} {self.kind} API at {url} returned HTTP {status}"
            + (f": {detail}" if detail else "."),
            hint=dict(self.status_hints).get(status)
            or self._fill(self.wording.status_hints.get(status, "See the message for the server's reason.")),
        )

    def bad_response(self, url: str, detail: str) -> MemSearchError:
        return self.wording.error(
            f"The {self.label} {self.kind} endpoint at {url} sent an unexpected response: {detail}",
            hint=self._fill(self.wording.bad_response_hint),
        )


def resolve_api_key(explicit: str | None, errors: ApiErrors, *, required: bool = True) -> str | None:
    """The explicit key, else the first set env var of ``errors.key_envs``; raise if required."""
    if explicit:
        return explicit
    for name in errors.key_envs:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    if required:
        raise errors.missing_key()
    return None


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


# --- the openai SDK -----------------------------------------------------------------------------


def openai_client(api_key: str | None, base_url: str, timeout: float) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` client as every caller here wants it: at most one retry (the SDK's default
    is two, with back-off, so a dead endpoint would stall), ``timeout`` per attempt and
    :data:`CONNECT_TIMEOUT` to connect, and a placeholder key for servers that take none."""
    import openai

    return openai.AsyncOpenAI(
        api_key=api_key or PLACEHOLDER_KEY,
        base_url=base_url,
        max_retries=1,
        timeout=openai.Timeout(timeout, connect=CONNECT_TIMEOUT),
    )


class OpenAIClients:
    """One ``AsyncOpenAI`` client per event loop, kept across calls (its connections with it).

    An asyncio client belongs to the loop it was first used on, so a call from another loop gets a
    client of its own, and a loop that is gone never has its dead client reused. Each client is
    closed with its loop: a small async generator started on that loop is finalised by the loop's
    shutdown (``asyncio.run``, ``asyncio.Runner`` and the watcher's loop all shut their async
    generators down), and closes the client there, on the right loop. :meth:`close` closes them
    all earlier.
    """

    def __init__(self, api_key: str | None, base_url: str, timeout: float) -> None:
        self._args = (api_key, base_url, timeout)
        self._clients: dict[asyncio.AbstractEventLoop, _LoopClient] = {}
        self._lock = threading.Lock()

    async def get(self) -> openai.AsyncOpenAI:
        """The client of the running loop (made on first use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for other in [other for other in self._clients if other.is_closed()]:
                self._clients.pop(other).abandon()
            entry = self._clients.get(loop)
        if entry is None:
            entry = _LoopClient(openai_client(*self._args))
            await entry.bind()
            with self._lock:
                self._clients[loop] = entry
        return entry.client

    def close(self) -> None:
        """Close every client, each on its own loop (waiting for it unless that loop is the caller's:
        from a coroutine, prefer :meth:`aclose`)."""
        for loop, entry in self._take_all():
            entry.close_on(loop)

    async def aclose(self) -> None:
        """Close every client; the running loop's now, before returning."""
        running = asyncio.get_running_loop()
        for loop, entry in self._take_all():
            if loop is running:
                await entry.aclose()
            else:
                entry.close_on(loop)

    def _take_all(self) -> list[tuple[asyncio.AbstractEventLoop, _LoopClient]]:
        with self._lock:
            entries = list(self._clients.items())
            self._clients.clear()
        return entries


class _LoopClient:
    """A client and the async generator that closes it when its loop shuts down."""

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self.client = client
        self._closed = False
        self._closer = self._close_at_shutdown()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self._close_client()

    async def _close_client(self) -> None:
        if not self._closed:  # once, whoever comes first: close() or the loop's shutdown
            self._closed = True
            await self.client.close()

    async def bind(self) -> None:
        """Start the closer on the running loop, which registers it for that loop's shutdown."""
        await self._closer.__anext__()

    async def aclose(self) -> None:
        await self._close_client()
        self.abandon()

    def abandon(self) -> None:
        """Finish the closer without running it on a loop: the client is closed, or its loop closed
        without shutting its generators down (the client's sockets went with that loop)."""
        self._closed = True
        with contextlib.suppress(StopIteration, RuntimeError):
            self._closer.aclose().send(None)

    def close_on(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop.is_closed():
            self.abandon()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # a sync close() from a coroutine on that loop: close soon, there
            task = loop.create_task(self.aclose())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif loop.is_running():  # another thread's loop (the memory service's)
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.aclose(), loop).result(CONNECT_TIMEOUT)
        else:
            loop.run_until_complete(self.aclose())


@contextlib.contextmanager
def sdk_errors(errors: ApiErrors, url: str, timeout: float) -> Iterator[None]:
    """Turn the openai SDK's exceptions (embeddings, chat completions) into memsearch's one-line
    errors for ``url``."""
    import openai

    try:
        yield
    except (openai.APITimeoutError, asyncio.TimeoutError):
        raise errors.timed_out(url, timeout) from None
    except openai.APIConnectionError as exc:
        raise errors.unreachable(url, _cause_text(exc)) from None
    except openai.APIStatusError as exc:
        raise errors.http_status(url, exc.status_code, _body_text(exc)) from None
    except (openai.OpenAIError, ValueError) as exc:
        raise errors.bad_response(url, str(exc) or type(exc).__name__) from None


def _cause_text(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        if isinstance(cause, ConnectionRefusedError):
            break
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    return str(cause or exc) or type(exc).__name__


def _body_text(exc: openai.APIStatusError) -> str:
    try:
        return exc.response.text
    except Exception:  # the response body may not be readable any more
        return str(exc.message)
