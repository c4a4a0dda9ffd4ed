"""``memsearch ui``: the memory console in the browser (``memsearch.console``)."""

from __future__ import annotations

from typing import Any

import click

from memsearch.cli.options import common_options


@click.command("ui")
@click.option(
    "--project",
    default=None,
    type=click.Path(file_okay=False),
    help="The project whose memory to show (default: the git root of the working folder, else the "
    "working folder; MEMSEARCH_DIR names a shared memory folder, as for the plugins).",
)
@click.option(
    "--all",
    "all_projects",
    is_flag=True,
    help="Every project on this machine whose memory folder memsearch wrote journals into.",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="Port on 127.0.0.1 (default: the first free of 8765-8784; 0: any free port).",
)
@click.option("--no-open", is_flag=True, help="Print the address; do not open a browser.")
@common_options
def ui(project: str | None, all_projects: bool, port: int | None, no_open: bool, **flags: Any) -> None:
    """Open the memory console: timeline, search, review inbox and what memory did, in a browser.

    Serves http://127.0.0.1:PORT (never another interface) until Ctrl+C. The address it prints
    carries the token of ~/.memsearch/ui-token; without it the console answers nothing.

    \b
    Example:
      memsearch ui
      memsearch ui --all --no-open --port 8800
    """
    import sys

    from memsearch import private
    from memsearch.console.guard import TOKEN_FILE, Guard
    from memsearch.console.projects import Project, machine_projects
    from memsearch.console.server import Console, listen, serve
    from memsearch.errors import ConsoleError
    from memsearch.mcp.scope import McpScope

    given = {k: v for k, v in flags.items() if v is not None}
    scope = McpScope.build(given, project)
    if all_projects:
        projects = machine_projects(scope if scope.memsearch_dir.is_dir() else None, given)
    else:
        projects = [Project(scope)]
    if not projects:
        raise ConsoleError(
            "no project memory on this machine yet",
            hint="run it in a project whose agent plugins write .memsearch/memory, or pass --project",
        )
    sock = listen(port)
    guard = Guard(private.token(TOKEN_FILE), sock.getsockname()[1])
    console = Console(projects, guard, all_mode=all_projects)

    def ready(address: str) -> None:
        click.echo(f"memsearch ui: serving {address}")
        click.echo("Ctrl+C stops it.")
        sys.stdout.flush()
        if not no_open:
            import webbrowser

            webbrowser.open(address)

    serve(console, sock, ready)
