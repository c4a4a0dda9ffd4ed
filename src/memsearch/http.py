"""Talking to remote services: one JSON-over-HTTP helper, the SDK error translation, one wording.

This module owns what every remote caller shares, whatever it asks for (embeddings, an LLM
completion, a rerank): :func:`post_json` (one POST with a short connect timeout, at most one quick
retry of a transient failure, every failure turned into a typed error), :func:`sdk_errors` and
:func:`openai_client` (the same for the openai SDK), :class:`ApiErrors` (the wording of every
failure) and :func:`resolve_api_key`. The domain modules (``embeddings``, ``llm``,
``jev_reranker``) only bring their :class:`ServiceWording`: the noun, the error classes and the
hints that point at their own settings.

Why the standard library: each of those APIs is one JSON POST, so an SDK per vendor would add
install weight, import time and five different error types for nothing. ``urllib`` honours the
usual proxy variables; the connection classes below only split the timeout into a short connect
phase (an endpoint that is not there fails in seconds) and a longer read phase (a local server may
take a while to embed a large batch), and ``post_json`` holds the whole call to one deadline.
The transport modules (``http.client`` brings ``email``) and the openai SDK are imported
only by the functions that use them, so importing this module stays cheap for the local providers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memsearch.errors import MemSearchError

if TYPE_CHECKING:
    import http.client
    import urllib.error
    import urllib.request

    import openai

#: How long to wait for a TCP (and TLS) connection: an endpoint that is not there fails fast.
CONNECT_TIMEOUT = 5.0
#: Pause before the single retry of a transient failure (HTTP 429/5xx, reset connection).
RETRY_DELAY = 0.3
#: HTTP 5xx, after the one retry ``post_json`` (and the openai SDK) makes.
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


#: The socket of the request this thread is making, so ``post_json`` can shrink its timeout to
#: what is left of the request's total deadline before each read.
_current = threading.local()


def _connect_briefly(conn: http.client.HTTPConnection, connect: Callable[[], None]) -> None:
    """Connect with :data:`CONNECT_TIMEOUT`, then give the socket the connection's read timeout."""
    read_timeout = conn.timeout
    conn.timeout = min(CONNECT_TIMEOUT, read_timeout) if read_timeout else CONNECT_TIMEOUT
    try:
        connect()
    finally:
        conn.timeout = read_timeout
    if conn.sock is not None:
        conn.sock.settimeout(read_timeout)
    _current.sock = conn.sock


@functools.cache
def _handlers() -> tuple[type[urllib.request.BaseHandler], ...]:
    """urllib handlers whose connections connect briefly (built on first use: importing
    ``http.client`` loads ``email``, which the local providers never need)."""
    import http.client
    import urllib.request

    class _HTTPConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            _connect_briefly(self, super().connect)

    class _HTTPSConnection(http.client.HTTPSConnection):
        def connect(self) -> None:
            _connect_briefly(self, super().connect)

    class _HTTPHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(_HTTPConnection, req)

    class _HTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(_HTTPSConnection, req, context=getattr(self, "_context", None))

    return _HTTPHandler, _HTTPSHandler


def _opener() -> urllib.request.OpenerDirector:
    # Built per request (cheap) so proxy variables are read when the request is made.
    import urllib.request

    return urllib.request.build_opener(*_handlers())


def _user_agent() -> str:
    from memsearch.version import package_version

    return f"memsearch/{package_version()}"


def post_json(
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
    connection and then never answers (or trickles its answer) fails after ``timeout`` seconds, not
    after one read timeout per attempt. Connection refused and unknown hosts fail at once (retrying
    would not help); a reset connection, HTTP 429 or 5xx is retried once after a short pause if time
    is left; timeouts are not retried (that would double a stall). Every failure is the error class
    of ``errors``'s service (an :class:`~memsearch.errors.EmbeddingAPIError` for embeddings), worded
    by ``errors``; a rejected key names the env var that holds it.
    """
    import http.client
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode("utf-8")
    request_headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": _user_agent(),
        **headers,
    }
    deadline = time.monotonic() + timeout
    for attempt in range(retries + 1):
        last_try = attempt == retries
        request = urllib.request.Request(url, data=data, headers=request_headers, method="POST")
        try:
            raw = _exchange(request, deadline)
        except urllib.error.HTTPError as exc:
            text = _read_error_body(exc)
            if exc.code in RETRY_STATUSES and not last_try and _time_for_retry(deadline):
                time.sleep(RETRY_DELAY)
                continue
            raise errors.http_status(url, exc.code, text) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise errors.timed_out(url, min(CONNECT_TIMEOUT, timeout)) from None
            if isinstance(reason, ConnectionResetError) and not last_try and _time_for_retry(deadline):
                time.sleep(RETRY_DELAY)
                continue
            raise errors.unreachable(url, _reason_text(reason)) from None
        except TimeoutError:
            raise errors.timed_out(url, timeout) from None
        except (ConnectionError, http.client.HTTPException) as exc:
            if not last_try and _time_for_retry(deadline):
                time.sleep(RETRY_DELAY)
                continue
            raise errors.unreachable(url, _reason_text(exc)) from None
        finally:
            _current.sock = None
        try:
            return json.loads(raw)
        except ValueError:
            snippet = raw[:80].decode("utf-8", "replace")
            raise errors.bad_response(url, f"not JSON ({snippet!r})") from None
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


def _remaining(deadline: float) -> float:
    """Seconds left before ``deadline``; raises ``TimeoutError`` when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _time_for_retry(deadline: float) -> bool:
    return deadline - time.monotonic() > RETRY_DELAY


def _exchange(request: urllib.request.Request, deadline: float) -> bytes:
    """Send ``request`` and read the whole answer by ``deadline``.

    The socket timeout is what is left of the deadline before each read, so neither a silent
    server nor one sending a byte at a time can stretch the call past it.
    """
    with _opener().open(request, timeout=_remaining(deadline)) as response:
        chunks: list[bytes] = []
        while True:
            sock = getattr(_current, "sock", None)
            if sock is not None:
                sock.settimeout(_remaining(deadline))
            chunk = response.read1(_READ_CHUNK) if hasattr(response, "read1") else response.read()
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


#: Bytes per read of an answer (the deadline is checked between reads).
_READ_CHUNK = 64 * 1024


def _read_error_body(exc: urllib.error.HTTPError) -> str:
    import http.client

    try:
        return exc.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return ""
    finally:
        exc.close()


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
