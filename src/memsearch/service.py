"""The local memory service: one warm process owns a store; every other process asks it.

Why: Milvus Lite lets one process open a database, so with the original a running ``watch`` blocks
every ``search``, and agent hooks that index or search in parallel fail. Every command also pays
0.7–2.5 s of start-up (pymilvus import, model load). ``memsearch serve`` (and ``memsearch watch``)
keeps the store, the embedding model and the watchers open in one process and answers requests
on a Unix socket under the memsearch home; the CLI sends its request there when a service is
running for that store, and opens the store directly otherwise. The same ``MemSearch`` methods
run either way, so results are identical.

This module has two halves. The client half (:func:`connect`, :class:`RemoteMemSearch`) imports
only the standard library, so a routed ``memsearch search`` never loads pymilvus or onnxruntime.
The server half (:class:`MemoryService`) imports the engine lazily.

Protocol: one JSON object per line. A request is ``{"op": ..., "settings": {...}, "args": {...}}``;
the reply is ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"type", "message",
"hint", "exit_code"}}``. Files under ``<home>/run/``: ``<key>.sock`` (the socket), ``<key>.lock``
(held with ``flock`` by the serving process for its lifetime: one service per store, and released
by the kernel even after ``kill -9``), ``<key>.json`` (pid, store, socket, start time).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch import errors
from memsearch.errors import MemSearchError

if TYPE_CHECKING:
    import asyncio

    from memsearch.core import MemSearch
    from memsearch.expand import Expansion
    from memsearch.indexer import IndexReport

logger = logging.getLogger("memsearch.service")

#: Set to 1 to make every command open the store directly, even when a service is running.
NO_SERVICE_ENV = "MEMSEARCH_NO_SERVICE"
#: A Unix socket path must fit in sun_path (108 bytes on Linux, 104 on macOS).
_MAX_SOCKET_PATH = 100
CONNECT_TIMEOUT = 2.0


class ServiceError(MemSearchError):
    """The service could not be started, reached, or answered with an error of unknown type."""


class ServiceRunningError(ServiceError):
    """``serve`` found another service already running for the same store."""


# --- where a store's service lives ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ServicePaths:
    """The run files of the service of one store."""

    store: str
    socket: Path
    lock: Path
    info: Path


def store_key(uri: str) -> str:
    """The identity of a store: its resolved URI (a Lite path is made absolute)."""
    from memsearch.uri import resolve_uri

    return resolve_uri(uri).uri


def service_paths(uri: str, home: Path | None = None) -> ServicePaths:
    """Run-file locations for the service of the store at ``uri``."""
    if home is None:
        from memsearch.config import memsearch_home

        home = memsearch_home()
    store = store_key(uri)
    key = hashlib.sha256(store.encode()).hexdigest()[:16]
    run = home / "run"
    sock = run / f"{key}.sock"
    if len(str(sock)) > _MAX_SOCKET_PATH:  # a deep HOME: fall back to a short private dir
        base = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/memsearch-{os.getuid()}")
        sock = base / f"{key}.sock"
    return ServicePaths(store, sock, run / f"{key}.lock", run / f"{key}.json")


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        path.chmod(0o700)


def read_info(paths: ServicePaths) -> dict[str, Any]:
    """The running service's info file (pid, store, socket), or {}."""
    try:
        data = json.loads(paths.info.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _lock_is_held(lock: Path) -> bool:
    """Whether some process holds the service lock (i.e. a service is alive)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we may just have taken
    return False


def clean_stale(paths: ServicePaths) -> bool:
    """Remove the socket and info files of a service that died without cleaning up.

    Returns True when something stale was removed. Never touches a live service's files.
    """
    if _lock_is_held(paths.lock):
        return False
    removed = False
    for path in (paths.socket, paths.info):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed = True
    return removed


# --- client ---------------------------------------------------------------------------------


class ServiceClient:
    """Sends requests to the service of one store over its Unix socket."""

    def __init__(self, paths: ServicePaths) -> None:
        self.paths = paths

    def _open(self, timeout: float | None) -> socket.socket:
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(CONNECT_TIMEOUT)
            try:
                sock.connect(str(self.paths.socket))
            except BlockingIOError:  # the listen backlog is full: a burst of clients; retry
                sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
                continue
            except OSError:
                sock.close()
                raise
            sock.settimeout(timeout)
            return sock

    def request(
        self, op: str, settings: dict[str, Any], args: dict[str, Any], *, timeout: float | None = None
    ) -> Any:
        """Send one request and return its result, re-raising the service's error as ours."""
        try:
            sock = self._open(timeout)
        except PermissionError as exc:  # e.g. Codex 0.171.0's read-only / workspace-write sandbox
            raise ServiceError(
                f"not allowed to reach the memsearch service for {self.paths.store} ({exc})",
                hint="a sandbox blocks its socket: run the command outside the sandbox, "
                "or read the journal files directly",
            ) from exc
        except OSError as exc:
            raise ServiceError(
                f"the memsearch service for {self.paths.store} is not answering ({exc})",
                hint="restart it with `memsearch serve`, or set MEMSEARCH_NO_SERVICE=1",
            ) from exc
        with sock:
            _send(sock, {"op": op, "settings": settings, "args": args})
            reply = _receive(sock)
        if reply is None:
            raise ServiceError(
                f"the memsearch service for {self.paths.store} closed the connection",
                hint="check the service's output; restart it with `memsearch serve`",
            )
        if reply.get("ok"):
            return reply.get("result")
        raise error_from_payload(reply.get("error") or {})

    def watch(
        self, settings: dict[str, Any], args: dict[str, Any], on_message: Callable[[dict[str, Any]], None]
    ) -> None:
        """Ask the service to watch ``settings["paths"]`` and pass each message it streams back
        to ``on_message`` until the service goes away. The watch lasts as long as this connection:
        interrupt (Ctrl+C, SIGTERM) to end it.
        """
        try:
            sock = self._open(None)
        except OSError as exc:
            raise ServiceError(
                f"the memsearch service for {self.paths.store} is not answering ({exc})"
            ) from exc
        with sock, sock.makefile("rb") as stream:
            _send(sock, {"op": "watch", "settings": settings, "args": args})
            for line in stream:
                if line.strip():
                    on_message(json.loads(line))

    def ping(self) -> dict[str, Any]:
        result = self.request("ping", {}, {}, timeout=CONNECT_TIMEOUT)
        return result if isinstance(result, dict) else {}


def connect(uri: str) -> ServiceClient | None:
    """A client for the service running for ``uri``, or None (then open the store directly).

    Cheap: a ``stat`` of the socket path and, when it exists, a non-blocking probe of the
    service's lock (held for the whole life of a service, released by the kernel when it dies).
    A socket left behind by a crashed service is removed here.
    """
    if os.environ.get(NO_SERVICE_ENV, "") not in ("", "0"):
        return None
    paths = service_paths(uri)
    if not paths.socket.exists():
        return None
    if not _lock_is_held(paths.lock):
        clean_stale(paths)
        return None
    return ServiceClient(paths)


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")


def _receive(sock: socket.socket) -> dict[str, Any] | None:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        part = sock.recv(65536)
        if not part:
            break
        buf += part
    if not buf.strip():
        return None
    data = json.loads(buf)
    return data if isinstance(data, dict) else None


def _error_payload(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MemSearchError):
        return {
            "type": type(exc).__name__,
            "message": exc.message,
            "hint": exc.hint,
            "exit_code": errors.exit_code_for(exc),
        }
    return {
        "type": "ServiceError",
        "message": f"the memsearch service failed: {type(exc).__name__}: {exc}",
        "hint": "see the service's output for details",
        "exit_code": 1,
    }


def error_from_payload(payload: dict[str, Any]) -> MemSearchError:
    """Rebuild the service's error as the same class here (so exit codes and messages match)."""
    cls = getattr(errors, str(payload.get("type")), None)
    message = str(payload.get("message", "the memsearch service failed"))
    hint = str(payload.get("hint", ""))
    if isinstance(cls, type) and issubclass(cls, MemSearchError):
        with contextlib.suppress(TypeError):
            return cls(message, hint)
    exc = ServiceError(message, hint)
    exc.exit_code = int(payload.get("exit_code", 1))
    return exc


class RemoteMemSearch:
    """The ``MemSearch`` methods the CLI uses, answered by the service.

    Paths are made absolute here, in the caller's working directory, before they are sent.
    """

    def __init__(self, client: ServiceClient, settings: dict[str, Any], paths: Sequence[str] = ()):
        self._client = client
        self._settings = settings
        self._paths = [str(Path(p).expanduser().resolve()) for p in paths]

    def _call(self, op: str, timeout: float | None = 300.0, **args: Any) -> Any:
        return self._client.request(op, {**self._settings, "paths": self._paths}, args, timeout=timeout)

    # The engine's search/index are coroutines; these are plain calls (a routed CLI command then
    # never imports asyncio). ``memsearch.cli.options.resolved`` accepts either.

    def search(
        self, query: str, *, top_k: int = 10, source_prefix: str | None = None
    ) -> list[dict[str, Any]]:
        prefix = str(Path(source_prefix).expanduser().resolve()) if source_prefix else None
        result: list[dict[str, Any]] = self._call("search", query=query, top_k=top_k, source_prefix=prefix)
        return result

    def index_with_report(self, *, force: bool = False, progress: Any = None) -> IndexReport:
        from memsearch.indexer import IndexFailure, IndexReport

        data = dict(self._call("index", timeout=None, force=force))
        data["failed_files"] = tuple(IndexFailure(**f) for f in data.get("failed_files", ()))
        data["warnings"] = tuple(data.get("warnings", ()))
        return IndexReport(**data)

    def expand(self, chunk_hash: str, *, section: bool = True, context_lines: int | None = None) -> Expansion:
        from memsearch.expand import Anchor, Expansion

        data = dict(self._call("expand", chunk_hash=chunk_hash, section=section, context_lines=context_lines))
        anchor = data.pop("anchor", None)
        return Expansion(**data, anchor=Anchor(**anchor) if anchor else None)

    def count(self) -> int:
        return int(self._call("count"))

    async def index_file(self, path: str | Path) -> int:
        """Index one file (used by ``compact`` after it appends its summary)."""
        return int(self._call("index_file", path=str(Path(path).expanduser().resolve())))

    @property
    def store(self) -> _RemoteStore:
        """The read side of the store that ``compact`` needs (``query``)."""
        return _RemoteStore(self)

    def reset(self) -> None:
        self._call("reset")

    def close(self) -> None:
        """Nothing to release: each request uses its own connection."""


class _RemoteStore:
    """``MilvusStore.query`` through the service."""

    def __init__(self, remote: RemoteMemSearch) -> None:
        self._remote = remote

    def query(self, *, filter_expr: str = "") -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._remote._call("query", filter_expr=filter_expr)
        return rows


# --- server ---------------------------------------------------------------------------------


def _settings_key(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


class MemoryService:
    """Owns the store, the models and the watchers of one store URI; answers on a Unix socket.

    All engine work runs on one asyncio loop in a dedicated thread, so store and model access is
    never concurrent with itself; connection handler threads only parse, wait and reply. One
    ``MemSearch`` is kept per distinct settings (collection, model, ...), so projects sharing a
    Lite database each get their own collection but share the process and the database lock.
    """

    def __init__(self, uri: str, *, home: Path | None = None) -> None:
        self.uri = uri
        self.paths = service_paths(uri, home)
        self._instances: dict[str, MemSearch] = {}
        self._instances_lock = threading.Lock()
        self._index_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._server: Any = None
        self._lock_fd: int | None = None
        self._stopped = threading.Event()
        self._stop_requested = threading.Event()
        self._sessions: set[socket.socket] = set()
        self._sessions_lock = threading.Lock()
        self.started_at = time.time()
        self.ready = False
        self._ops: dict[str, Callable[[MemSearch | None, dict[str, Any]], Any]] = {
            "ping": self._op_ping,
            "search": self._op_search,
            "expand": self._op_expand,
            "count": self._op_count,
            "reset": self._op_reset,
            "index": self._op_index,
            "index_file": self._op_index_file,
            "query": self._op_query,
        }

    # -- lifecycle ------------------------------------------------------------------------

    def acquire(self) -> None:
        """Become the one service of this store, or raise ServiceRunningError."""
        import fcntl

        _private_dir(self.paths.lock.parent)
        _private_dir(self.paths.socket.parent)
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = read_info(self.paths).get("pid", "?")
            raise ServiceRunningError(
                f"a memsearch service is already running for {self.paths.store} (pid {pid})",
                hint="use it as it is (commands find it by themselves), or stop that process first",
            ) from None
        self._lock_fd = fd
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()  # left by a crashed service: we hold the lock now

    def start(self) -> None:
        """Acquire the store, start the engine loop and listen on the socket (non-blocking)."""
        import asyncio
        import socketserver

        if self._lock_fd is None:
            self.acquire()
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._loop_thread = threading.Thread(target=loop.run_forever, name="memsearch-engine", daemon=True)
        self._loop_thread.start()

        service = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                service._handle(self.connection)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True
            request_queue_size = 128  # agents fire bursts of hook processes at once

        old_umask = os.umask(0o177)  # the socket is for this user only
        try:
            self._server = Server(str(self.paths.socket), Handler)
        finally:
            os.umask(old_umask)
        threading.Thread(target=self._server.serve_forever, name="memsearch-socket", daemon=True).start()
        info = {
            "pid": os.getpid(),
            "store": self.paths.store,
            "socket": str(self.paths.socket),
            "started_at": self.started_at,
        }
        tmp = self.paths.info.with_name(self.paths.info.name + ".tmp")
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, self.paths.info)

    def warm(self, settings: dict[str, Any]) -> MemSearch:
        """Open the store and load the model for ``settings`` now, so the first request is fast.

        Until this returns, ``ping`` answers ``ready: false``.
        """
        ms = self.instance(settings)
        self.run(self._warm(ms))
        self.ready = True
        return ms

    @staticmethod
    async def _warm(ms: MemSearch) -> None:
        # A real search, not just opening: Milvus Lite builds each segment's BM25 index and loads
        # jieba's dictionary on the first search (0.5 s at 2,000 chunks, seconds at 20,000), which
        # would otherwise land on the first prompt's recall. The service owns the store and
        # writes to it, so it creates a missing collection first (a plain search would not).
        ms.store  # noqa: B018 (the property opens the store and creates the collection)
        await ms.search("warm-up", top_k=1)

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the engine loop and wait for its result (from any thread)."""
        import asyncio

        assert self._loop is not None, "service not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def request_stop(self) -> None:
        """Ask :meth:`wait` to return (safe from a signal handler)."""
        self._stop_requested.set()

    def wait(self) -> None:
        """Block until :meth:`request_stop` (or :meth:`stop`) is called."""
        while not (self._stop_requested.wait(0.5) or self._stopped.is_set()):
            pass

    def stop(self) -> None:
        """Stop listening, close every store, and release the run files."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        with self._sessions_lock:
            sessions = list(self._sessions)
        for conn in sessions:  # ends each watch session: its watcher stops, its client sees EOF
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 15
        while self._sessions and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._instances_lock:
            instances = list(self._instances.values())
            self._instances.clear()
        for ms in instances:
            with contextlib.suppress(Exception):
                if self._loop is not None and self._loop.is_running():
                    self.run(_close(ms))
                else:
                    ms.close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(timeout=10)
            self._loop.close()
        for path in (self.paths.socket, self.paths.info):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- requests -------------------------------------------------------------------------

    def instance(self, settings: dict[str, Any]) -> MemSearch:
        """The MemSearch for these settings (created once, then reused)."""
        from memsearch.core import MemSearch

        key = _settings_key(settings)
        with self._instances_lock:
            ms = self._instances.get(key)
            if ms is None:
                kwargs = {k: v for k, v in settings.items() if k != "paths"}
                kwargs["milvus_uri"] = self.uri
                ms = MemSearch(settings.get("paths") or [], **kwargs)
                self._instances[key] = ms
            return ms

    def _handle(self, conn: socket.socket) -> None:
        try:
            request = _receive(conn)
        except (OSError, ValueError):
            return
        if request is None:
            return
        if request.get("op") == "watch":
            self._watch_session(conn, request)
            return
        try:
            op = self._ops.get(str(request.get("op")))
            if op is None:
                raise ServiceError(f"unknown service operation {request.get('op')!r}")
            settings = request.get("settings") or {}
            ms = self.instance(settings) if request.get("op") != "ping" else None
            reply: dict[str, Any] = {"ok": True, "result": op(ms, request.get("args") or {})}
        except Exception as exc:
            if not isinstance(exc, MemSearchError):
                logger.exception("service request failed")
            reply = {"ok": False, "error": _error_payload(exc)}
        with contextlib.suppress(OSError):
            _send(conn, reply)

    def _watch_session(self, conn: socket.socket, request: dict[str, Any]) -> None:
        """Serve one ``memsearch watch`` client: index its paths, then stream its watcher's events
        until it hangs up (or the service stops). Watcher updates run on the engine loop."""
        send_lock = threading.Lock()

        def send(message: dict[str, Any]) -> None:
            with send_lock, contextlib.suppress(OSError):
                _send(conn, message)

        args = request.get("args") or {}
        try:
            ms = self.instance(request.get("settings") or {})
            report = self.run(self._index(ms, False))
        except Exception as exc:
            send({"ok": False, "error": _error_payload(exc)})
            return
        send({"ok": True, "result": dataclasses.asdict(report)})
        with self._sessions_lock:
            self._sessions.add(conn)
        watcher = ms.watch(
            on_event=lambda kind, summary, path: send({"event": kind, "summary": summary, "path": str(path)}),
            on_error=lambda kind, exc, path: send(
                {"event": kind, "path": str(path), "error": _error_payload(exc)}
            ),
            debounce_ms=args.get("debounce_ms"),
            runner=self.run,
        )
        send({"watching": True})
        try:
            while conn.recv(1024):  # the client sends nothing more; EOF means it is gone
                pass
        except OSError:
            pass
        finally:
            watcher.stop()
            with self._sessions_lock:
                self._sessions.discard(conn)

    def _op_ping(self, _ms: MemSearch | None, _args: dict[str, Any]) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "store": self.paths.store,
            "started_at": self.started_at,
            "ready": self.ready,
        }

    def _op_search(self, ms: MemSearch | None, args: dict[str, Any]) -> Any:
        assert ms is not None
        return self.run(
            ms.search(args["query"], top_k=int(args["top_k"]), source_prefix=args.get("source_prefix"))
        )

    def _op_expand(self, ms: MemSearch | None, args: dict[str, Any]) -> Any:
        assert ms is not None
        expansion = self.run(
            _call(
                ms.expand,
                args["chunk_hash"],
                section=bool(args.get("section", True)),
                context_lines=args.get("context_lines"),
            )
        )
        return dataclasses.asdict(expansion)

    def _op_count(self, ms: MemSearch | None, _args: dict[str, Any]) -> Any:
        assert ms is not None
        return self.run(_call(ms.count))

    def _op_reset(self, ms: MemSearch | None, _args: dict[str, Any]) -> Any:
        assert ms is not None
        self.run(_call(ms.reset))
        return None

    def _op_index(self, ms: MemSearch | None, args: dict[str, Any]) -> Any:
        assert ms is not None
        report = self.run(self._index(ms, bool(args.get("force", False))))
        return dataclasses.asdict(report)

    def _op_index_file(self, ms: MemSearch | None, args: dict[str, Any]) -> Any:
        assert ms is not None
        return self.run(ms.index_file(str(args["path"])))

    def _op_query(self, ms: MemSearch | None, args: dict[str, Any]) -> Any:
        assert ms is not None
        return self.run(_call(ms.store.query, filter_expr=str(args.get("filter_expr", ""))))

    async def _index(self, ms: MemSearch, force: bool) -> IndexReport:
        import asyncio

        if self._index_lock is None:
            self._index_lock = asyncio.Lock()
        async with self._index_lock:  # one indexing run at a time; searches go on meanwhile
            return await ms.index_with_report(force=force)


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a synchronous engine call on the engine loop (keeps store access on one thread)."""
    return fn(*args, **kwargs)


async def _close(ms: MemSearch) -> None:
    ms.close()
