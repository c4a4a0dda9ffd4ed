"""Starting a store's memory service on demand, so every command after the first is warm.

Why: a CLI ``search`` or an agent hook that opens the store itself pays the start-up every time (the
store, jieba, the model: about a second); the memory service pays it once. The CLI's read commands
(``search``, ``expand``) and the agent hooks (recall, indexing after a turn) therefore start one when
none runs for their store (:func:`start_service`), and it exits by itself after
``service.idle_timeout`` seconds without a connection. Library use (``MemSearch``) never starts one.

Off with ``service.autostart = false`` or ``MEMSEARCH_SERVICE_AUTOSTART=0``; the idle period is
``service.idle_timeout`` or ``MEMSEARCH_SERVICE_IDLE_TIMEOUT`` (seconds). Two commands starting at
once start one service: the starter holds ``<run>/<key>.start`` (``flock``) from its check to the
service's first answer, and the service's own lock refuses a second server anyway.

Services do not pile up: at most ``service.max_on_demand`` (``MEMSEARCH_SERVICE_MAX_ON_DEMAND``,
default 3) started on demand run at once per user. Before starting one more, the starter asks the
least recently used of them to stop (:func:`memsearch.service.manage.make_room`); the count, that
request and the start happen under ``<run>/on-demand.lock``, so starters of different stores do not
both see room for one. ``serve``, ``watch`` and programs are never stopped for this.

A read that cannot succeed starts nothing (:func:`store_readable`): a Milvus Lite database that does
not exist, or lacks the collection, is seen from its directory without opening it; the command then
opens the store itself and prints its one error line, and no service is left waiting for a store
that is not there. Standard library only (the client side).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.config.envvars import env_flag, env_number
from memsearch.errors import MemSearchError, UnsafeRunDirError
from memsearch.service.client import ServiceClient, connect, no_service, warn_once
from memsearch.service.paths import is_dir, lock_is_held, private_dir, service_paths

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig

#: Set to 0 to never start a service on demand (a running one is still used).
AUTOSTART_ENV = "MEMSEARCH_SERVICE_AUTOSTART"
#: Seconds without a connection after which a service started on demand exits.
IDLE_ENV = "MEMSEARCH_SERVICE_IDLE_TIMEOUT"
DEFAULT_IDLE_TIMEOUT = 300.0
#: The most services started on demand that run at once (per user); see the module docstring.
MAX_ON_DEMAND_ENV = "MEMSEARCH_SERVICE_MAX_ON_DEMAND"
DEFAULT_MAX_ON_DEMAND = 3
#: Seconds a command waits for the service it started to answer; then it runs directly.
START_TIMEOUT = 30.0
#: Milvus Lite 3's layout inside a database directory (``milvus_lite.db``): the default database's
#: collections are ``collections/<name>/`` with a ``schema.json``; aliases are in ``aliases.json``.
LITE_COLLECTIONS = "collections"
LITE_SCHEMA = "schema.json"
LITE_ALIASES = "aliases.json"


def autostart_enabled(configured: bool = True) -> bool:
    """``MEMSEARCH_SERVICE_AUTOSTART`` when set to a yes/no word, else ``configured``; never with
    ``MEMSEARCH_NO_SERVICE`` (which keeps every command off the service)."""
    return not no_service() and env_flag(AUTOSTART_ENV, default=configured)


def idle_timeout(configured: float = DEFAULT_IDLE_TIMEOUT) -> float:
    """``MEMSEARCH_SERVICE_IDLE_TIMEOUT`` when set (checked against ``service.idle_timeout``'s
    range), else ``configured``."""
    value = env_number(IDLE_ENV)
    return configured if value is None else float(value)


def max_on_demand(configured: int = DEFAULT_MAX_ON_DEMAND) -> int:
    """``MEMSEARCH_SERVICE_MAX_ON_DEMAND`` when set (checked against ``service.max_on_demand``'s
    range), else ``configured``."""
    value = env_number(MAX_ON_DEMAND_ENV)
    return configured if value is None else int(value)


def start_for(cfg: MemSearchConfig) -> ServiceClient | None:
    """For ``open_memory(start=True)``: the service of ``cfg``'s store, started when none runs and
    the settings allow it (:func:`autostart_enabled`), with its idle period and the cap; None when
    the caller should open the store itself."""
    if not autostart_enabled(cfg.service.autostart):
        return None
    return start_service(
        cfg.milvus.uri,
        idle=idle_timeout(cfg.service.idle_timeout),
        collection=cfg.milvus.collection,
        cap=max_on_demand(cfg.service.max_on_demand),
    )


def store_readable(uri: str, collection: str | None = None) -> bool:
    """Whether a read of ``collection`` at ``uri`` can succeed, judged without opening the store: a
    Milvus Lite path must be a directory ending in ``.db`` that holds the collection (or an alias of
    it, Milvus Lite 3's layout; see :data:`LITE_COLLECTIONS`). A server URI is always worth asking:
    only the server knows."""
    from memsearch.store.uri import resolve_uri

    path = resolve_uri(uri).path
    if path is None:
        return True
    if path.suffix != ".db" or not is_dir(path):
        return False
    if collection is None:
        return True
    if not collection or "/" in collection or collection in (".", ".."):
        return False
    collections = path / LITE_COLLECTIONS
    if _is_file(collections / collection / LITE_SCHEMA):
        return True
    try:
        aliases = json.loads((path / LITE_ALIASES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    target = aliases.get(collection) if isinstance(aliases, dict) else None
    return isinstance(target, str) and "/" not in target and _is_file(collections / target / LITE_SCHEMA)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def start_service(
    uri: str, *, idle: float, collection: str | None = None, cap: int = DEFAULT_MAX_ON_DEMAND
) -> ServiceClient | None:
    """A client for the service of ``uri``, starting one (``memsearch serve --on-demand``) when none
    runs; None when that did not work within :data:`START_TIMEOUT`, or when a read of ``collection``
    there cannot succeed (:func:`store_readable`): the caller then opens the store itself, as it
    would have without this, and says what is wrong. Starting one when ``cap`` services started on
    demand run first asks the least recently used of them to stop."""
    if not store_readable(uri, collection):
        return None
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
        with contextlib.ExitStack() as room:
            return _wait_or_spawn(uri, idle, deadline, cap, room)
    finally:
        os.close(fd)  # releases the start lock


def _wait_or_spawn(
    uri: str, idle: float, deadline: float, cap: int, room: contextlib.ExitStack
) -> ServiceClient | None:
    """Use the service once it answers, starting it when nobody holds the store. ``room`` holds the
    per-user start lock (:func:`_start_lock`) from the first start until the caller returns, so the
    count of services started on demand that :func:`~memsearch.service.manage.make_room` sees
    includes this one by the time another starter looks."""
    from memsearch.service.manage import make_room

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
            if spawns == 0:
                room.enter_context(_start_lock(paths.lock.parent, deadline))
                make_room(cap, paths.store)
            child = _spawn(paths.store, idle, log)
            spawns += 1
        time.sleep(0.02)
    _spawned(child)
    return None


@contextlib.contextmanager
def _start_lock(run: Path, deadline: float) -> Iterator[None]:
    """``<run>/on-demand.lock`` (``flock``), held while a service started on demand is counted,
    room is made for it and it comes up; waits for another starter until ``deadline`` at most (and
    then starts without it: the cap is a bound on memory, not worth a failed command)."""
    import fcntl

    try:
        fd = os.open(run / "on-demand.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        yield
        return
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


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
