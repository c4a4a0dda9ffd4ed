"""This user's memory services, seen and stopped from outside: ``memsearch service status|stop``, and
the cap on services started on demand.

Why: a service keeps a store, its model and its indexes in memory (docs/scaling.md); one started on
demand stays ``service.idle_timeout`` seconds after its last request, so thirty stores searched in
a row meant thirty of them. This module finds every service of this user (an info file under the
run folder whose lock is held), asks each over its socket what it is and how long it has been idle
(``ping``), and asks one to stop (``stop``: it finishes the requests in flight, closes its stores
and exits, as when it is idle). It never signals a process: a PID read from a file may belong to
another process by now, while the socket is checked to be served by this user (``SO_PEERCRED``).
Standard library only (the client side uses it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from memsearch.errors import MemSearchError, ServiceError, ServiceRequestError, ServiceTimeoutError
from memsearch.files import lock_is_held
from memsearch.service.client import CONNECT_TIMEOUT, ServiceClient
from memsearch.service.paths import (
    ServicePaths,
    clean_stale,
    folder_problem,
    read_info_file,
    run_dirs_problem,
    run_folder,
    service_paths,
)

#: Seconds ``memsearch service stop`` waits for a service to let its store go (it finishes the
#: requests in flight first).
STOP_TIMEOUT = 15.0
#: Characters of a service's command line kept in its info file and shown by ``status``.
COMMAND_CHARS = 200


@dataclasses.dataclass(frozen=True)
class Owner:
    """What runs a service: how ``status`` describes it, and whether ``stop`` may stop it."""

    description: str
    stoppable: bool


#: ``MemoryService(owner=...)`` -> what that is. A program (a process holding a ``MemSearch``
#: that serves the others from its threads) is not stopped from outside: it would lose its store
#: in the middle of its own work; it releases the store when it closes its ``MemSearch``.
OWNERS: dict[str, Owner] = {
    "serve": Owner("memsearch serve", stoppable=True),
    "on-demand": Owner("started on demand by a search, an expand or a hook", stoppable=True),
    "watch": Owner("memsearch watch", stoppable=True),
    "program": Owner("a program holding the store (MemSearch)", stoppable=False),
}


def command_line() -> str:
    """This process's command line, shortened to :data:`COMMAND_CHARS` (for the info file)."""
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            raw = fh.read(4 * COMMAND_CHARS)
        text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    except OSError:
        text = ""
    return (text or " ".join([sys.executable, *sys.argv]))[:COMMAND_CHARS]


@dataclasses.dataclass(frozen=True)
class RunningService:
    """One service as ``status`` shows it.

    ``state`` is ``running`` (it answered), ``stopping`` (its socket is gone: it is finishing its
    requests before it exits) or ``not answering`` (stopped with SIGSTOP, or hung). ``pid`` is the
    one the service gave, or the info file's once checked against the process holding the lock
    (None when that cannot be checked); ``idle`` is seconds since its last request finished.
    """

    paths: ServicePaths
    state: str
    pid: int | None
    owner: str
    command: str
    started_at: float | None
    idle: float | None
    idle_timeout: float | None
    rss_bytes: int | None
    problem: str = ""

    @property
    def store(self) -> str:
        return self.paths.store

    @property
    def uptime(self) -> float | None:
        return None if self.started_at is None else max(0.0, time.time() - self.started_at)

    def describe(self) -> str:
        """``the memory service for <store> (pid N, on-demand)``, for messages."""
        pid = f"pid {self.pid}, " if self.pid is not None else ""
        return f"the memory service for {self.store} ({pid}{self.owner})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "pid": self.pid,
            "kind": self.owner,
            "state": self.state,
            "command": self.command,
            "started_at": self.started_at,
            "uptime": self.uptime,
            "idle": self.idle,
            "idle_timeout": self.idle_timeout,
            "rss_bytes": self.rss_bytes,
            "socket": str(self.paths.socket),
            "problem": self.problem,
        }


def list_services(home: Path | None = None) -> list[RunningService]:
    """Every live memory service of this user (under ``home``'s run folder), store by store.

    A service that died without cleaning up (its lock is free) has its files removed here, as
    :func:`~memsearch.service.client.connect` does. An unsafe run folder (a symlink, another user's,
    group/other-accessible) raises :class:`~memsearch.errors.UnsafeRunDirError`: nothing in it is
    trusted.
    """
    run = run_folder(home)
    unsafe = folder_problem(run)
    if unsafe is not None:
        raise unsafe
    try:
        names = sorted(os.listdir(run))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ServiceError(
            f"cannot list the memory services' folder {run} ({exc})",
            hint=f"check the permissions of {run}",
        ) from exc
    services = []
    for name in names:
        if not name.endswith(".json"):
            continue
        info = read_info_file(run / name)
        store = info.get("store")
        if not isinstance(store, str) or not store:
            continue
        paths = service_paths(store, home)
        if paths.info != run / name:
            continue  # not the info file of that store's service
        unsafe = run_dirs_problem(paths)
        if unsafe is not None:
            raise unsafe
        try:
            held = lock_is_held(paths.lock)
        except OSError:
            continue
        if not held:
            with contextlib.suppress(OSError):
                clean_stale(paths)
            continue
        services.append(_inspect(paths, info))
    return services


def _inspect(paths: ServicePaths, info: dict[str, Any]) -> RunningService:
    """Ask a live service what it is (``ping``); its info file speaks for it when it cannot answer."""
    try:
        listening = stat.S_ISSOCK(os.lstat(paths.socket).st_mode)
    except OSError:
        listening = False
    state, problem, answer = "stopping", "", info
    if listening:
        try:
            result = ServiceClient(paths).request("ping", {}, {}, timeout=CONNECT_TIMEOUT)
            answer, state = (result if isinstance(result, dict) else {}), "running"
        except MemSearchError as exc:
            state, problem = "not answering", exc.one_line()
    pid = _int(answer.get("pid"))
    if state != "running" and pid is not None and not _holds(pid, paths.lock):
        pid = None  # the file's PID is not (or no longer) the process holding this store
    owner = answer.get("owner")
    if owner not in OWNERS:  # a service of an earlier memsearch says only whether it is on demand
        owner = "on-demand" if answer.get("on_demand") else "serve"
    return RunningService(
        paths=paths,
        state=state,
        pid=pid,
        owner=str(owner),
        command=str(answer.get("command") or info.get("command") or ""),
        started_at=_float(answer.get("started_at")),
        idle=_float(answer.get("idle")) if state == "running" else None,
        idle_timeout=_float(answer.get("idle_timeout")),
        rss_bytes=rss_bytes(pid) if pid is not None else None,
        problem=problem,
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _holds(pid: int, lock: Path) -> bool:
    """Whether process ``pid`` has ``lock`` open (Linux ``/proc``; a process of ours only)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        entries = os.listdir(fds)
    except OSError:
        return False
    target = str(lock)
    for entry in entries:
        with contextlib.suppress(OSError):
            if os.readlink(fds / entry) == target:
                return True
    return False


def rss_bytes(pid: int) -> int | None:
    """The resident memory of ``pid`` (``VmRSS`` in ``/proc/<pid>/status``), or None."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            with contextlib.suppress(IndexError, ValueError):
                return int(line.split()[1]) * 1024
    return None


@dataclasses.dataclass(frozen=True)
class StopOutcome:
    """What became of one service asked to stop: ``error`` is None once its store was released;
    ``successor`` is the PID of a process that took the store over since (a ``watch`` that was
    using the stopped service, or a command that started a new one)."""

    service: RunningService
    error: MemSearchError | None = None
    successor: int | None = None


def ask_to_stop(service: RunningService, *, end_watches: bool = False) -> MemSearchError | None:
    """Send ``stop`` to a running service; the error that prevented it (None once it agreed or was
    already stopping). A program's service refuses (``ServiceStopRefusedError``). ``end_watches``:
    the ``watch`` commands using it end too, instead of taking the store over (a service of an
    earlier memsearch, which knows no such argument, is asked to stop as it understands)."""
    if service.state == "stopping":
        return None
    if service.state != "running":
        return _not_answering(service)
    client = ServiceClient(service.paths)
    try:
        client.request("stop", {}, {"watches": True} if end_watches else {}, timeout=CONNECT_TIMEOUT)
    except ServiceRequestError:
        try:
            client.request("stop", {}, {}, timeout=CONNECT_TIMEOUT)
        except MemSearchError as exc:
            return exc
    except MemSearchError as exc:
        return exc
    return None


def stop_services(
    services: list[RunningService], timeout: float = STOP_TIMEOUT, *, end_watches: bool = False
) -> list[StopOutcome]:
    """Ask every one of ``services`` to stop (``end_watches``: :func:`ask_to_stop`), then wait (at
    most ``timeout`` seconds in all) until each has let its store go; one outcome per service, in
    order."""
    errors: dict[int, MemSearchError | None] = {
        i: ask_to_stop(s, end_watches=end_watches) for i, s in enumerate(services)
    }
    pending = {i for i, error in errors.items() if error is None}
    successors: dict[int, int | None] = {}
    deadline = time.monotonic() + timeout
    while pending:
        for i in sorted(pending):
            released, successor = _released(services[i])
            if released:
                pending.discard(i)
                successors[i] = successor
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for i in pending:
        errors[i] = _did_not_stop(services[i], timeout)
    return [StopOutcome(s, errors[i], successors.get(i)) for i, s in enumerate(services)]


#: Times ``stop_all`` looks again for services that took a store over while it stopped the others.
STOP_ALL_ROUNDS = 3


def stop_all(home: Path | None = None) -> list[StopOutcome]:
    """Stop every service of this user, their watches with them (``memsearch service stop --all``),
    then any that took a store over meanwhile (a ``watch`` of an earlier memsearch, one a hook
    started on demand): each asked once. What is left is in the outcomes with its reason: a
    program holding its store refuses, and a service still appearing after
    :data:`STOP_ALL_ROUNDS` rounds is named as such."""
    outcomes: list[StopOutcome] = []
    asked: set[tuple[str, int | None]] = set()
    for _ in range(STOP_ALL_ROUNDS):
        services = [s for s in list_services(home) if (s.store, s.pid) not in asked]
        if not services:
            return outcomes
        asked |= {(s.store, s.pid) for s in services}
        outcomes += stop_services(services, end_watches=True)
    for service in list_services(home):
        if (service.store, service.pid) not in asked:
            outcomes.append(StopOutcome(service, _kept_coming(service)))
    return outcomes


def _kept_coming(service: RunningService) -> ServiceError:
    return ServiceError(
        f"{service.describe()} took the store over while the others stopped ({STOP_ALL_ROUNDS} rounds)",
        hint="something keeps starting memory services (an agent's hooks, a script): stop that, then "
        "run `memsearch service stop --all` again",
    )


def _released(service: RunningService) -> tuple[bool, int | None]:
    """(whether ``service`` no longer holds its store, the PID of a process that holds it now)."""
    try:
        held = lock_is_held(service.paths.lock)
    except OSError:
        return True, None
    if not held:
        return True, None
    now = _int(read_info_file(service.paths.info).get("pid"))
    if service.pid is not None and now is not None and now != service.pid:
        return True, now  # its lock is someone else's now: it has gone
    return False, None


def _not_answering(service: RunningService) -> ServiceTimeoutError:
    if service.pid is None:
        hint = "find the process holding it (`fuser` on its lock file) and end it"
    else:
        hint = (
            f"if it is stopped, resume it with `kill -CONT {service.pid}` and stop it again; "
            f"if it hangs, end it with `kill {service.pid}`"
        )
    return ServiceTimeoutError(
        f"{service.describe()} is not answering, so it cannot be asked to stop", hint=hint
    )


def _did_not_stop(service: RunningService, timeout: float) -> ServiceTimeoutError:
    pid = f"`kill {service.pid}`" if service.pid is not None else "ending its process"
    return ServiceTimeoutError(
        f"{service.describe()} agreed to stop but still holds the store after {timeout:g} s",
        hint=f"it finishes the requests in flight first; check `memsearch service status`, or end it "
        f"with {pid}",
    )


def make_room(cap: int, keep: str, home: Path | None = None) -> list[RunningService]:
    """Before a service is started on demand for the store ``keep``: ask the least recently used
    services started on demand to stop until fewer than ``cap`` remain, and return them. Only
    on-demand services are ever asked; ``serve``, ``watch`` and programs count for nothing here.
    Does not wait for them to exit (they finish their requests in flight, then go)."""
    try:
        services = list_services(home)
    except MemSearchError:
        return []
    on_demand = [s for s in services if s.owner == "on-demand" and s.state != "stopping" and s.store != keep]
    excess = len(on_demand) - (cap - 1)
    if excess <= 0:
        return []
    idle_first = sorted(
        (s for s in on_demand if s.state == "running"), key=lambda s: s.idle or 0.0, reverse=True
    )
    return [s for s in idle_first[:excess] if ask_to_stop(s) is None]
