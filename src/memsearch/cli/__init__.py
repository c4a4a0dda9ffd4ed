"""The ``memsearch`` command line: a thin Click layer over the library.

Each command validates its arguments, calls one library function, and renders text or JSON.
Errors are turned into output in exactly one place, :func:`main`: a
:class:`~memsearch.errors.MemSearchError` becomes one ``Error: ...`` line on stderr and its exit code.

Start-up cost matters (agent hooks run the CLI on every turn), so this package imports only Click
and our light modules; pymilvus, onnxruntime and openai are imported inside the commands that need
them, and pandas, which Milvus Lite's pyarrow would import for nothing, not at all (``lean.py``, which
also picks pyarrow's leaner memory pool).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Any

import click

from memsearch.errors import CommandInterruptedError, MemSearchError, exit_code_for

#: command name -> "module:attribute" under memsearch.cli; imported only when the command runs or
#: help is shown. The short help is kept here so ``memsearch --help`` imports no command module.
COMMANDS: dict[str, tuple[str, str]] = {
    "index": ("memsearch.cli.index_cmd:index", "Index markdown files from PATHS."),
    "search": ("memsearch.cli.search_cmd:search", "Search indexed memory for QUERY."),
    "expand": ("memsearch.cli.expand_cmd:expand", "Show the full section around a chunk."),
    "recent": ("memsearch.cli.recent_cmd:recent", "Show what memory gained in the last days, as a timeline."),
    "stats": ("memsearch.cli.stats_cmd:stats", "Show statistics about the index."),
    "reset": ("memsearch.cli.stats_cmd:reset", "Drop all indexed data."),
    "config": ("memsearch.cli.config_cmd:config", "Manage memsearch configuration."),
    "transcript": ("memsearch.cli.transcript_cmd:transcript", "Show the turns of an agent session."),
    "watch": ("memsearch.cli.watch_cmd:watch", "Index PATHS, then keep the index up to date."),
    "compact": ("memsearch.cli.compact_cmd:compact", "Summarise indexed chunks with an LLM."),
    "serve": ("memsearch.cli.serve_cmd:serve", "Run the local memory service for a store (foreground)."),
    "service": ("memsearch.cli.service_cmd:service", "List or stop the memory services of your stores."),
    "summarize": (
        "memsearch.cli.compact_cmd:summarize",
        "Summarise a transcript from stdin into bullet notes.",
    ),
    "maintenance": (
        "memsearch.cli.maintenance_cmd:maintenance",
        "Keep PROJECT.md, USER.md and skill candidates current from the journals.",
    ),
    "skills": ("memsearch.cli.skills_cmd:skills", "Review and install skills distilled from memory."),
    "mcp": ("memsearch.cli.mcp_cmd:mcp", "Serve this project's memory as an MCP server over stdio."),
    "forget": (
        "memsearch.cli.forget_cmd:forget",
        "Remove memory from the markdown, the index and the embedding cache.",
    ),
    "scan": ("memsearch.cli.scan_cmd:scan", "List secrets in memory files; --redact cleans the journals."),
    "ui": ("memsearch.cli.ui_cmd:ui", "Open the memory console (timeline, search, review) in a browser."),
    "hook": ("memsearch.cli.hook_cmd:hook", "Run an agent plugin hook (called by the plugins' shims)."),
}
#: Commands that work but are left out of ``memsearch --help`` (plumbing for the agent plugins).
HIDDEN_COMMANDS: frozenset[str] = frozenset({"hook"})


def _reconfigure_streams() -> None:
    """Make stdout/stderr UTF-8 with replacement before anything is printed (help included)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.reconfigure(encoding="utf-8", errors="replace")  # type: ignore[union-attr]


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (see :data:`COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*COMMANDS, *self.commands])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, _, attr = entry[0].partition(":")
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        self.commands[cmd_name] = command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS) if name not in HIDDEN_COMMANDS]
        rows += [
            (name, cmd.get_short_help_str(60))
            for name, cmd in sorted(self.commands.items())
            if name not in COMMANDS and not cmd.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        # The one place where expected errors become output (also under Click's CliRunner). Ctrl-C
        # in a command that does not say what it kept (index does) is one line too, not Click's
        # bare "Aborted!".
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            exc = CommandInterruptedError(
                "interrupted (Ctrl-C) before the command finished",
                hint="run the command again if it had more to do",
            )
            click.echo(f"Error: {exc.one_line()}", err=True)
            ctx.exit(exit_code_for(exc))
        except MemSearchError as exc:
            click.echo(f"Error: {exc.one_line()}", err=True)
            ctx.exit(exit_code_for(exc))

    def main(self, *args: Any, **kwargs: Any) -> Any:
        _reconfigure_streams()
        return super().main(*args, **kwargs)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from memsearch.version import package_version

    click.echo(f"memsearch, version {package_version()}")
    ctx.exit()


@click.group(cls=LazyGroup)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """memsearch — semantic memory search for markdown knowledge bases."""
    from memsearch.config.envvars import check_environment

    check_environment()  # a bad MEMSEARCH_* value is one Error line now, not a failure mid-command


def main() -> None:
    """Console-script entry point (the process is ours: pandas stays out, see memsearch.cli.lean)."""
    from memsearch import private
    from memsearch.cli.lean import lean_process

    lean_process()
    private.restrict_umask()  # everything the command, its hooks and its service create is private
    cli(prog_name="memsearch")
