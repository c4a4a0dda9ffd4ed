"""``memsearch expand``: from a search hit to the full section in its markdown file."""

from __future__ import annotations

from typing import Any

import click

from memsearch.cli.options import common_options, echo_json, resolve, store_flags
from memsearch.cli.render import shown


@click.command("expand")
@click.argument("chunk_hash")
@click.option(
    "--section/--no-section",
    default=True,
    help="Show the whole section (default) or only the chunk's own lines.",
)
@click.option(
    "--lines",
    "-n",
    type=click.IntRange(min=0),
    default=None,
    help="Show the chunk plus N lines before and after (overrides --section).",
)
@common_options
@click.option("--json-output", "-j", is_flag=True, help="Print as JSON.")
def expand(chunk_hash: str, section: bool, lines: int | None, json_output: bool, **flags: Any) -> None:
    """Show the full section around a chunk (CHUNK_HASH from `memsearch search`).

    \b
    Example:
      memsearch search "deploy checklist" --json-output   # note a result's chunk_hash
      memsearch expand 3f2a9c1e8b7d6a50 --lines 5
    """
    from memsearch.cli.recall_output import expanded
    from memsearch.engine.memory import open_memory

    cfg = resolve(flags)
    with open_memory(cfg, start=True) as memory:
        result = memory.expand(chunk_hash, section=section, context_lines=lines)
    result = expanded(cfg, result, store_flags(flags))  # recall budget, recall log
    if result.warning:
        click.echo(f"Warning: {result.warning}", err=True)
    if json_output:
        echo_json(result.to_dict())
        return
    click.echo(f"Source: {shown(result.source)} (lines {result.start_line}-{result.end_line})")
    if result.heading:
        click.echo(f"Heading: {shown(result.heading)}")
    if result.anchor is not None:
        a = result.anchor.to_dict()
        if "turn" in a:
            click.echo(f"Session: {a['session']}  Turn: {a['turn']}")
        else:
            click.echo(f"Session: {a['session']}")
        for key, label in (("transcript", "Transcript"), ("rollout", "Rollout"), ("db", "Database")):
            if a.get(key):
                click.echo(f"{label}: {shown(a[key])}")
    click.echo()
    click.echo(result.content)
