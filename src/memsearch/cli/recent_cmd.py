"""``memsearch recent``: what memory gained lately, day by day (``memsearch.agent.timeline``)."""

from __future__ import annotations

from pathlib import Path

import click

from memsearch.cli.options import echo_json
from memsearch.cli.render import plural, shown


@click.command("recent")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--days",
    "-d",
    type=click.IntRange(min=1, max=36_500),
    default=7,
    show_default=True,
    help="How many days back, today included.",
)
@click.option("--json-output", "-j", is_flag=True, help="Print the days as JSON.")
def recent(paths: tuple[Path, ...], days: int, json_output: bool) -> None:
    """Show what memory gained in the last days, as a timeline.

    Each day lists its journal entries (time, session, first bullet) and the other markdown notes
    changed that day. PATHS default to this project's memory folder (.memsearch/memory, or
    $MEMSEARCH_DIR/memory). Reads the markdown only: no model, no store.

    \b
    Example:
      memsearch recent
      memsearch recent --days 30 ./notes --json-output
    """
    import datetime as dt

    from memsearch.agent.timeline import default_memory_dir, timeline
    from memsearch.engine.timeframe import Window, local_today
    from memsearch.errors import MemoryFolderNotFoundError

    folders = list(paths)
    if not folders:
        folder = default_memory_dir()
        if not folder.is_dir():
            raise MemoryFolderNotFoundError(
                f"no memory folder at {folder}",
                hint="run it in a project whose agent plugins write .memsearch/memory, or pass PATHS",
            )
        folders = [folder]
    today = local_today()
    result = timeline(folders, Window(today - dt.timedelta(days=days - 1), today))
    if json_output:
        echo_json([day.to_dict() for day in result])
        return
    if not result:
        click.echo(f"Nothing written in the last {plural(days, 'day')}.")
        return
    for index, day in enumerate(result):
        if index:
            click.echo()
        click.echo(f"{day.date.isoformat()} {day.date.strftime('%a')}")
        for entry in day.entries:
            session = f"  [session {shown(entry.session[:12])}]" if entry.session else ""
            click.echo(f"  {entry.time:>5}  {shown(entry.summary) or '(no bullet)'}{session}")
        for note in day.notes:
            click.echo(f"  {note.time:>5}  note: {shown(note.title)} ({shown(note.source)})")
