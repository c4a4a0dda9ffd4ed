"""``memsearch service status|stop``: see, and stop, the memory services of this user's stores.

Why: services run in the background (started on demand by ``search``, ``expand`` and the hooks,
or as ``memsearch serve`` and ``memsearch watch``), each holding a store and its model in memory;
without a way to list them a user sees only anonymous ``python`` processes, and the only way to
free a store was ``kill``. ``status`` shows every one (store, PID, kind, uptime, idle time, memory);
``stop`` asks one (or all) to stop the way an idle one does, over its socket: no PID from a file
is ever signalled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from memsearch.cli.options import echo_json
from memsearch.cli.render import shown

if TYPE_CHECKING:
    from memsearch.service.manage import RunningService, StopOutcome

#: (unit, seconds) from the largest: how uptime and idle time are shown (two units at most).
_UNITS: tuple[tuple[str, int], ...] = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
#: Plain ``status`` columns: header -> the cell of a service.
_COLUMNS: dict[str, Callable[[RunningService], str]] = {
    "PID": lambda s: str(s.pid) if s.pid is not None else "?",
    "KIND": lambda s: s.owner,
    "UPTIME": lambda s: _duration(s.uptime),
    "IDLE": lambda s: _duration(s.idle) if s.state == "running" else s.state,
    "RSS": lambda s: _megabytes(s.rss_bytes),
    "STORE": lambda s: shown(s.store + (f" ({s.command})" if s.owner == "program" else "")),
}


@click.group("service")
def service() -> None:
    """List or stop the memory services of your stores.

    A memory service holds one store (and its embedding model) for every memsearch process:
    `memsearch serve`, a `memsearch watch`, one started on demand by `search`, `expand` or a hook,
    or a program holding a MemSearch.
    """


@service.command("status")
@click.option("--json-output", "-j", is_flag=True, help="Print as JSON.")
def status(json_output: bool) -> None:
    """List every memory service of yours: store, PID, kind, uptime, idle time, memory."""
    from memsearch.service.manage import list_services

    services = list_services()
    total = sum(s.rss_bytes or 0 for s in services)
    if json_output:
        entries = [s.to_dict() for s in services]
        echo_json({"services": entries, "total": {"count": len(services), "rss_bytes": total}})
        return
    if not services:
        click.echo("No memory service is running.")
        return
    rows = [list(_COLUMNS), *([cell(s) for cell in _COLUMNS.values()] for s in services)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS) - 1)]
    for row in rows:
        click.echo("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]))
    noun = "service" if len(services) == 1 else "services"
    click.echo(f"Total: {len(services)} {noun}, {_megabytes(total)} resident.")


@service.command("stop")
@click.option("--all", "all_services", is_flag=True, help="Stop every memory service of yours.")
@click.option(
    "--milvus-uri",
    default=None,
    help="The store whose service to stop (default: milvus.uri from the config).",
)
def stop(all_services: bool, milvus_uri: str | None) -> None:
    """Stop the memory service of a store (or --all of them), as if it had been idle.

    It finishes the requests in flight, closes its store and exits; this waits until it has let
    the store go (at most 15 s) and prints one line per service stopped. A `watch` that serves the
    store ends too; one that only uses it takes the store over (the line names it), except with
    --all, which ends every watch and then stops whatever took a store over meanwhile. A program
    that holds the store for itself (a MemSearch in its own process) is not stopped: the error
    names it.
    """
    from memsearch.service.manage import list_services, stop_all, stop_services
    from memsearch.service.paths import store_key

    if all_services and milvus_uri is not None:
        raise click.UsageError("give --all or --milvus-uri, not both")
    others: list[RunningService] = []
    if all_services:
        outcomes = stop_all()
        where = ""
    else:
        from memsearch.cli.options import resolve

        store = store_key(resolve({"milvus_uri": milvus_uri}).milvus.uri)
        services = list_services()
        others = [s for s in services if s.store != store]
        services = [s for s in services if s.store == store]
        outcomes = stop_services(services) if services else []
        where = f" for {store}"
    if not outcomes:
        click.echo(f"No memory service is running{where}.{_others_line(others)}")
        return
    for outcome in outcomes:
        if outcome.error is None:
            click.echo(_stopped_line(outcome, successor=not all_services))
    _raise_failures([o for o in outcomes if o.error is not None])


def _others_line(others: list[RunningService]) -> str:
    """What runs for other stores, when the one named has none (``make demo``'s service runs for
    its own store, not the default one): how to stop it, as it can be copied."""
    import shlex

    if not others:
        return ""
    if len(others) == 1:
        store = others[0].store
        return (
            f" One runs for {shown(store)}: `memsearch service stop --milvus-uri {shlex.quote(store)}` "
            "stops it."
        )
    return f" {len(others)} run for other stores: `memsearch service status` lists them, `--all` stops them."


def _stopped_line(outcome: StopOutcome, *, successor: bool) -> str:
    """``Stopped ...``; and who took the store over (``--all`` stops that one too, on a line of its own)."""
    line = f"Stopped {outcome.service.describe()}."
    if successor and outcome.successor is not None:
        line += f" Process {outcome.successor} serves that store now (`--all` stops it too)."
    return line


def _raise_failures(failed: list[StopOutcome]) -> None:
    """One error for what could not be stopped (the services' own error when only one)."""
    from memsearch.errors import ServiceError

    if not failed:
        return
    first = failed[0].error
    assert first is not None
    if len(failed) == 1:
        raise first
    raise ServiceError(
        f"{len(failed)} memory services were not stopped: "
        + "; ".join(o.error.message for o in failed if o.error is not None),
        hint=first.hint,
    )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    left = int(seconds)
    parts: list[str] = []
    for unit, size in _UNITS:
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def _megabytes(size: int | None) -> str:
    return "?" if size is None else f"{size / 2**20:,.0f} MB"
