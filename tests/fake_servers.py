"""Local fake embedding APIs: one threaded HTTP server on 127.0.0.1 that speaks every vendor's shape.

Why: network providers are tested against real HTTP (real sockets, real SDK for OpenAI, the real
stdlib client for the rest) without an API key or the internet. The server answers

- ``POST .../embeddings``                          OpenAI, Voyage, Jina, Mistral (``data[i].embedding``)
- ``POST .../api/embed``                           Ollama (``embeddings``)
- ``POST .../models/<model>:batchEmbedContents``   Gemini (``embeddings[i].values``)

with deterministic vectors (a hash of the text), answers GETs listed in ``get_routes``, records
every request (path, headers, JSON body), and can be told to fail:
``server.fail(status, body, times)``, ``server.garbage()``, ``server.short()`` (one vector too
few), ``server.delay(seconds)``. Use the ``fake_api`` fixture.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DEFAULT_DIMENSION = 8


class CountingServer(ThreadingHTTPServer):
    """A threaded HTTP server that counts the TCP connections it accepts and has closed, and can
    drop each connection after one answer, as a server closing idle keep-alive connections does
    (without a ``Connection: close`` header: the client finds out when it reuses the connection)."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.opened = 0
        self.closed = 0
        self.drop_after_answer = False
        self.count_lock = threading.Lock()


#: root URL -> its running server (see :func:`server_at`).
_SERVERS: dict[str, CountingServer] = {}


def server_at(url: str) -> CountingServer:
    """The running fake server whose root URL ``url`` starts with (its connection counts)."""
    for root, server in _SERVERS.items():
        if url.startswith(root):
            return server
    raise KeyError(url)


class JsonHandler(BaseHTTPRequestHandler):
    """Base of the fake servers' handlers: quiet, keep-alive, JSON answers with a length."""

    protocol_version = "HTTP/1.1"
    #: The headers and the body go out in two writes; without TCP_NODELAY the second waits for the
    #: client's delayed ACK of the first (~40 ms) on a kept-alive connection, as no real server does.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        server = self.server
        if isinstance(server, CountingServer):
            with server.count_lock:
                server.opened += 1

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            server = self.server
            if isinstance(server, CountingServer):
                with server.count_lock:
                    server.closed += 1

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            self.close_connection = True
        if isinstance(self.server, CountingServer) and self.server.drop_after_answer:
            self.close_connection = True


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], name: str) -> Iterator[str]:
    """Run ``handler`` on 127.0.0.1 (a free port) in a thread; yields the server's root URL."""
    server = CountingServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name=name, daemon=True
    )
    thread.start()
    root = f"http://127.0.0.1:{server.server_address[1]}"
    _SERVERS[root] = server
    try:
        yield root
    finally:
        _SERVERS.pop(root, None)
        server.shutdown()
        server.server_close()
        thread.join(5)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class _Failure:
    status: int
    body: bytes
    times: int  # -1: until cleared
    content_type: str = "application/json"
    after: int = 0  # requests answered normally before the failures start


def fake_vector(text: str, dimension: int) -> list[float]:
    """A deterministic unit vector for ``text`` (what the fake server returns)."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [digest[i % len(digest)] - 127.5 for i in range(dimension)]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [v / norm for v in raw]


@dataclass
class FakeEmbeddingServer:
    """The server's state; tests read ``requests`` and steer failures."""

    #: model -> dimension; others get :data:`DEFAULT_DIMENSION`.
    dimensions: dict[str, int] = field(default_factory=dict)
    #: GET path -> (status, JSON answer), for the odd non-embedding endpoint (the hub's model API).
    get_routes: dict[str, tuple[int, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""
    _failure: _Failure | None = None
    _short: bool = False
    _nan: bool = False
    _delay: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: (text, event): a request whose body holds the text waits for the event (:meth:`hold`).
    _hold: tuple[str, threading.Event] | None = None
    #: Requests held so far (:meth:`hold`).
    held: int = 0

    def fail(self, status: int, body: str = '{"error": "nope"}', times: int = -1, *, after: int = 0) -> None:
        """Answer ``status`` ``times`` times (-1: until cleared), after ``after`` normal answers."""
        with self._lock:
            self._failure = _Failure(status, body.encode(), times, after=after)

    def garbage(self) -> None:
        """Answer 200 with a body that is not JSON."""
        with self._lock:
            self._failure = _Failure(200, b"<html>definitely not json", -1, "text/html")

    def short(self) -> None:
        """Answer with one vector fewer than asked for."""
        self._short = True

    def nan(self) -> None:
        """Answer vectors whose first value is NaN (json.dumps writes ``NaN``; clients' json reads it)."""
        self._nan = True

    def delay(self, seconds: float) -> None:
        """Wait ``seconds`` before answering (to make clients time out)."""
        self._delay = seconds

    def hold(self, text: str) -> threading.Event:
        """Keep every request whose body holds ``text`` waiting (at most a minute) until the
        returned event is set; :attr:`held` counts them as they arrive."""
        release = threading.Event()
        self._hold = (text, release)
        return release

    def clear(self) -> None:
        with self._lock:
            self._failure = None
            self._short = False
            self._nan = False
            self._delay = 0.0

    def dimension_for(self, model: str, requested: int | None) -> int:
        return requested or self.dimensions.get(model, DEFAULT_DIMENSION)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def _take_failure(self) -> _Failure | None:
        with self._lock:
            failure = self._failure
            if failure is None:
                return None
            if failure.after > 0:
                failure.after -= 1
                return None
            if failure.times > 0:
                failure.times -= 1
                if failure.times == 0:
                    self._failure = None
            return failure

    # --- the vendor shapes -----------------------------------------------------------------

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/api/embed"):
            texts = self._trim(body["input"])
            dim = self.dimension_for(body["model"], None)
            return {"model": body["model"], "embeddings": [self._vector(t, dim) for t in texts]}
        if path.endswith(":batchEmbedContents"):
            model = path.rsplit("/", 1)[-1].split(":")[0]
            requests = self._trim(body["requests"])
            out = []
            for item in requests:
                text = item["content"]["parts"][0]["text"]
                dim = self.dimension_for(model, item.get("outputDimensionality"))
                out.append({"values": self._vector(text, dim)})
            return {"embeddings": out}
        if path.endswith("/embeddings"):
            texts = body["input"]
            if isinstance(texts, str):
                texts = [texts]
            texts = self._trim(texts)
            dim = self.dimension_for(body["model"], body.get("dimensions") or body.get("output_dimension"))
            data = [
                {"object": "embedding", "index": i, "embedding": self._vector(t, dim)}
                for i, t in enumerate(texts)
            ]
            data.reverse()  # clients must order by "index", not by position
            return {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            }
        raise KeyError(path)

    def _vector(self, text: str, dimension: int) -> list[float]:
        vector = fake_vector(text, dimension)
        return [math.nan, *vector[1:]] if self._nan else vector

    def _trim(self, items: list[Any]) -> list[Any]:
        return items[:-1] if self._short else items


def _handler(state: FakeEmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            state.requests.append(Recorded("GET", self.path, headers, None))
            status, answer = state.get_routes.get(self.path, (404, {"error": "not found"}))
            self._send(status, json.dumps(answer).encode())

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = {k.lower(): v for k, v in self.headers.items()}
            state.requests.append(Recorded("POST", self.path, headers, body))
            hold = state._hold
            if hold is not None and hold[0] in raw.decode("utf-8", "replace"):
                with state._lock:
                    state.held += 1
                hold[1].wait(60)
            if state._delay:
                time.sleep(state._delay)
            failure = state._take_failure()
            if failure is not None:
                self._send(failure.status, failure.body, failure.content_type)
                return
            path = self.path.split("?", 1)[0]
            try:
                if not isinstance(body, dict):
                    raise TypeError("the body is not a JSON object")
                answer = state.answer(path, body)
            except (KeyError, TypeError, AttributeError) as exc:
                self._send(
                    404 if isinstance(exc, KeyError) else 400, json.dumps({"error": repr(exc)}).encode()
                )
                return
            self._send(200, json.dumps(answer).encode())

    return Handler


@pytest.fixture
def fake_api() -> Iterator[FakeEmbeddingServer]:
    """A running fake embeddings server on 127.0.0.1 (random free port); ``.url`` is its root."""
    state = FakeEmbeddingServer()
    with serving(_handler(state), "fake-embedding-api") as url:
        state.url = url
        yield state
