"""``memsearch hook <platform> <event>``: the one entry point of every plugin shim (hidden from help).

Reads the host's JSON on stdin (with a deadline), runs the engine in :mod:`memsearch.agent.hooks` and
prints the host's reply. ``<event>`` may also be an action for skills and installers
(``collection``, ``memory-dir``, ``install``, ``doctor``), which reads no stdin.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("hook", hidden=True)
@click.argument("platform")
@click.argument("event")
@click.option("--worker", is_flag=True, hidden=True, help="Finish a capture handed over on stdin.")
@click.option(
    "--plugin-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="install: the platform's plugin folder (plugins/<platform>).",
)
def hook(platform: str, event: str, worker: bool, plugin_dir: Path | None) -> None:
    """Run PLATFORM's hook for EVENT with the host's JSON on stdin and print the host's reply."""
    from memsearch.agent.hooks import engine

    if engine.is_action(platform, event):
        click.echo(engine.run_action(platform, event, plugin_dir=plugin_dir))
        return
    if engine.disabled():
        click.echo("{}")  # a nested agent call: never touch stdin or disk
        return
    if worker:
        engine.run_worker(platform, sys.stdin.buffer.read())
        return
    click.echo(engine.run_hook(platform, event, engine.read_stdin()))
