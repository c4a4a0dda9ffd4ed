"""Starting a store's memory service on demand, so every command after the first is warm.

Why: a CLI ``search`` or an agent hook that opens the store itself pays the start-up every time (the
store, jieba, the model: about a second); the memory service pays it once. The CLI's read commands
(``search``, ``expand``) and the agent hooks (recall, indexing after a turn) therefore start one when
none runs for their store (:func:`start_service`), and it exits by itself after
``service.idle_timeout`` seconds without a connection. Library use (``MemSearch``) never starts one.

Off with ``service.autostart = false`` or ``MEMSEARCH_SERVICE_AUTOSTART=0``; the idle period is
``service.idle_timeout`` or ``MEMSEARCH_SERVICE_IDLE_TIMEOUT`` (seconds). Two commands starting at
once start one service: the starter holds ``<run>/<key>.start`` (``flock``) from its check to the
service's first answer, and the service's own lock refuses a second server anyway. Standard library
only (the client side).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

from memsearch.errors import MemSearchError, UnsafeRunDirError
from memsearch.service.client import NO_SERVICE_ENV, ServiceClient, connect, warn_once
from memsearch.service.paths import lock_is_held, private_dir, service_paths

#: Set to 0 to never start a service on demand (a running one is still used).
AUTOSTART_ENV = "MEMSEARCH_SERVICE_AUTOSTART"
#: Seconds without a connection after which a service started on demand exits.
IDLE_ENV = "MEMSEARCH_SERVICE_IDLE_TIMEOUT"
DEFAULT_IDLE_TIMEOUT = 300.0
#: Seconds a command waits for the service it started to answer; then it runs directly.
START_TIMEOUT = 30.0

_FALSE = ("0", "false", "no", "off")
_TRUE = ("1", "true", "yes", "on")


def autostart_enabled(configured: bool = True) -> bool:
    """``MEMSEARCH_SERVICE_AUTOSTART`` when set to a yes/no word, else ``configured``; never with
    ``MEMSEARCH_NO_SERVICE`` (which keeps every command off the service)."""
    if os.environ.get(NO_SERVICE_ENV, "") not in ("", "0"):
        return False
    raw = os.environ.get(AUTOSTART_ENV, "").strip().lower()
    if raw in _FALSE:
        return False
    if raw in _TRUE:
        return True
    return configured


def idle_timeout(configured: float = DEFAULT_IDLE_TIMEOUT) -> float:
    """``MEMSEARCH_SERVICE_IDLE_TIMEOUT`` when it is a positive number, else ``configured``."""
    raw = os.environ.get(IDLE_ENV, "").strip()
    with contextlib.suppress(ValueError):
        value = float(raw)
        if value > 0:
            return value
    return configured


def start_service(uri: str, *, idle: float) -> ServiceClient | None:
    """A client for the service of ``uri``, starting one (``memsearch serve --on-demand``) when none
    runs; None when that did not work within :data:`START_TIMEOUT` (the caller then opens the store
    itself, as it would have without this)."""
    paths = service_paths(uri)
    try:
        private_dir(paths.lock.parent)
        private_dir(paths.socket.parent)
    except UnsafeRunDirError as exc:
        warn_once(f"{exc.one_line()} (not starting the memory service)")
        return None
    import fcntl

    deadline = time.monotonic() + START_TIMEOUT
    try:
        fd = os.open(
            paths.lock.with_suffix(".start"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError as exc:
        warn_once(f"cannot start the memory service ({exc}); running directly")
        return None
    try:
        while True:  # another command may be starting it: wait for that, then use its service
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.02)
        return _wait_or_spawn(uri, idle, deadline)
    finally:
        os.close(fd)  # releases the start lock


def _wait_or_spawn(uri: str, idle: float, deadline: float) -> ServiceClient | None:
    paths = service_paths(uri)
    log = paths.lock.with_suffix(".log")
    child: subprocess.Popen[bytes] | None = None
    spawns = 0
    while time.monotonic() < deadline:
        client = connect(uri)
        if client is not None:
            with contextlib.suppress(MemSearchError):
                client.ping()
                _spawned(child)
                return client
        elif child is not None and child.poll() is not None and not lock_is_held(paths.lock):
            if child.returncode != 0 or spawns >= 2:
                warn_once(f"the memory service did not start (see {log}); running directly")
                return None
            child = None  # it found another service stopping and left: start again
        if child is None and not lock_is_held(paths.lock):
            child = _spawn(paths.store, idle, log)
            spawns += 1
        time.sleep(0.02)
    _spawned(child)
    return None


def _spawned(child: subprocess.Popen[bytes] | None) -> None:
    """The service outlives this command on purpose: mark its Popen handled (no ResourceWarning)."""
    if child is not None and child.returncode is None:
        child.returncode = 0


def _spawn(uri: str, idle: float, log: os.PathLike[str]) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "memsearch",
        "serve",
        "--milvus-uri",
        uri,
        "--on-demand",
        "--idle-timeout",
        f"{idle:g}",
    ]
    with open(log, "ab") as out:  # the child keeps its own descriptor; one line per start
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # not in the terminal's process group: Ctrl+C there is not for it
            close_fds=True,
        )
    return child
