"""``memsearch watch``: index PATHS, then keep the index in step as files change.

Output follows the original: the initial ``Indexed N chunks.`` (only when N > 0), the ``Watching``
line and one summary line per change go to stdout; per-file failures go to stderr as
``Failed: <path>: <reason>`` and are recorded in ``.index-state.json`` (operation
``watch:<event>``, status ``degraded``) while the watcher keeps running. Ctrl+C and SIGTERM both
stop it cleanly: ``Stopping watcher.`` and exit code 0.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memsearch.cli.options import common_options, indexing_options, open_memsearch

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
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
    "--max-chunk-size",
    type=click.IntRange(min=1),
    default=None,
    help="Max chunk size in characters (must be >= 1).",
)
@click.option(
    "--description", default=None, help="Collection description (used when the collection is created)."
)
def watch(paths: tuple[str, ...], description: str | None, **flags: Any) -> None:
    """Index PATHS, then keep the index updated as files change.

    Created, edited, renamed and deleted markdown files are re-indexed or removed once they have
    been quiet for the debounce time. Stop with Ctrl+C (or SIGTERM).
    """
    from memsearch.index_state import record_report, record_started, state_path_for

    state = state_path_for(paths)
    cfg, ms = open_memsearch(flags, list(paths), description=description or "")
    received: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS}
    try:
        record_started(state, "watch", paths, cfg)
        try:
            report = asyncio.run(ms.index_with_report())
        except Exception as exc:
            from memsearch.index_state import record_error

            record_error(state, "watch", paths, cfg, exc)
            raise
        record_report(state, "watch", paths, cfg, report)
        for warning in report.warnings:
            click.echo(f"Warning: {warning}", err=True)
        for failure in report.failed_files:
            click.echo(f"Failed: {failure.path}: {failure.error}", err=True)
        if report.indexed_chunks > 0:
            click.echo(f"Indexed {report.indexed_chunks} chunks.")
        watcher = ms.watch(
            on_event=_echo_event, on_error=_error_recorder(state, cfg), debounce_ms=cfg.watch.debounce_ms
        )
        # Only now: a change made after this line is seen (scripts wait for it before editing files).
        click.echo(f"Watching {len(paths)} path(s) for changes... (Ctrl+C to stop)")
        try:
            while watcher.is_running:
                time.sleep(1.0)
        finally:
            for sig in STOP_SIGNALS:  # a second Ctrl+C must not cut the clean-up short
                signal.signal(sig, signal.SIG_IGN)
            watcher.stop()
    except KeyboardInterrupt:
        if not received or received[0] == getattr(signal, "SIGINT", None):
            click.echo("")  # end the terminal's "^C" line
        click.echo("Stopping watcher.")
    finally:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        ms.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _echo_event(_event_type: str, summary: str, _path: Path) -> None:
    click.echo(summary)


def _error_recorder(state: Path | None, cfg: MemSearchConfig) -> OnError:
    """``on_error`` for the watcher: a stderr line and a degraded ``watch:<event>`` state record."""
    from memsearch.index_state import record_error
    from memsearch.indexer import format_error

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
