"""The memory service's client: find a store's service and send it requests (what each operation
sends and gets back is its row of ``memsearch.engine.operations``).

Standard library only (a test checks it in a fresh process), so a routed ``memsearch search`` never
loads pymilvus or onnxruntime, nor asyncio. A client gives up on a silent service after
:func:`client_timeout` seconds, and checks that the process at the other end of the socket runs as
us before it sends anything.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsearch.callerenv import snapshot
from memsearch.engine.operations import OPERATIONS
from memsearch.errors import (
    ServiceError,
    ServiceGoneError,
    ServicePeerError,
    ServiceRequestError,
    ServiceTimeoutError,
    ServiceUnavailableError,
)
from memsearch.files import lock_is_held
from memsearch.service.paths import (
    ServicePaths,
    clean_stale,
    file_kind,
    read_info,
    run_dirs_problem,
    service_paths,
)
from memsearch.service.protocol import (
    MAX_REQUEST_BYTES,
    Lines,
    decode_message,
    encode,
    error_from_payload,
    peer_credentials,
)

#: Set to 1 to make every command open the store directly, even when a service is running.
NO_SERVICE_ENV = "MEMSEARCH_NO_SERVICE"
#: Seconds a client waits for the first (and each next) byte from the service before giving up.
TIMEOUT_ENV = "MEMSEARCH_SERVICE_TIMEOUT"
DEFAULT_CLIENT_TIMEOUT = 5.0
#: Heartbeats prove the service alive, not that a request progresses: a read (a search, an
#: expand, a count) waits through them at most this many times the timeout in all (a cold engine
#: loads its model meanwhile), then gives up. Writes wait as long as heartbeats come (each step
#: of an index run has its own deadline: embedding.timeout, milvus.lock_timeout).
READ_PATIENCE = 6
READS = frozenset(op.op for op in OPERATIONS.values() if op.read)
#: A Unix socket path must fit in sun_path (108 bytes on Linux, 104 on macOS).
_MAX_SOCKET_PATH = 100
CONNECT_TIMEOUT = 2.0


def client_timeout() -> float:
    """How long a client waits for the service to say anything (``MEMSEARCH_SERVICE_TIMEOUT``).

    The service answers within milliseconds, or sends a heartbeat every second while it works; a
    silent service is stopped (SIGSTOP) or hung, and waiting longer would only hang the agent.
    """
    from memsearch.config.envvars import env_number

    return env_number(TIMEOUT_ENV) or DEFAULT_CLIENT_TIMEOUT


def no_service() -> bool:
    """``MEMSEARCH_NO_SERVICE`` is a yes: every command opens its store itself."""
    from memsearch.config.envvars import env_flag

    return env_flag(NO_SERVICE_ENV)


_warned: set[str] = set()


def warn_once(message: str) -> None:
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

#: Requests that use no engine, so carry no credentials.
_MANAGEMENT = frozenset({"ping", "stop"})


def _caller_env(op: str) -> dict[str, Any]:
    """What a request carries so that the owner serves it with this process's own credentials and
    endpoints, never its own (``memsearch.callerenv``)."""
    return {} if op in _MANAGEMENT else {"env": snapshot()}


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
        except OSError as exc:  # no socket, or nobody listening on it: its owner has gone
            raise ServiceGoneError(
                f"{self._describe()} is not answering ({exc})",
                hint="run the command again (the next owner of the store takes over)",
            ) from exc

    def request(
        self, op: str, settings: dict[str, Any], args: dict[str, Any], *, timeout: float | None = None
    ) -> Any:
        """Send one request and return its result, re-raising the service's error as ours.

        ``timeout`` (default :func:`client_timeout`) bounds each silence, not the whole request:
        the service sends a heartbeat every second while it works, so a long ``index`` is fine
        and a stopped service is noticed within the deadline.
        """
        data = encode({"op": op, "settings": settings, "args": args, **_caller_env(op)})
        if len(data) > MAX_REQUEST_BYTES:
            raise ServiceRequestError(
                f"this request is {len(data):,} bytes; the memory service accepts at most "
                f"{MAX_REQUEST_BYTES:,}",
                hint="shorten the query or text, or set MEMSEARCH_NO_SERVICE=1 to run it directly",
            )
        wait = client_timeout() if timeout is None else timeout
        patience = wait * READ_PATIENCE if op in READS else None
        with self.connection() as sock:
            sock.settimeout(wait)
            with contextlib.suppress(OSError):  # refused (busy) or died: its answer, if any, waits
                sock.sendall(data)
            reply = self._read_reply(sock, Lines(sock), wait, patience, op)
        if reply.get("ok"):
            return reply.get("result")
        raise error_from_payload(reply.get("error") or {})

    def _read_reply(
        self, sock: socket.socket, lines: Lines, wait: float, patience: float | None = None, op: str = ""
    ) -> dict[str, Any]:
        """The next message that is not a heartbeat, or one of our errors: after ``wait`` seconds
        of silence, or ``patience`` seconds of heartbeats without an answer."""
        started = time.monotonic()
        while True:
            if patience is not None and time.monotonic() - started > patience:
                raise self._stuck(wait, working=(op, patience))
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

    def _stuck(self, wait: float, working: tuple[str, float] | None = None) -> ServiceTimeoutError:
        pid = read_info(self.paths).get("pid")
        if working is not None:
            op, patience = working
            return ServiceTimeoutError(
                f"{self._describe()} has been working on this {op} for {patience:g} s without an "
                "answer (it is alive, but the request may hang in it)",
                hint="run it again; if it keeps hanging, restart the service with `memsearch service "
                f"stop`; {TIMEOUT_ENV} sets how long to wait (a read waits {READ_PATIENCE} times that)",
            )
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

    def _gone(self, exc: OSError | None) -> ServiceGoneError:
        detail = f" ({exc})" if exc else ""
        return ServiceGoneError(
            f"{self._describe()} closed the connection before answering{detail}",
            hint="it probably stopped or crashed: run the command again "
            "(the next owner of the store takes over); check the service's output",
        )

    def watch(
        self,
        settings: dict[str, Any],
        args: dict[str, Any],
        on_message: Callable[[dict[str, Any]], None],
        on_connect: Callable[[socket.socket], None] | None = None,
    ) -> None:
        """Ask the service to watch ``settings["paths"]`` and pass each message it streams back
        to ``on_message`` until the service goes away. The watch lasts as long as this connection:
        interrupt (Ctrl+C, SIGTERM) to end it. Until the service says it is watching, a silence
        longer than :func:`client_timeout` is an error; after that, silence is normal.
        """
        wait = client_timeout()
        with self.connection() as sock:
            if on_connect is not None:  # e.g. to end the watch from another thread (shutdown)
                on_connect(sock)
            sock.settimeout(wait)
            with contextlib.suppress(OSError):
                sock.sendall(
                    encode({"op": "watch", "settings": settings, "args": args, **_caller_env("watch")})
                )
            lines = Lines(sock)
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
    found = probe(uri)
    return found if isinstance(found, ServiceClient) else None


#: :func:`probe`'s answer when the run files are not to be trusted (reported once as a warning).
UNTRUSTED = "untrusted"


def probe(uri: str, *, anyway: bool = False) -> ServiceClient | str | None:
    """:func:`connect`, telling apart why there is no client: None when no service runs (this
    process may become the owner), :data:`UNTRUSTED` when the run files are unsafe or broken (it
    must not: it opens the store without serving it). ``anyway``: look even under
    ``MEMSEARCH_NO_SERVICE`` (a direct run whose store a service took meanwhile)."""
    if no_service() and not anyway:
        return None
    paths = service_paths(uri)
    try:
        st = os.lstat(paths.socket)
    except OSError:
        return None
    unsafe = run_dirs_problem(paths)
    if unsafe is not None:
        warn_once(f"{unsafe.one_line()} (not using the memory service)")
        return UNTRUSTED
    if not stat.S_ISSOCK(st.st_mode):
        warn_once(
            f"{paths.socket} is {file_kind(st.st_mode)}, not the memory service's socket; "
            "not using the service. Hint: remove it"
        )
        return UNTRUSTED
    try:
        held = lock_is_held(paths.lock)
    except OSError as exc:
        warn_once(
            f"the memory service's lock file {paths.lock} cannot be used ({exc}); "
            "not using the service. Hint: remove it"
        )
        return UNTRUSTED
    if not held:
        clean_stale(paths)
        return None
    client = ServiceClient(paths)
    try:
        client._open().close()
    except ServicePeerError as exc:
        warn_once(f"{exc.one_line()} (not using the memory service)")
        return UNTRUSTED
    except FileNotFoundError:
        return None  # the socket went away since the lstat: the service is stopping
    except OSError:
        pass  # starting or stopping: the request itself says so, or takes over
    return client


#: How ``stats`` names who runs a store's service (``MemoryService.owner``).
_HOW = {"on-demand": "started on demand", "program": "a program that holds the store"}


def describe_service(uri: str) -> str:
    """One line on the service running for ``uri`` ("" when none runs), for ``memsearch stats``."""
    client = connect(uri)
    if client is None:
        return ""
    info = read_info(client.paths)
    how = _HOW.get(str(info.get("owner")), "memsearch serve / watch")
    if info.get("owner") == "program" and info.get("command"):
        how += f": {info['command']}"
    idle = info.get("idle_timeout")
    until = f", exits after {idle:g} s idle" if isinstance(idle, (int, float)) else ""
    return f"Memory service: running (pid {info.get('pid', '?')}, {how}{until})"


def describe_fast_path(uri: str) -> str:
    """The Lite fast search path's state in the process that owns ``uri``'s store, for ``memsearch
    stats``: the running service's (it answers every search), else this process's (it opens the
    store itself). "" for a server URI, and while the fast path is plainly on: stats prints a line
    only when searches are slower than they should be."""
    from memsearch.store.lite import fast_path_line
    from memsearch.store.uri import resolve_uri

    if resolve_uri(uri).path is None:
        return ""
    client = connect(uri)
    line = fast_path_line() if client is None else str(client.ping().get("lite_fast_path") or "")
    return "" if re.fullmatch(r"Lite fast path: on \([^()]*\)", line) else line
