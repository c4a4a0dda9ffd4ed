"""A tiny JSON-over-HTTP client on the standard library, and the base class of the REST providers.

This module owns :func:`post_json` (one POST with a short connect timeout, at most one quick retry
of a transient failure, and every failure turned into a typed error) and :class:`RestEmbedder`
(base URL and API-key handling for ollama, google, voyage, jina and mistral).

Why the standard library: each of those APIs is one JSON POST, so an SDK per vendor would add
install weight, import time and five different error types for nothing. ``urllib`` honours the
usual proxy variables; the connection classes below only split the timeout into a short connect
phase (an endpoint that is not there fails in seconds) and a longer read phase (a local server may
take a while to embed a large batch), and ``post_json`` holds the whole call to one deadline.
The helper is not embedding-specific: the remote reranker (``jev_reranker``) and the LLM backends
use it with their own :class:`~memsearch.embeddings.base.ApiErrors` wording.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, ClassVar

from memsearch.embeddings.base import (
    CONNECT_TIMEOUT,
    RETRY_DELAY,
    ApiErrors,
    BatchingEmbedder,
    resolve_api_key,
)

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


def _opener() -> urllib.request.OpenerDirector:
    # Built per request (cheap) so proxy variables are read when the request is made.
    return urllib.request.build_opener(_HTTPHandler, _HTTPSHandler)


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


class RestEmbedder(BatchingEmbedder):
    """A provider whose API is one JSON POST per batch.

    Subclasses name the endpoint (:meth:`_url`), the request (:meth:`_body`) and where the vectors
    are in the answer (:meth:`_vectors`; the default reads the OpenAI-style ``data[i].embedding``).
    ``base_url`` is the vendor's public API root unless the caller gives another one (a proxy, a
    self-hosted gateway, or a fake server in tests).
    """

    default_base_url: ClassVar[str] = ""
    #: Whether the API refuses requests without a key (checked at construction, not first use).
    key_required: ClassVar[bool] = True
    #: Total deadline per request, seconds (local servers may need long for a big batch); the
    #: ``timeout`` argument (``embedding.timeout``) overrides it for one instance.
    timeout: float = 60.0

    def __init__(
        self,
        *,
        model: str | None = None,
        batch_size: int = 0,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 0,
    ) -> None:
        super().__init__(model=model, batch_size=batch_size)
        if timeout and timeout > 0:
            self.timeout = timeout
        self.base_url = self._resolve_base_url(base_url).rstrip("/")
        self.api_key = resolve_api_key(api_key, self.errors, required=self._requires_key())

    def _requires_key(self) -> bool:
        return self.key_required

    def _resolve_base_url(self, base_url: str | None) -> str:
        return base_url or self.default_base_url

    def _url(self) -> str:
        return f"{self.base_url}/embeddings"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        return {"model": self._model, "input": texts}

    def _vectors(self, payload: Any) -> list[list[float]]:
        items = sorted(payload["data"], key=lambda item: item.get("index", 0))
        return [list(map(float, item["embedding"])) for item in items]

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        url = self._url()
        payload = await asyncio.to_thread(
            post_json,
            url,
            self._body(texts, query=query),
            headers=self._headers(),
            errors=self.errors,
            timeout=self.timeout,
        )
        try:
            return self._vectors(payload)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            raise self.errors.bad_response(url, f"no embeddings where expected ({exc!r})") from None
