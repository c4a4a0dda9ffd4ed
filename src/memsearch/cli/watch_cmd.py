"""``memsearch watch``: index PATHS, then keep the index in step as files change.

Output follows the original: the initial ``Indexed N chunks.`` (only when N > 0), the ``Watching``
line and one summary line per change go to stdout; per-file failures go to stderr as
``Failed: <path>: <reason>`` and are recorded in ``.index-state.json`` (operation
``watch:<event>``, status ``degraded``) while the watcher keeps running. Ctrl+C and SIGTERM both
stop it cleanly: ``Stopping watcher.`` and exit code 0; so does ``memsearch service stop`` when this
watch serves the store (a watch that joined another process's service takes over when that one
stops, as when it exits).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memsearch.cli.options import common_options, indexing_options, resolve
from memsearch.cli.render import plural, shown

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.index_state import IndexRun
    from memsearch.service.server import MemoryService
    from memsearch.watcher import OnError

#: The signals that stop the watcher; SIGTERM is what service managers and `kill` send.
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s is not None
)


@click.command("watch")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@common_options
@indexing_options
@click.option(
    "--debounce-ms",
    type=click.IntRange(min=0),
    default=None,
    help="Milliseconds a file must stay unchanged before it is re-indexed (default 1500).",
)
@click.option(
    "--users-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    hidden=True,
    help="Stop once no process listed in this file is alive (the agent plugins' .watch.sessions).",
)
def watch(paths: tuple[str, ...], description: str | None, users_file: Path | None, **flags: Any) -> None:
    """Index PATHS, then keep the index updated as files change.

    Created, edited, renamed and deleted markdown files are re-indexed or removed once they have
    been quiet for the debounce time. Stop with Ctrl+C (or SIGTERM).

    The watch runs inside the memory service of the store: if none is running, this process
    becomes it (so `search` and friends keep working while it watches); if one is running, the
    watch is added to it for as long as this command runs.
    """
    from memsearch.core import engine_settings
    from memsearch.index_state import IndexRun

    cfg = resolve(flags)
    run = IndexRun.of("watch", paths, cfg)
    follow_links = not flags.get("no_follow_links")
    settings = engine_settings(cfg, paths, description=description or "", follow_links=follow_links)
    received: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS}
    session = _Session(run)
    if users_file is not None:
        _stop_when_unused(users_file)
    try:
        run.started()
        # If the serving process goes away, take over (or join the next one); the watch that serves
        # the store ends when `memsearch service stop` asks its service to stop.
        while not _watch_once(cfg.milvus.uri, settings, cfg.watch.debounce_ms, session):
            pass
        click.echo("The memory service was asked to stop (memsearch service stop).")
        click.echo("Stopping watcher.")
    except KeyboardInterrupt:
        if not received or received[0] == getattr(signal, "SIGINT", None):
            click.echo("")  # end the terminal's "^C" line
        click.echo("Stopping watcher.")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_when_unused(users_file: Path) -> None:
    """A watch started by an agent's hooks ends with the agent's sessions, even the ones that never
    say goodbye (no SessionEnd, a killed host): SIGTERM to ourselves, the same clean stop as ``kill``."""
    import os

    from memsearch.agent.hooks.processes import guard_watch

    def stop() -> None:
        click.echo("No live session uses this watch any more.")
        os.kill(os.getpid(), signal.SIGTERM)

    guard_watch(users_file.resolve(), stop)


def _watch_once(uri: str, settings: dict[str, Any], debounce_ms: int, session: _Session) -> bool:
    """Watch through the store's service until it goes away, starting it here if none runs; True
    when a client asked to stop the service this process ran, or (``service stop --all``) the one it
    used: then the watch ends rather than serve again."""
    from memsearch.errors import ServiceRunningError, ServiceUnavailableError
    from memsearch.service.client import ServiceClient, connect
    from memsearch.service.server import MemoryService

    client = connect(uri)
    service = None
    if client is None:
        from memsearch.core import engine

        service = MemoryService(uri, engine=engine, owner="watch")
        try:
            service.acquire()
        except ServiceRunningError:  # the service is starting or stopping: join or replace it
            time.sleep(0.1)
            return False
        try:
            service.start()
            service.warm(settings)
        except BaseException:
            service.stop()
            raise
        threading.Thread(target=_end_when_asked, args=(service,), name="memsearch-stop", daemon=True).start()
        client = ServiceClient(service.paths)
    try:
        client.watch(settings, {"debounce_ms": debounce_ms}, session.on_message)
    except ServiceUnavailableError:
        if service is not None and not service.leaving:
            raise
        time.sleep(0.1)  # the serving process is going away: take over once it has released the store
    finally:
        if service is not None:
            for sig in STOP_SIGNALS:  # a second Ctrl+C must not cut the clean-up short
                signal.signal(sig, signal.SIG_IGN)
            service.stop()
    return session.ended or (service is not None and service.leaving)


def _end_when_asked(service: MemoryService) -> None:
    """Once a client asks this watch's service to stop (or it stops anyway), end the watch sessions
    it serves, this process's own included: the main thread's watch returns and stops the service."""
    service.wait()
    service.end_sessions()


class _Session:
    """Prints what the service streams for this watch, and keeps ``.index-state.json`` current."""

    def __init__(self, run: IndexRun) -> None:
        self.run = run
        self.paths = run.paths
        self.started = False
        self.ended = False  # the service said its watches end with it (``service stop --all``)
        self.on_error = _error_recorder(run.path, run.cfg)

    def on_message(self, message: dict[str, Any]) -> None:
        from memsearch.service.protocol import error_from_payload

        if message.get("ok") is False:
            exc = error_from_payload(message.get("error") or {})
            self.run.failed(exc)
            raise exc
        if message.get("ended"):
            self.ended = True
        elif message.get("ok") and not self.started:
            self._initial_report(message.get("result") or {})
        elif message.get("watching") and not self.started:
            self.started = True
            # Only now: a change made after this line is seen (scripts wait for it before editing).
            click.echo(f"Watching {plural(len(self.paths), 'path')} for changes... (Ctrl+C to stop)")
        elif "error" in message:
            self.on_error(
                str(message.get("event")), error_from_payload(message["error"]), Path(message["path"])
            )
        elif "summary" in message:
            click.echo(shown(message["summary"]))

    def _initial_report(self, data: dict[str, Any]) -> None:
        from memsearch.index_report import IndexReport

        report = IndexReport.from_dict(data)
        self.run.finished(report)
        for warning in report.warnings:
            click.echo(f"Warning: {shown(warning)}", err=True)
        for failure in report.failed_files:
            click.echo(f"Failed: {shown(failure.path)}: {shown(failure.error)}", err=True)
        if report.indexed_chunks > 0:
            click.echo(f"Indexed {plural(report.indexed_chunks, 'chunk')}.")


def _error_recorder(state: Path | None, cfg: MemSearchConfig) -> OnError:
    """``on_error`` for the watcher: a stderr line and a degraded ``watch:<event>`` state record."""
    from memsearch.index_report import format_error
    from memsearch.index_state import record_error

    def on_error(event_type: str, exc: BaseException, path: Path) -> None:
        message = format_error(exc)
        record_error(
            state,
            f"watch:{event_type}",
            [str(path)],
            cfg,
            exc,
            status="degraded",
            failed_files=[{"path": str(path), "error": message}],
        )
        click.echo(f"Failed: {path}: {message}", err=True)  # after the record: a reader may check it

    return on_error
