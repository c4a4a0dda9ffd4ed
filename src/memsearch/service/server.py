"""The memory service itself: one warm process owns a store, its models and its watchers.

Why: Milvus Lite lets one process open a database, so a running ``watch`` would block every
``search``, and agent hooks that index or search in parallel would fail; every command would also
pay the start-up (pymilvus import, model load). :class:`MemoryService` keeps all of that open and
answers requests on the store's Unix socket. The engine is imported lazily, when the first request
needs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from memsearch import heap
from memsearch.callerenv import as_caller, digest, snapshot
from memsearch.errors import (
    MemSearchError,
    ServiceBusyError,
    ServiceError,
    ServiceGoneError,
    ServiceRequestError,
    ServiceRunningError,
    ServiceStopRefusedError,
    UnsafeRunDirError,
)
from memsearch.files import atomic_write, try_lock
from memsearch.service.activity import Activity
from memsearch.service.manage import OWNERS, command_line
from memsearch.service.ops import STORE_OPS, Op
from memsearch.service.paths import file_kind, is_dir, private_dir, read_info, service_paths
from memsearch.service.protocol import (
    MAX_REQUEST_BYTES,
    Lines,
    RequestTooLarge,
    error_payload,
    parse_request,
    peer_credentials,
    send,
    too_large,
)
from memsearch.service.sessions import end_all, watch_session

if TYPE_CHECKING:
    import asyncio

    from memsearch.core import MemSearch
    from memsearch.engine.lifecycle import IdleRelease
    from memsearch.index_report import IndexReport

logger = logging.getLogger("memsearch.service")

#: Connections served at once (watch sessions included); more are answered "busy" and closed.
MAX_CONNECTIONS = 64
#: Seconds a connection has to send its (next) request line; then the service closes it.
IDLE_TIMEOUT = 5.0
#: While a request runs, the service sends ``{"alive": true}`` this often (seconds).
HEARTBEAT_INTERVAL = 1.0
#: Seconds a service started on demand stays after its last request when its Milvus Lite database
#: does not exist (a read found nothing there, and reads create nothing): the command that started
#: it has its answer, and waiting ``idle_timeout`` for a store that is not there helps nobody.
MISSING_STORE_GRACE = 5.0
#: Seconds between two returns of freed memory to the system (``memsearch.heap.trim``).
TRIM_INTERVAL = 10.0
#: Seconds :meth:`MemoryService.stop` gives each step (requests in flight, closing the stores):
#: a request that hangs is left behind rather than keeping the service from stopping.
STOP_GRACE = 5.0
#: Operations that manage the service rather than use the store: they open no store and do not
#: count as use (a ``memsearch service status`` every minute must not keep idle services alive).
MANAGEMENT_OPS = frozenset({"ping", "stop"})


def _engine_key(settings: dict[str, Any], env: dict[str, str]) -> str:
    """Equal for equal settings and equal credential variables: callers send every setting spelled
    out (``core.engine_settings``) and their variables (``callerenv.snapshot``), so a caller is
    only ever served by an engine built from its own."""
    return json.dumps(settings, sort_keys=True, default=str) + digest(env)


#: Builds the engine for one caller's settings: ``memsearch.core.engine`` (given by whoever starts
#: the service, so that this module never imports the engine and the engine can start a service).
Engine: TypeAlias = "Callable[..., MemSearch]"


class MemoryService:
    """Owns the store, the models and the watchers of one store URI; answers on a Unix socket.

    All engine work runs on one asyncio loop in a dedicated thread, so store and model access is
    never concurrent with itself; connection handler threads only parse, wait and reply. One
    ``MemSearch`` is kept per distinct settings (collection, model, ...), so projects sharing a
    Lite database each get their own collection but share the process and the database lock.

    With ``idle_timeout`` (seconds), :meth:`wait` returns once the store has not been used for that
    long (a service started on demand exits by itself); without it, only when asked.

    ``owner`` says what runs the service, for ``memsearch service status`` and ``stop``
    (:data:`~memsearch.service.manage.OWNERS`): ``serve``, ``on-demand``, ``watch``, or ``program``
    (a process that holds a ``MemSearch`` and serves the others from its threads: a ``stop``
    request is refused, as only that program can let go).
    """

    def __init__(
        self,
        uri: str,
        *,
        engine: Engine,
        home: Path | None = None,
        idle_timeout: float | None = None,
        owner: str = "serve",
    ) -> None:
        if owner not in OWNERS:
            raise ValueError(f"unknown service owner {owner!r} (one of {', '.join(OWNERS)})")
        self.uri = uri
        self._engine = engine
        self.paths = service_paths(uri, home)
        self.idle_timeout = idle_timeout
        self.owner = owner
        self.on_demand = owner == "on-demand"
        self.command = command_line()
        if owner != "program":  # a process of its own: few malloc arenas (memsearch.heap)
            heap.limit_arenas()
        from memsearch.store.uri import resolve_uri

        self._lite_path = resolve_uri(uri).path  # None for a server
        self._activity = Activity()
        self._leaving = threading.Event()  # asked to stop (the ``stop`` op): wait() returns
        self._instances: dict[str, MemSearch] = {}
        self._instances_lock = threading.Lock()
        self._index_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._model_idle: IdleRelease | None = None
        self._lock_fd: int | None = None
        self._stopped = threading.Event()
        self._stop_requested = threading.Event()
        self._wake = threading.Event()  # set with either of the two above: wait() looks at once
        self._sessions: dict[socket.socket, Callable[[dict[str, Any]], bool]] = {}  # -> tell()
        self.ending_watches = False  # asked to stop by `service stop --all`: the watches end too
        self._sessions_lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._beat = threading.local()  # the heartbeat of the request this thread serves
        self.started_at = time.time()
        self.ready = False
        self._ops: dict[str, Callable[[MemSearch | None, dict[str, Any], dict[str, str]], Any]] = {
            **{name: self._on_engine(op) for name, op in STORE_OPS.items()},
            "index": self._op_index,
            "ping": self._op_ping,
            "stop": self._op_stop,
        }

    # -- lifecycle ------------------------------------------------------------------------

    def acquire(self) -> None:
        """Become the one service of this store, or raise ServiceRunningError."""
        private_dir(self.paths.lock.parent)
        private_dir(self.paths.socket.parent)
        for path, kind in ((self.paths.lock, stat.S_ISREG), (self.paths.socket, stat.S_ISSOCK)):
            with contextlib.suppress(FileNotFoundError):
                mode = os.lstat(path).st_mode
                if not kind(mode):
                    raise UnsafeRunDirError(
                        f"{path} is {file_kind(mode)}, not the memory service's "
                        + ("lock file" if path == self.paths.lock else "socket"),
                        hint=f"remove it (`rm -rf {path}`) and start the service again",
                    )
        try:
            fd = try_lock(self.paths.lock)
        except OSError as exc:
            raise ServiceError(
                f"cannot open the memory service's lock file {self.paths.lock} ({exc})",
                hint=f"check {self.paths.lock.parent}; remove the file if it is broken",
            ) from exc
        if fd is None:
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

        if self._lock_fd is None:
            self.acquire()
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._loop_thread = threading.Thread(
            target=loop.run_forever, name="memsearch-service-engine", daemon=True
        )
        self._loop_thread.start()
        if self.owner != "program":
            from memsearch.engine.lifecycle import IdleRelease

            # A service process's engines keep their model warm between requests and let it go
            # once unused (ModelLifecycle.IDLE), and freed memory goes back to the system after
            # each burst of work (memsearch.heap). A program that owns the store serves
            # the others from its own threads and keeps its own choices (a MemSearch keeps its
            # model; its heap is its own).
            self._model_idle = IdleRelease(self._activity.idle_seconds, self._release_models).start()
            heap.trim_every(TRIM_INTERVAL, self._stopped)

        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is for this user only
        try:
            listener.bind(str(self.paths.socket))
        except OSError as exc:
            listener.close()
            raise ServiceError(
                f"cannot listen on {self.paths.socket} ({exc})",
                hint=f"check {self.paths.socket.parent}; remove what is at that path",
            ) from exc
        finally:
            os.umask(old_umask)
        listener.listen(128)  # agents fire bursts of hook processes at once
        listener.settimeout(0.25)  # so the accept loop notices stop()
        self._listener = listener
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name="memsearch-service-socket", daemon=True
        )
        self._accept_thread.start()
        info = {
            "pid": os.getpid(),
            "store": self.paths.store,
            "socket": str(self.paths.socket),
            "started_at": self.started_at,
            "on_demand": self.on_demand,
            "idle_timeout": self.idle_timeout,
            "owner": self.owner,
            "command": self.command,
        }
        atomic_write(self.paths.info, json.dumps(info))

    def warm(self, settings: dict[str, Any]) -> MemSearch:
        """Open the store and load the model for ``settings`` now, so the first request is fast.

        Until this returns, ``ping`` answers ``ready: false``.
        """
        ms = self.instance(settings, snapshot())
        self.run(self._warm(ms))
        self.ready = True
        return ms

    @staticmethod
    async def _warm(ms: MemSearch) -> None:
        # A real search, not just opening: Milvus Lite builds each segment's BM25 index and loads
        # jieba's dictionary on the first search (seconds on a large store, docs/scaling.md), which
        # would otherwise land on the first prompt's recall. The service owns the store and
        # writes to it, so it creates a missing collection first (a plain search would not).
        from memsearch.errors import CollectionNotFoundError

        ms.store  # noqa: B018 (the property opens the store and creates the collection)
        with contextlib.suppress(CollectionNotFoundError):  # a reset by a client meanwhile
            await ms.search("warm-up", top_k=1)

    def run(self, coro: Any, *, timeout: float | None = None) -> Any:
        """Run a coroutine on the engine loop and wait for its result (from any thread).

        While a client waits on this thread it gets a heartbeat every second; once it has gone
        (the heartbeat cannot be sent: it gave up on a hung request) nobody waits for the answer,
        and the work is cancelled rather than holding this thread and its connection for ever.
        ``timeout`` bounds the wait (TimeoutError), for the service's own work while it stops.
        """
        import asyncio
        import concurrent.futures

        assert self._loop is not None, "service not started"
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        beat = getattr(self._beat, "send", None)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not concurrent.futures.wait([future], timeout=HEARTBEAT_INTERVAL).done:
            if beat is not None and not beat():
                future.cancel()
                raise ServiceGoneError("the client went away before the answer", hint="")
            if deadline is not None and time.monotonic() > deadline:
                future.cancel()
                raise TimeoutError(f"not done within {timeout:g} s")
        return future.result()

    def stop_requested(self, timeout: float = 0) -> bool:
        """Whether :meth:`request_stop` was called (waiting up to ``timeout`` seconds for it)."""
        return self._stop_requested.wait(timeout)

    def request_stop(self) -> None:
        """Ask :meth:`wait` to return (safe from a signal handler)."""
        self._stop_requested.set()
        self._wake.set()

    @property
    def leaving(self) -> bool:
        """Whether a client asked this service to stop (the ``stop`` op)."""
        return self._leaving.is_set()

    def wait(self) -> None:
        """Block until :meth:`request_stop` (or :meth:`stop`) is called, a client asks the service to
        stop (the ``stop`` op), or the store has not been used for ``idle_timeout`` seconds."""
        while not (self._stop_requested.is_set() or self._stopped.is_set()):
            if self._leaving.is_set() or self._idle_expired():
                # Whoever connected just before the socket went is still in the listen backlog:
                # accept and answer them (stop() waits for open connections) rather than drop them.
                time.sleep(0.3)
                return
            self._wake.wait(0.5)

    def _idle_limit(self) -> float | None:
        """``idle_timeout``, shortened to :data:`MISSING_STORE_GRACE` for a service started on demand
        whose Milvus Lite database does not exist."""
        if self.idle_timeout is None:
            return None
        if self.on_demand and self._lite_path is not None and not is_dir(self._lite_path):
            return min(self.idle_timeout, MISSING_STORE_GRACE)
        return self.idle_timeout

    def _idle_expired(self) -> bool:
        """True once nothing has used the store for the idle limit (:meth:`_idle_limit`) and no
        connection is open; then the socket is removed at once (under the same lock that counts
        connections), so no new client finds it: they start or use another service, which takes
        the store once this one has let it go."""
        limit = self._idle_limit()
        if limit is None:
            return False
        if not self._activity.expired(limit, then=self._unlink_socket):
            return False
        logger.info("not used for %g s: stopping", limit)
        return True

    def _unlink_socket(self) -> None:
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(self.paths.socket).st_mode):
                self.paths.socket.unlink()

    def retire(self, *, end_watches: bool = False) -> None:
        """Stop as if idle: the socket goes now (no new client finds this service), :meth:`wait`
        returns, and :meth:`stop` then lets the requests in flight finish. What the ``stop`` op does;
        ``end_watches``: the watches using it end too, rather than take the store over."""
        self.ending_watches = self.ending_watches or end_watches
        with self._activity.lock:
            self._unlink_socket()
            self._leaving.set()
        self._wake.set()
        logger.info("asked to stop")

    def end_sessions(self) -> None:
        """End every watch session (``memsearch.service.sessions.end_all``)."""
        end_all(self)

    def stop(self) -> None:
        """Stop listening, close every store, and release the run files."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._wake.set()
        if self._model_idle is not None:
            self._model_idle.stop()
        # Stop accepting first, and remove the socket: a watch that loses this service must not
        # reconnect to it (it would be waited for below); it takes over once our lock is free.
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept loop at once (Linux)
            with contextlib.suppress(OSError):
                self._listener.close()
            if self._accept_thread is not None:
                self._accept_thread.join(timeout=5)
            self._unlink_socket()
        self.end_sessions()
        deadline = time.monotonic() + STOP_GRACE
        while (self._sessions or self._activity.connections) and time.monotonic() < deadline:
            time.sleep(0.05)  # the requests in flight finish before their stores close
        with self._instances_lock:
            instances = list(self._instances.values())
            self._instances.clear()
        for ms in instances:  # bounded: a store that hangs must not keep the service from exiting
            with contextlib.suppress(Exception):
                if self._loop is not None and self._loop.is_running():
                    self.run(_close(ms), timeout=STOP_GRACE)
                else:
                    ms.close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(timeout=STOP_GRACE)
            if not (self._loop_thread and self._loop_thread.is_alive()):
                self._loop.close()  # (a loop wedged by a hung request is left to the process's exit)
        with contextlib.suppress(FileNotFoundError):
            self.paths.info.unlink()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- requests -------------------------------------------------------------------------

    def _release_models(self) -> None:
        with self._instances_lock:
            engines = list(self._instances.values())
        for ms in engines:
            ms.release_model()
        logger.info(
            "no request for %g s: released the embedding model",
            self._model_idle.limit if self._model_idle else 0,
        )

    def instance(self, settings: dict[str, Any], env: dict[str, str]) -> MemSearch:
        """The MemSearch for these settings and this caller's credential variables (created once,
        then reused; its work then runs in :func:`~memsearch.callerenv.as_caller` of ``env``)."""
        key = _engine_key(settings, env)
        with self._instances_lock:
            ms = self._instances.get(key)
            if ms is None:
                kwargs = {k: v for k, v in settings.items() if k != "paths"}
                kwargs["milvus_uri"] = self.uri
                ms = self._engine(settings.get("paths") or [], **kwargs)
                self._instances[key] = ms
            return ms

    def _accept_loop(self) -> None:
        """Accept connections until stop(); each gets a thread, up to MAX_CONNECTIONS at once."""
        listener = self._listener
        assert listener is not None
        while not self._stopped.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopped.is_set():
                    return
                time.sleep(0.05)  # e.g. out of file descriptors: do not spin
                continue
            if not self._slots.acquire(blocking=False):
                self._refuse_busy(conn)
                continue
            try:
                threading.Thread(target=self._connection, args=(conn,), daemon=True).start()
            except RuntimeError:  # cannot start a thread
                self._slots.release()
                self._refuse_busy(conn)

    @staticmethod
    def _refuse_busy(conn: socket.socket) -> None:
        busy = ServiceBusyError(
            f"the memsearch service has {MAX_CONNECTIONS} connections open and accepts no more",
            hint="try again in a few seconds; if it stays busy, restart the service",
        )
        with conn:
            conn.settimeout(0.2)
            with contextlib.suppress(OSError):
                send(conn, {"ok": False, "error": error_payload(busy)})

    def _connection(self, conn: socket.socket) -> None:
        """Serve one connection: its requests in order, each within IDLE_TIMEOUT of the last."""
        try:
            with self._activity.connection(), conn:
                try:
                    creds = peer_credentials(conn)
                except OSError:
                    return
                if creds is not None and creds[1] != os.getuid():
                    logger.warning("refused a connection from process %d of uid %d", *creds)
                    return  # not a word to another user's process
                lines = Lines(conn, MAX_REQUEST_BYTES)
                while not self._stopped.is_set():
                    try:
                        line = lines.next_line(IDLE_TIMEOUT)
                    except RequestTooLarge:
                        self._reply_error(conn, too_large())
                        return
                    except TimeoutError:
                        if lines.pending:
                            self._reply_error(
                                conn,
                                ServiceRequestError(
                                    f"incomplete request: no end of line within {IDLE_TIMEOUT:g} s",
                                    hint="send one JSON object per line",
                                ),
                            )
                        return
                    except OSError:
                        return
                    if line is None:
                        return
                    if not line.strip():
                        continue
                    if not self._handle(conn, line):
                        return
        finally:
            self._slots.release()

    @staticmethod
    def _reply_error(conn: socket.socket, exc: BaseException) -> None:
        with contextlib.suppress(OSError):
            send(conn, {"ok": False, "error": error_payload(exc)})

    def _handle(self, conn: socket.socket, line: bytes) -> bool:
        """Answer one request line; False when the connection is done (a watch session ended)."""
        try:
            request = parse_request(line)
        except ServiceRequestError as exc:
            self._reply_error(conn, exc)
            return True
        if request["op"] == "watch":
            conn.settimeout(None)
            with self._activity.using():
                watch_session(self, conn, request)
            return False
        conn.settimeout(30)  # a client that stops reading must not block this thread for ever

        def beat() -> bool:
            try:
                send(conn, {"alive": True})
            except OSError:
                return False
            return True

        self._beat.send = beat
        managing = request["op"] in MANAGEMENT_OPS
        try:
            with contextlib.nullcontext() if managing else self._activity.using():
                op = self._ops[request["op"]]
                env = request["env"]
                ms = None if managing else self.instance(request["settings"], env)
                reply: dict[str, Any] = {"ok": True, "result": op(ms, request["args"], env)}
        except Exception as exc:
            if not isinstance(exc, MemSearchError):
                logger.exception("service request failed")
            reply = {"ok": False, "error": error_payload(exc)}
        finally:
            self._beat.send = None
        with contextlib.suppress(OSError):
            send(conn, reply)
        return True

    def _op_ping(self, _ms: MemSearch | None, _args: dict[str, Any], _env: dict[str, str]) -> dict[str, Any]:
        from memsearch.store.lite import fast_path_line

        return {
            "pid": os.getpid(),
            "store": self.paths.store,
            "started_at": self.started_at,
            "ready": self.ready,
            "on_demand": self.on_demand,
            "idle_timeout": self.idle_timeout,
            "owner": self.owner,
            "command": self.command,
            "idle": self._activity.idle_seconds(),
            "last_request": self._activity.last_request(),
            # this process owns the store: its fast path is the one searches use (``memsearch stats``)
            "lite_fast_path": fast_path_line(),
        }

    def _op_stop(self, _ms: MemSearch | None, _args: dict[str, Any], _env: dict[str, str]) -> dict[str, Any]:
        if not OWNERS[self.owner].stoppable:
            raise ServiceStopRefusedError(
                f"the memory service for {self.paths.store} is run by a program for itself: process "
                f"{os.getpid()} ({self.command}); it releases the store when that program closes "
                "its MemSearch or exits",
                hint="close the MemSearch in that program, or end the program; "
                "`memsearch service stop` stops only serve, on-demand and watch services",
            )
        self.retire(end_watches=_args.get("watches") is True)
        return {"pid": os.getpid(), "store": self.paths.store, "owner": self.owner}

    def _on_engine(self, op: Op) -> Callable[[MemSearch | None, dict[str, Any], dict[str, str]], Any]:
        def run(ms: MemSearch | None, args: dict[str, Any], env: dict[str, str]) -> Any:
            assert ms is not None
            return self.run(as_caller(env, op(ms, args)))

        return run

    def _op_index(self, ms: MemSearch | None, args: dict[str, Any], env: dict[str, str]) -> Any:
        assert ms is not None
        report = self.run(as_caller(env, self._index(ms, bool(args.get("force", False)))))
        return dataclasses.asdict(report)

    async def _index(self, ms: MemSearch, force: bool) -> IndexReport:
        import asyncio

        if self._index_lock is None:
            self._index_lock = asyncio.Lock()
        async with self._index_lock:  # one indexing run at a time; searches go on meanwhile
            return await ms._index_here(force=force, progress=None)


async def _close(ms: MemSearch) -> None:
    await ms.aclose()  # on the engine loop: the provider's client there is closed before it stops
