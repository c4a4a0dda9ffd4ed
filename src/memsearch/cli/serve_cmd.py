"""``memsearch serve``: run the local memory service for a store in the foreground."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import click

from memsearch.cli.options import common_options, resolve

if TYPE_CHECKING:
    from memsearch.service.server import MemoryService


@click.command("serve")
@common_options
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Exit after this many seconds without a connection (default: run until stopped).",
)
@click.option(
    "--on-demand",
    is_flag=True,
    hidden=True,
    help="Started by a command that needed it: no warm-up (that command's request loads what it "
    "needs), and exit after service.idle_timeout seconds idle unless --idle-timeout says otherwise.",
)
def serve(idle_timeout: float | None, on_demand: bool, **flags: Any) -> None:
    """Run the memory service for a store (foreground; Ctrl+C or SIGTERM stops it).

    While it runs, `search`, `expand`, `stats`, `index` and the agent hooks of every process use it
    instead of opening the store themselves: no lock conflicts, and no start-up cost per command.
    `search`, `expand` and the hooks also start one by themselves when none runs (see
    service.autostart); that one exits after service.idle_timeout seconds idle.
    """
    from memsearch.core import engine, engine_settings
    from memsearch.service.ondemand import idle_timeout as configured_idle
    from memsearch.service.server import MemoryService

    cfg = resolve(flags)
    if on_demand and idle_timeout is None:
        idle_timeout = configured_idle(cfg.service.idle_timeout)
    owner = "on-demand" if on_demand else "serve"
    service = MemoryService(cfg.milvus.uri, engine=engine, idle_timeout=idle_timeout, owner=owner)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: _stop_soon(service))
    if not _acquire_or_stand_by(service, on_demand):
        click.echo("Service stopped.", err=True)
        return
    try:
        service.start()
        if on_demand:
            service.ready = True
        else:
            service.warm(engine_settings(cfg))
        click.echo(f"memsearch service for {service.paths.store} on {service.paths.socket}", err=True)
        service.wait()
    finally:
        service.stop()
    click.echo("Service stopped.", err=True)
    _leave_hung_work_behind()


#: Seconds between SIGTERM (or Ctrl+C) and a hard exit, when a hung request keeps the service from
#: stopping cleanly (its stores close within MemoryService.STOP_GRACE per step otherwise).
EXIT_GRACE = 20.0


def _stop_soon(service: MemoryService) -> None:
    """SIGTERM always ends the service: a clean stop is asked for, and if a request that hangs
    (a blocked read, an API that never answers) keeps it from finishing, the process exits anyway
    after :data:`EXIT_GRACE` seconds (the kernel releases the store's lock; every write is
    idempotent, so the next owner loses nothing)."""
    service.request_stop()

    def hard_exit() -> None:
        time.sleep(EXIT_GRACE)
        with contextlib.suppress(Exception):
            click.echo(
                f"Error: the memory service did not stop within {EXIT_GRACE:g} s (a request "
                "hangs in it); exiting now. Hint: the next command starts a fresh one",
                err=True,
            )
        os._exit(1)

    threading.Thread(target=hard_exit, name="memsearch-exit-grace", daemon=True).start()


def _leave_hung_work_behind() -> None:
    """Exit now when a hung request's worker thread is still alive: the interpreter would wait for
    it at exit for ever (``asyncio.to_thread`` workers are joined), and the stores are closed."""
    deadline = time.monotonic() + 1  # idle workers leave at once once the loop is closed
    others = [t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in others):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _acquire_or_stand_by(service: MemoryService, on_demand: bool) -> bool:
    """Become the store's owner. When another process owns it (a program, a watch, a service
    started on demand), a foreground ``serve`` waits and takes over when that one lets go, so
    "keep this store served while I run" holds whoever came first; False when stopped meanwhile.
    A service started on demand leaves instead (its starter uses the owner it found)."""
    from memsearch.errors import ServiceRunningError

    announced = False
    while True:
        try:
            service.acquire()
            return True
        except ServiceRunningError as exc:
            if on_demand:
                raise
            if not announced:
                announced = True
                click.echo(f"{exc.message}; standing by to take over when it stops", err=True)
        if service.stop_requested(0.2):
            return False
