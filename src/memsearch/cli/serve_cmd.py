"""``memsearch serve``: run the local memory service for a store in the foreground."""

from __future__ import annotations

import signal
from typing import Any

import click

from memsearch.cli.options import common_options, resolve


@click.command("serve")
@common_options
def serve(**flags: Any) -> None:
    """Run the memory service for a store (foreground; Ctrl+C or SIGTERM stops it).

    While it runs, `search`, `expand`, `stats`, `index` and the agent hooks of every process use it
    instead of opening the store themselves: no lock conflicts, and no start-up cost per command.
    """
    from memsearch.core import config_kwargs
    from memsearch.service import MemoryService

    cfg = resolve(flags)
    service = MemoryService(cfg.milvus.uri)
    service.acquire()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: service.request_stop())
    try:
        service.start()
        service.warm(config_kwargs(cfg) | {"paths": []})
        click.echo(f"memsearch service for {service.paths.store} on {service.paths.socket}", err=True)
        service.wait()
    finally:
        service.stop()
    click.echo("Service stopped.", err=True)
