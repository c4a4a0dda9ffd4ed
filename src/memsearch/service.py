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
"hint", "exit_code"}}``, preceded by ``{"alive": true}`` lines once a second while the work runs
(so a client can tell a busy service from a stopped one). Several requests may be sent on one
connection; each gets its reply, in order. Files under ``<home>/run/``: ``<key>.sock`` (the
socket), ``<key>.lock`` (held with ``flock`` by the serving process for its lifetime: one service
per store, and released by the kernel even after ``kill -9``), ``<key>.json`` (pid, store, socket,
start time).

Security and limits (other local users must not be able to read queries or inject memories, and
no client may exhaust the service): the run folders must be real directories owned by us with
mode 0700 (never followed through a symlink); both ends check the other's uid with
``SO_PEERCRED``; a request is at most :data:`MAX_REQUEST_BYTES` and must arrive within
:data:`IDLE_TIMEOUT` seconds; ``top_k`` and text sizes are capped; at most :data:`MAX_CONNECTIONS`
connections are served at once; a client gives up on a silent service after
:func:`client_timeout` seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch import errors
from memsearch.errors import (
    MemSearchError,
    ServiceBusyError,
    ServiceError,
    ServicePeerError,
    ServiceRequestError,
    ServiceRunningError,
    ServiceTimeoutError,
    ServiceUnavailableError,
    UnsafeRunDirError,
)
from memsearch.files import atomic_write, lock_is_held, try_lock

if TYPE_CHECKING:
    import asyncio

    from memsearch.core import MemSearch
    from memsearch.expand import Expansion
    from memsearch.indexer import IndexReport

logger = logging.getLogger("memsearch.service")

__all__ = [  # the error classes live in memsearch.errors; callers import them from here too
    "ServiceError",
    "ServiceRunningError",
    "ServiceTimeoutError",
    "ServiceUnavailableError",
]

#: Set to 1 to make every command open the store directly, even when a service is running.
NO_SERVICE_ENV = "MEMSEARCH_NO_SERVICE"
#: Seconds a client waits for the first (and each next) byte from the service before giving up.
TIMEOUT_ENV = "MEMSEARCH_SERVICE_TIMEOUT"
DEFAULT_CLIENT_TIMEOUT = 5.0
#: A Unix socket path must fit in sun_path (108 bytes on Linux, 104 on macOS).
_MAX_SOCKET_PATH = 100
CONNECT_TIMEOUT = 2.0

# Server-side limits: whatever a client sends, one request costs bounded memory and time.
#: A request line longer than this is refused before more of it is read (a search is ~1 KB).
MAX_REQUEST_BYTES = 1 << 20
#: The most results one search may ask for (the CLI's ``--top-k`` has the same bound).
MAX_TOP_K = 1000
#: The longest search query, in characters (a prompt the hooks search with is far shorter).
MAX_QUERY_CHARS = 100_000
#: The most context lines ``expand`` may ask for.
MAX_CONTEXT_LINES = 100_000
#: Connections served at once (watch sessions included); more are answered "busy" and closed.
MAX_CONNECTIONS = 64
#: Seconds a connection has to send its (next) request line; then the service closes it.
IDLE_TIMEOUT = 5.0
#: While a request runs, the service sends ``{"alive": true}`` this often (seconds).
HEARTBEAT_INTERVAL = 1.0


def client_timeout() -> float:
    """How long a client waits for the service to say anything (``MEMSEARCH_SERVICE_TIMEOUT``).

    The service answers within milliseconds, or sends a heartbeat every second while it works; a
    silent service is stopped (SIGSTOP) or hung, and waiting longer would only hang the agent.
    """
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_CLIENT_TIMEOUT
    except ValueError:
        return DEFAULT_CLIENT_TIMEOUT
    return value if value > 0 else DEFAULT_CLIENT_TIMEOUT


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


def _dir_problem(path: Path) -> str | None:
    """Why ``path`` is not a safe run folder (None when it is one): it must be a real directory
    (not a symlink), owned by us, with no group/other permissions. Uses ``lstat``: never follows
    a link. Raises FileNotFoundError when it does not exist."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0700 (other users can reach it)"
    return None


def _unsafe_dir_error(path: Path, problem: str) -> UnsafeRunDirError:
    if problem.startswith("has mode"):
        hint = f"make it private with `chmod 700 {path}`"
    else:
        hint = f"remove it (`rm -rf {path}`) so memsearch can create a private one"
    return UnsafeRunDirError(
        f"refusing to use {path} for the memory service: it {problem}",
        hint=hint + "; another user could otherwise read your queries or inject memories",
    )


def _private_dir(path: Path) -> None:
    """Create ``path`` with mode 0700 if it is missing, then insist it is a safe run folder."""
    try:
        problem = _dir_problem(path)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # a racing process may create it: checked below
            os.mkdir(path, 0o700)
            # mkdir applies the umask, which only removes bits; make sure we can use it ourselves.
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.fchmod(fd, 0o700)
            finally:
                os.close(fd)
        problem = _dir_problem(path)
    if problem is not None:
        raise _unsafe_dir_error(path, problem)


def _run_dirs_problem(paths: ServicePaths) -> UnsafeRunDirError | None:
    """For clients (which never create anything): the first unsafe run folder, or None."""
    for folder in dict.fromkeys((paths.lock.parent, paths.socket.parent)):
        try:
            problem = _dir_problem(folder)
        except OSError:
            continue  # missing: nothing can be listening there
        if problem is not None:
            return _unsafe_dir_error(folder, problem)
    return None


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a special file"


def read_info(paths: ServicePaths) -> dict[str, Any]:
    """The running service's info file (pid, store, socket), or {}."""
    try:
        fd = os.open(paths.info, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as fh:
            data = json.loads(fh.read(65536))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _lock_is_held(lock: Path) -> bool:
    """Whether some process holds the service lock (i.e. a service is alive).

    Raises OSError when the lock path is not a regular file we can open (never follows a link).
    """
    return lock_is_held(lock)


def clean_stale(paths: ServicePaths) -> bool:
    """Remove the socket and info files of a service that died without cleaning up.

    Returns True when something stale was removed. Never touches a live service's files, and
    removes only a socket (not a directory or anything else found at the socket's path).
    """
    if _lock_is_held(paths.lock):
        return False
    removed = False
    for path, want in ((paths.socket, stat.S_ISSOCK), (paths.info, stat.S_ISREG)):
        with contextlib.suppress(OSError):
            if want(os.lstat(path).st_mode):
                path.unlink()
                removed = True
    return removed


def peer_credentials(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a connected Unix socket, where the platform
    tells (Linux ``SO_PEERCRED``); None elsewhere."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    size = struct.calcsize("3i")
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, size))
    return pid, uid


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """A client-side warning on stderr, at most once per process (commands then run directly)."""
    if message not in _warned:
        _warned.add(message)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"Warning: {message}\n")
            sys.stderr.flush()


def _process_state(pid: object) -> str:
    """The kernel's one-letter state of ``pid`` ('T' = stopped), or '' when unknown."""
    try:
        text = Path(f"/proc/{int(str(pid))}/stat").read_text()
    except (OSError, ValueError):
        return ""
    fields = text.rpartition(")")[2].split()
    return fields[0] if fields else ""


# --- client ---------------------------------------------------------------------------------


class ServiceClient:
    """Sends requests to the service of one store over its Unix socket."""

    def __init__(self, paths: ServicePaths) -> None:
        self.paths = paths

    def _describe(self) -> str:
        pid = read_info(self.paths).get("pid")
        return f"the memsearch service for {self.paths.store}" + (f" (pid {pid})" if pid else "")

    def _open(self) -> socket.socket:
        """A connection to the service whose peer is verified to run as us."""
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
            try:
                creds = peer_credentials(sock)
            except OSError:
                sock.close()
                raise
            if creds is not None and creds[1] != os.getuid():
                sock.close()
                raise ServicePeerError(
                    f"the socket {self.paths.socket} is served by process {creds[0]} of uid "
                    f"{creds[1]}, not by you (uid {os.getuid()}); nothing was sent to it",
                    hint=f"find out who created it; remove {self.paths.socket.parent} "
                    "and let memsearch recreate it",
                )
            return sock

    def connection(self) -> socket.socket:
        """:meth:`_open` with its failures as our errors."""
        try:
            return self._open()
        except PermissionError as exc:  # e.g. Codex 0.171.0's read-only / workspace-write sandbox
            raise ServiceUnavailableError(
                f"not allowed to reach the memsearch service for {self.paths.store} ({exc})",
                hint="a sandbox blocks its socket: run the command outside the sandbox, "
                "or read the journal files directly",
            ) from exc
        except OSError as exc:
            raise ServiceUnavailableError(
                f"{self._describe()} is not answering ({exc})",
                hint="run the command again (a stopping service is replaced or bypassed), "
                "restart it with `memsearch serve`, or set MEMSEARCH_NO_SERVICE=1",
            ) from exc

    def request(
        self, op: str, settings: dict[str, Any], args: dict[str, Any], *, timeout: float | None = None
    ) -> Any:
        """Send one request and return its result, re-raising the service's error as ours.

        ``timeout`` (default :func:`client_timeout`) bounds each silence, not the whole request:
        the service sends a heartbeat every second while it works, so a long ``index`` is fine
        and a stopped service is noticed within the deadline.
        """
        data = _encode({"op": op, "settings": settings, "args": args})
        if len(data) > MAX_REQUEST_BYTES:
            raise ServiceRequestError(
                f"this request is {len(data):,} bytes; the memory service accepts at most "
                f"{MAX_REQUEST_BYTES:,}",
                hint="shorten the query or text, or set MEMSEARCH_NO_SERVICE=1 to run it directly",
            )
        wait = client_timeout() if timeout is None else timeout
        with self.connection() as sock:
            sock.settimeout(wait)
            with contextlib.suppress(OSError):  # refused (busy) or died: its answer, if any, waits
                sock.sendall(data)
            reply = self._read_reply(sock, _Lines(sock), wait)
        if reply.get("ok"):
            return reply.get("result")
        raise error_from_payload(reply.get("error") or {})

    def _read_reply(self, sock: socket.socket, lines: _Lines, wait: float) -> dict[str, Any]:
        """The next message that is not a heartbeat, or one of our errors."""
        while True:
            try:
                line = lines.next_line()
            except TimeoutError:
                raise self._stuck(wait) from None
            except OSError as exc:
                raise self._gone(exc) from None
            if line is None:
                raise self._gone(None)
            if not line.strip():
                continue
            message = decode_message(line)
            if message is None:
                raise ServiceError(
                    f"{self._describe()} sent an answer that is not memsearch's protocol",
                    hint="check what is listening on " + str(self.paths.socket),
                )
            if message.get("alive"):
                continue
            return message

    def _stuck(self, wait: float) -> ServiceTimeoutError:
        pid = read_info(self.paths).get("pid")
        if pid is None:
            hint = "stop the process serving it; commands then open the store themselves"
        elif _process_state(pid) in ("T", "t"):
            hint = f"it is stopped: resume it with `kill -CONT {pid}`, or end it with `kill {pid}`"
        else:
            hint = f"it may be hung: end it with `kill {pid}` (`kill -9 {pid}` if it stays)"
        return ServiceTimeoutError(
            f"{self._describe()} did not answer within {wait:g} s",
            hint=hint + f"; {TIMEOUT_ENV} sets how long to wait",
        )

    def _gone(self, exc: OSError | None) -> ServiceUnavailableError:
        detail = f" ({exc})" if exc else ""
        return ServiceUnavailableError(
            f"{self._describe()} closed the connection before answering{detail}",
            hint="it probably stopped or crashed: run the command again "
            "(without a service it opens the store itself); check the service's output",
        )

    def watch(
        self, settings: dict[str, Any], args: dict[str, Any], on_message: Callable[[dict[str, Any]], None]
    ) -> None:
        """Ask the service to watch ``settings["paths"]`` and pass each message it streams back
        to ``on_message`` until the service goes away. The watch lasts as long as this connection:
        interrupt (Ctrl+C, SIGTERM) to end it. Until the service says it is watching, a silence
        longer than :func:`client_timeout` is an error; after that, silence is normal.
        """
        wait = client_timeout()
        with self.connection() as sock:
            sock.settimeout(wait)
            with contextlib.suppress(OSError):
                sock.sendall(_encode({"op": "watch", "settings": settings, "args": args}))
            lines = _Lines(sock)
            while True:
                message = self._read_reply(sock, lines, wait)
                on_message(message)
                if message.get("watching") or message.get("ok") is False:
                    break
            sock.settimeout(None)
            while True:
                try:
                    line = lines.next_line()
                except OSError:
                    return
                if line is None:
                    return
                update = decode_message(line) if line.strip() else None
                if update is not None and not update.get("alive"):
                    on_message(update)

    def ping(self) -> dict[str, Any]:
        result = self.request("ping", {}, {}, timeout=CONNECT_TIMEOUT)
        return result if isinstance(result, dict) else {}


def connect(uri: str) -> ServiceClient | None:
    """A client for the service running for ``uri``, or None (then open the store directly).

    Cheap: an ``lstat`` of the socket path and, when it exists, checks that the run folders are
    private and ours, a non-blocking probe of the service's lock (held for the whole life of a
    service, released by the kernel when it dies), and a connection that checks the listener's
    uid. A socket left behind by a crashed service is removed here. Anything unsafe or broken is
    reported once as a warning and the command runs directly.
    """
    if os.environ.get(NO_SERVICE_ENV, "") not in ("", "0"):
        return None
    paths = service_paths(uri)
    try:
        st = os.lstat(paths.socket)
    except OSError:
        return None
    unsafe = _run_dirs_problem(paths)
    if unsafe is not None:
        _warn_once(f"{unsafe.one_line()} (not using the memory service)")
        return None
    if not stat.S_ISSOCK(st.st_mode):
        _warn_once(
            f"{paths.socket} is {_file_kind(st.st_mode)}, not the memory service's socket; "
            "not using the service. Hint: remove it"
        )
        return None
    try:
        held = _lock_is_held(paths.lock)
    except OSError as exc:
        _warn_once(
            f"the memory service's lock file {paths.lock} cannot be used ({exc}); "
            "not using the service. Hint: remove it"
        )
        return None
    if not held:
        clean_stale(paths)
        return None
    client = ServiceClient(paths)
    try:
        client._open().close()
    except ServicePeerError as exc:
        _warn_once(f"{exc.one_line()} (not using the memory service)")
        return None
    except OSError:
        pass  # starting or stopping: the request itself says so, or takes over
    return client


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(_encode(message))


class RequestTooLarge(Exception):
    """A request line grew past :data:`MAX_REQUEST_BYTES` (what was read of it is dropped)."""


class _Lines:
    """Reads newline-terminated messages from a socket, keeping what follows for the next call.

    ``limit`` bounds a line (None: unbounded, for the client reading the service's answers);
    ``deadline`` (seconds) bounds the wait for a whole line, not just each ``recv``.
    """

    def __init__(self, sock: socket.socket, limit: int | None = None) -> None:
        self.sock = sock
        self.limit = limit
        self.buf = bytearray()

    @property
    def pending(self) -> bool:
        return bool(self.buf.strip())

    def next_line(self, deadline: float | None = None) -> bytes | None:
        """The next line (without its newline); at end of stream what is left, or None."""
        until = None if deadline is None else time.monotonic() + deadline
        start = 0
        while True:
            nl = self.buf.find(b"\n", start)
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[: nl + 1]
                return line
            start = len(self.buf)
            size = 65536
            if self.limit is not None:
                if len(self.buf) > self.limit:
                    self.buf.clear()
                    raise RequestTooLarge
                size = min(size, self.limit + 1 - len(self.buf))
            if until is not None:
                left = until - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.sock.settimeout(left)
            part = self.sock.recv(size)
            if not part:
                if self.buf.strip():
                    line = bytes(self.buf)
                    self.buf.clear()
                    return line
                return None
            self.buf += part


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


def decode_message(line: bytes) -> dict[str, Any] | None:
    """One protocol line as a JSON object, or None for anything else (not JSON, not UTF-8, nested
    past the parser's depth, not an object): what a peer sends is outside data."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def error_from_payload(payload: Any) -> MemSearchError:
    """Rebuild the service's error as the same class here (so exit codes and messages match); a
    malformed payload becomes a generic ServiceError rather than a crash."""
    if not isinstance(payload, dict):
        payload = {}
    cls = getattr(errors, str(payload.get("type")), None)
    message = str(payload.get("message", "the memsearch service failed"))
    hint = str(payload.get("hint", ""))
    if isinstance(cls, type) and issubclass(cls, MemSearchError):
        with contextlib.suppress(TypeError):
            return cls(message, hint)
    exc = ServiceError(message, hint)
    with contextlib.suppress(TypeError, ValueError, OverflowError):
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

    def _call(self, op: str, **args: Any) -> Any:
        return self._client.request(op, {**self._settings, "paths": self._paths}, args)

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

        data = dict(self._call("index", force=force))
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
        self._lock_fd: int | None = None
        self._stopped = threading.Event()
        self._stop_requested = threading.Event()
        self._sessions: set[socket.socket] = set()
        self._sessions_lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._beat = threading.local()  # the heartbeat of the request this thread serves
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

        _private_dir(self.paths.lock.parent)
        _private_dir(self.paths.socket.parent)
        for path, kind in ((self.paths.lock, stat.S_ISREG), (self.paths.socket, stat.S_ISSOCK)):
            with contextlib.suppress(FileNotFoundError):
                mode = os.lstat(path).st_mode
                if not kind(mode):
                    raise UnsafeRunDirError(
                        f"{path} is {_file_kind(mode)}, not the memory service's "
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
        self._loop_thread = threading.Thread(target=loop.run_forever, name="memsearch-engine", daemon=True)
        self._loop_thread.start()

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
        self._accept_thread = threading.Thread(target=self._accept_loop, name="memsearch-socket", daemon=True)
        self._accept_thread.start()
        info = {
            "pid": os.getpid(),
            "store": self.paths.store,
            "socket": str(self.paths.socket),
            "started_at": self.started_at,
        }
        atomic_write(self.paths.info, json.dumps(info))

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
        import concurrent.futures

        assert self._loop is not None, "service not started"
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        beat = getattr(self._beat, "send", None)
        if beat is not None:  # a client waits on this thread: tell it, every second, we are alive
            while not concurrent.futures.wait([future], timeout=HEARTBEAT_INTERVAL).done:
                beat()
        return future.result()

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
        # Stop accepting first, and remove the socket: a watch that loses this service must not
        # reconnect to it (it would be waited for below); it takes over once our lock is free.
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            if self._accept_thread is not None:
                self._accept_thread.join(timeout=5)
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.lstat(self.paths.socket).st_mode):
                    self.paths.socket.unlink()
        with self._sessions_lock:
            sessions = list(self._sessions)
        for conn in sessions:  # ends each watch session: its watcher stops, its client sees EOF
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 15
        while self._sessions and time.monotonic() < deadline:
            time.sleep(0.05)
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
        with contextlib.suppress(FileNotFoundError):
            self.paths.info.unlink()
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
                _send(conn, {"ok": False, "error": _error_payload(busy)})

    def _connection(self, conn: socket.socket) -> None:
        """Serve one connection: its requests in order, each within IDLE_TIMEOUT of the last."""
        try:
            with conn:
                try:
                    creds = peer_credentials(conn)
                except OSError:
                    return
                if creds is not None and creds[1] != os.getuid():
                    logger.warning("refused a connection from process %d of uid %d", *creds)
                    return  # not a word to another user's process
                lines = _Lines(conn, MAX_REQUEST_BYTES)
                while not self._stopped.is_set():
                    try:
                        line = lines.next_line(IDLE_TIMEOUT)
                    except RequestTooLarge:
                        self._reply_error(conn, _too_large())
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
            _send(conn, {"ok": False, "error": _error_payload(exc)})

    def _handle(self, conn: socket.socket, line: bytes) -> bool:
        """Answer one request line; False when the connection is done (a watch session ended)."""
        try:
            request = _parse_request(line)
        except ServiceRequestError as exc:
            self._reply_error(conn, exc)
            return True
        if request["op"] == "watch":
            conn.settimeout(None)
            self._watch_session(conn, request)
            return False
        conn.settimeout(30)  # a client that stops reading must not block this thread for ever

        def beat() -> None:
            with contextlib.suppress(OSError):
                _send(conn, {"alive": True})

        self._beat.send = beat
        try:
            op = self._ops[request["op"]]
            settings = request["settings"]
            ms = self.instance(settings) if request["op"] != "ping" else None
            reply: dict[str, Any] = {"ok": True, "result": op(ms, request["args"])}
        except Exception as exc:
            if not isinstance(exc, MemSearchError):
                logger.exception("service request failed")
            reply = {"ok": False, "error": _error_payload(exc)}
        finally:
            self._beat.send = None
        with contextlib.suppress(OSError):
            _send(conn, reply)
        return True

    def _watch_session(self, conn: socket.socket, request: dict[str, Any]) -> None:
        """Serve one ``memsearch watch`` client: index its paths, then stream its watcher's events
        until it hangs up (or the service stops). Watcher updates run on the engine loop."""
        send_lock = threading.Lock()

        def send(message: dict[str, Any]) -> None:
            with send_lock, contextlib.suppress(OSError):
                _send(conn, message)

        args = request["args"]
        self._beat.send = lambda: send({"alive": True})
        try:
            ms = self.instance(request["settings"])
            report = self.run(self._index(ms, False))
        except Exception as exc:
            send({"ok": False, "error": _error_payload(exc)})
            return
        finally:
            self._beat.send = None
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
            ms.search(args["query"], top_k=args["top_k"], source_prefix=args.get("source_prefix"))
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
    await ms.aclose()  # on the engine loop: the provider's client there is closed before it stops


def _too_large() -> ServiceRequestError:
    return ServiceRequestError(
        f"request larger than {MAX_REQUEST_BYTES:,} bytes; the memory service refused it",
        hint="shorten the query or text, or set MEMSEARCH_NO_SERVICE=1 to run it directly",
    )


#: op -> {argument: (types, required)}: what each operation accepts. Anything else is refused
#: before the store is touched.
_ARGS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "ping": {},
    "count": {},
    "reset": {},
    "search": {"query": ((str,), True), "top_k": ((int,), True), "source_prefix": ((str, type(None)), False)},
    "expand": {
        "chunk_hash": ((str,), True),
        "section": ((bool,), False),
        "context_lines": ((int, type(None)), False),
    },
    "index": {"force": ((bool,), False)},
    "index_file": {"path": ((str,), True)},
    "query": {"filter_expr": ((str,), False)},
    "watch": {"debounce_ms": ((int, type(None)), False)},
}


def _parse_request(line: bytes) -> dict[str, Any]:
    """A request line as ``{"op", "settings", "args"}``, checked against :data:`_ARGS` and the
    limits; ServiceRequestError says what is wrong (and the connection stays usable)."""

    def bad(why: str) -> ServiceRequestError:
        return ServiceRequestError(
            f"not a valid memsearch service request: {why}",
            hint='send one JSON object per line: {"op": ..., "settings": {...}, "args": {...}}',
        )

    try:
        request = json.loads(line)
    except UnicodeDecodeError:
        raise bad("it is not UTF-8 text") from None
    except ValueError as exc:
        raise bad(f"invalid JSON ({exc})") from None
    except RecursionError:
        raise bad("JSON nested too deeply") from None
    if not isinstance(request, dict):
        raise bad(f"a JSON {type(request).__name__}, not an object")
    op = request.get("op")
    if not isinstance(op, str) or op not in _ARGS:
        raise bad(f"unknown operation {op!r}")
    settings = request.get("settings") or {}
    args = request.get("args") or {}
    if not isinstance(settings, dict) or not isinstance(args, dict):
        raise bad("'settings' and 'args' must be objects")
    paths = settings.get("paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise bad("'settings.paths' must be a list of strings")
    for name, value in args.items():
        spec = _ARGS[op].get(name)
        if spec is None:
            raise bad(f"unknown argument {name!r} for {op!r}")
        if not isinstance(value, spec[0]) or (isinstance(value, bool) and bool not in spec[0]):
            raise bad(f"argument {name!r} of {op!r} has the wrong type")
    for name, (_types, required) in _ARGS[op].items():
        if required and name not in args:
            raise bad(f"{op!r} needs the argument {name!r}")
    if op == "search":
        if not 1 <= args["top_k"] <= MAX_TOP_K:
            raise ServiceRequestError(
                f"top_k must be between 1 and {MAX_TOP_K} (got {args['top_k']})",
                hint=f"ask for at most {MAX_TOP_K} results",
            )
        if len(args["query"]) > MAX_QUERY_CHARS:
            raise ServiceRequestError(
                f"the query is {len(args['query']):,} characters; the memory service accepts at "
                f"most {MAX_QUERY_CHARS:,}",
                hint="search with a shorter query",
            )
    context_lines = args.get("context_lines")
    if context_lines is not None and not 0 <= context_lines <= MAX_CONTEXT_LINES:
        raise bad(f"context_lines must be between 0 and {MAX_CONTEXT_LINES}")
    return {"op": op, "settings": settings, "args": args}
