"""Who answers for a store: one owner per Milvus Lite store, every other memsearch process its client.

Why: Milvus Lite lets one process open a database. Every way into memory (a ``MemSearch`` in a
program, a CLI command, an agent hook, ``watch``, ``serve``) therefore reaches a Lite store through
the one process that has it open, its *owner*. Whoever needs the store first either finds the owner
and sends it the operation (a client of its memory service), or becomes the owner: it opens the
store itself and, for as long as it holds it, serves the others on the store's socket from threads
of its own process (:class:`~memsearch.service.server.MemoryService`). A CLI read command or a hook
may instead start a background service (``memsearch.service.ondemand``), so the next command finds
everything warm.

When the owner goes away (its program closes the store or exits, it idles out, it is killed), the
next request of any client finds no owner and one of them takes over; a request that was in flight
(:class:`~memsearch.errors.ServiceGoneError`) is sent again to the new owner. That is safe because
every operation is idempotent: chunk IDs are content hashes, so indexing twice stores each chunk
once, and dropping a dropped collection is a no-op.

This module is the one seam: :func:`perform` runs one operation at the owner, or here.
Standard library only until this process claims a store (the server is imported then).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from memsearch.errors import (
    MemSearchError,
    PrivatePathError,
    ServiceGoneError,
    ServiceRunningError,
    ServiceUnavailableError,
    StoreLockedError,
)
from memsearch.files import lock_is_held
from memsearch.service.client import UNTRUSTED, ServiceClient, no_service, probe, warn_once
from memsearch.service.paths import service_paths, store_key

if TYPE_CHECKING:
    from memsearch.engine.operations import Operation
    from memsearch.service.server import Engine, MemoryService


#: Seconds a caller waits through a handover (one owner stopping, the next starting) before it
#: gives up with one clear error.
HANDOVER_TIMEOUT = 15.0


class _Owned:
    """A store this process owns: its service, and the memories using it (the store is let go when
    the last of them closes, or when the process exits)."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service
        self.holders: weakref.WeakSet[object] = weakref.WeakSet()


_owned: dict[str, _Owned] = {}
_lock = threading.RLock()
_exit_hook = False


def is_lite(uri: str) -> bool:
    from memsearch.store.uri import resolve_uri

    return resolve_uri(uri).path is not None


def _claim(uri: str, holder: object, engine: Engine) -> bool:
    """Become the owner of ``uri``'s store, serving it from this process; False when another
    process holds it (or is taking it). A run folder we cannot trust (another user's, a symlink)
    is warned about once, and then this process opens the store without serving it."""
    from memsearch.service.server import MemoryService

    key = store_key(uri)
    with _lock:
        owned = _owned.get(key)
        if owned is not None:
            owned.holders.add(holder)
            return True
        service = MemoryService(uri, engine=engine, owner="program")
        try:
            service.acquire()
        except ServiceRunningError:
            return False
        except PrivatePathError:  # ~/.memsearch itself is unusable: so is everything after this
            raise
        except MemSearchError as exc:
            warn_once(f"{exc.one_line()} (not using the memory service)")
            return True
        try:
            service.start()
        except MemSearchError as exc:
            service.stop()
            warn_once(f"{exc.one_line()} (not using the memory service)")
            return True
        owned = _owned[key] = _Owned(service)
        owned.holders.add(holder)
        _at_exit()
        return True


def _at_exit() -> None:
    global _exit_hook
    if not _exit_hook:
        _exit_hook = True
        atexit.register(release_all)


def let_go(uri: str, holder: object) -> None:
    """``holder`` is done with the store (its ``close``): when no other memory of this process uses
    it, stop serving it and release it for the next owner. The holder has closed its own store
    first, so the database is free before the service's lock is."""
    key = store_key(uri)
    with _lock:
        owned = _owned.get(key)
        if owned is None:
            return
        owned.holders.discard(holder)
        if len(owned.holders):
            return
        del _owned[key]
    owned.service.stop()


def release_all() -> None:
    """Stop serving every store this process owns (at exit: clients take over at once instead of
    finding a dead socket)."""
    with _lock:
        owned = list(_owned.values())
        _owned.clear()
    for entry in owned:
        entry.service.stop()


def owner(
    uri: str, holder: object, *, engine: Engine, spawn: Callable[[], ServiceClient | None] | None = None
) -> ServiceClient | None:
    """The client of the process that owns ``uri``'s store, or None when the operation runs here:
    this process owns it (claimed now if nobody did), or the store needs no owner (a server URI
    with no service running, or ``MEMSEARCH_NO_SERVICE``).

    ``engine`` builds the engines of a store this process comes to own (``memsearch.core.engine``,
    passed in: this module never imports the engine). ``spawn`` (the CLI's read commands, the
    hooks) starts a background service instead of claiming the store here; when it cannot, this
    process claims it. A store whose lock is held while its socket is not there yet (an owner
    starting or stopping) is waited for, up to
    :data:`HANDOVER_TIMEOUT`.
    """
    if no_service():
        return None
    with _lock:
        entry = _owned.get(store_key(uri))
        if entry is not None:
            entry.holders.add(holder)
            return None
    lite = is_lite(uri)
    deadline = time.monotonic() + HANDOVER_TIMEOUT
    while True:
        found = probe(uri)
        if isinstance(found, ServiceClient):
            return found
        if found == UNTRUSTED:  # warned: this process neither uses nor makes those run files
            return None
        if spawn is not None:
            client = spawn()
            if client is not None:
                return client
            spawn = None  # it could not start one: own the store here instead
        if not lite or _claim(uri, holder, engine):
            return None
        if time.monotonic() > deadline:
            raise _handover_failed(uri)
        time.sleep(0.02)


def _handover_failed(uri: str) -> ServiceUnavailableError:
    paths = service_paths(uri)
    held = False
    with contextlib.suppress(OSError):
        held = lock_is_held(paths.lock)
    return ServiceUnavailableError(
        f"no memsearch process answered for {paths.store} within {HANDOVER_TIMEOUT:g} s"
        + (" (one holds its lock but does not listen)" if held else ""),
        hint="see `memsearch service status`; stop a stuck process with `memsearch service stop`",
    )


async def perform(
    holder: Holder, op: Operation, args: dict[str, Any], *, engine: Engine, driven: bool = False
) -> Any:
    """``op`` with its checked ``args``, run where ``holder``'s store is owned: one request to the
    owning process, or ``holder``'s own ``op.here`` method when this process owns it (claimed now if
    nobody did) or ``holder`` is an owner's engine. An owner that goes away before answering is
    replaced (this process may become the owner, and then it runs here), and the request is sent
    again: the one "do it here" of every face of a memory (``Memory``, ``MemSearch``, the service).

    ``driven``: a synchronous caller drives this coroutine without an event loop
    (``interface.drive``), so it must never suspend: work here that embeds runs on a loop of its
    own. Otherwise (``MemSearch``'s awaitable face) that work is awaited on the caller's loop.
    ``engine`` builds the engines of a store this process comes to own (see :func:`owner`).
    """
    if getattr(holder, "_routed", False):  # (an engine, or one built without __init__: here)
        spawn = holder._spawn
        deadline = time.monotonic() + HANDOVER_TIMEOUT
        while (client := owner(holder._uri, holder, engine=engine, spawn=spawn)) is not None:
            try:
                return op.ask(client, holder._request_settings(), args)
            except ServiceGoneError:
                if time.monotonic() > deadline:
                    raise
                spawn = None  # take the store over here rather than start yet another service
                time.sleep(0.02)
    try:
        work = getattr(holder, op.here)(**args)
        if not op.embeds:
            return work
        return _run_alone(work) if driven else await work
    except StoreLockedError:
        client = _taken_over(holder, op)
        if client is None:
            raise
        return op.ask(client, holder._request_settings(), args)


def _taken_over(holder: Holder, op: Operation) -> ServiceClient | None:
    """The memory service that took ``holder``'s store while ``op`` worked here, when ``op``
    hands its work over (``Operation.hands_over``): a direct index (``MEMSEARCH_NO_SERVICE``)
    embeds everything into the cache before it opens the store, and a ``serve`` started meanwhile
    holds the store by then; that service stores the run from the cache (nothing is embedded
    twice) instead of the run ending with nothing stored. None: the holder is not such a service
    (it is waited for, then named, as before)."""
    if not op.hands_over or not getattr(holder, "_routed", False) or not is_lite(holder._uri):
        return None  # (an owner's engine, or a store no service can hold)
    found = probe(holder._uri, anyway=True)
    if not isinstance(found, ServiceClient):
        return None
    try:
        pid = found.ping().get("pid")
    except MemSearchError:  # it is going away as well: the run's error stands
        return None
    if pid == os.getpid():  # this process serves the store: something else holds the database
        return None
    warn_once(
        f"the memory service for {found.paths.store} (pid {pid or '?'}) took the store while this run "
        "worked; the run is handed to it (what was embedded here is taken from the embedding cache)"
    )
    return found


def _run_alone(work: Coroutine[Any, Any, Any]) -> Any:
    """Run ``work`` to its end on a loop of its own: this thread's, or, when this thread already
    runs one (a synchronous ``Memory`` call from inside async code), a helper thread's."""
    import asyncio

    if not loop_running():
        return asyncio.run(work)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="memsearch-memory") as pool:
        return pool.submit(asyncio.run, work).result()


def loop_running() -> bool:
    """Whether this thread runs an event loop (asyncio is not imported for the question)."""
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and asyncio._get_running_loop() is not None


class Holder(Protocol):
    """What :func:`perform` needs of a memory (``memsearch.core.MemSearch``)."""

    _uri: str
    _routed: bool
    _spawn: Callable[[], ServiceClient | None] | None

    def _request_settings(self) -> dict[str, Any]: ...
