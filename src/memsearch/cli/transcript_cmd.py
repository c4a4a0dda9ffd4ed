"""``memsearch transcript``: from a journal anchor to the original conversation turns (L3)."""

from __future__ import annotations

import click

from memsearch.cli.options import echo_json
from memsearch.cli.recall_output import transcript_read
from memsearch.cli.render import shown
from memsearch.transcript import find_turn, format_turns, read_transcript, select_turns, turns_to_json


@click.command("transcript")
@click.argument("path")
@click.option(
    "--turn",
    "-t",
    "turn_id",
    default=None,
    help="Show the turn with this id (a prefix is enough) and its context.",
)
@click.option(
    "--context",
    "-c",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Turns to show before and after --turn.",
)
@click.option(
    "--session",
    default=None,
    help="OpenCode or OpenClaw database only: the session to show (id or unique prefix).",
)
@click.option("--json-output", "-j", is_flag=True, help="Print the turns as JSON.")
def transcript(path: str, turn_id: str | None, context: int, session: str | None, json_output: bool) -> None:
    """Show the turns of an agent session transcript at PATH.

    Reads Claude Code session JSONL, Codex rollout JSONL, OpenClaw session JSONL or agent database,
    OpenCode's SQLite database (pick the session of a database with --session) and DeepSeek Harness
    session files (zstd-compressed or not). Exits 3 when the format is not recognised.
    """
    result = read_transcript(path, session=session)
    for warning in result.warnings:
        click.echo(f"Warning: {shown(warning)}", err=True)
    turns = select_turns(result.turns, turn_id, context)
    transcript_read(len(turns))  # the recall log
    if json_output:
        echo_json(turns_to_json(turns))
        return
    if not turns:
        if result.format is not None:  # an empty file already got its warning
            click.echo(f"Warning: no conversation turns in {shown(result.path)}", err=True)
        return
    selected = result.turns[find_turn(result.turns, turn_id)].uuid if turn_id else None
    click.echo(format_turns(turns, selected=selected), nl=False)
