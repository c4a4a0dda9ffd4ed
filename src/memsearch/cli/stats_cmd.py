"""``memsearch stats`` and ``memsearch reset``: look at, or drop, the index."""

from __future__ import annotations

from typing import Any

import click

from memsearch.cli.options import resolve, store_flags, store_options


@click.command("stats")
@store_options
@click.option("--recall", is_flag=True, help="Per session: tokens injected, searches, expands, captures.")
@click.option(
    "--days",
    type=click.IntRange(min=1, max=36_500),
    default=7,
    show_default=True,
    help="With --recall: how many days back.",
)
@click.option("--json-output", "-j", is_flag=True, help="Print the sessions as JSON (implies --recall).")
def stats(recall: bool, days: int, json_output: bool, **flags: Any) -> None:
    """Show statistics about the index, and the store's memory service when one runs.

    \b
    With --recall: what memory did in each session of the collection (the local recall log).
      memsearch stats --recall --days 30
    """
    from memsearch.engine.memory import open_memory
    from memsearch.service.client import describe_service

    cfg = resolve(flags)
    if recall or json_output:
        from memsearch.cli.recall_stats import show_recall

        show_recall(cfg, days, json_output)
        return
    with open_memory(cfg) as memory:
        click.echo(f"Total indexed chunks: {memory.count(missing_ok=False)}")
    line = describe_service(cfg.milvus.uri)
    if line:
        click.echo(line)
    for line in redaction_lines():
        click.echo(line)


def redaction_lines() -> list[str]:
    """What privacy redaction took out so far, by boundary and kind (counts, never values)."""
    from memsearch.redact import counts

    done = counts()
    total = sum(n for kinds in done.values() for n in kinds.values())
    if not total:
        return []
    lines = [f"Redacted so far: {total} item{'s' if total != 1 else ''} (private spans and secrets)"]
    for boundary, kinds in sorted(done.items()):
        listed = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
        lines.append(f"  {boundary}: {listed}")
    return lines


@click.command("reset")
@store_options
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    expose_value=True,
    help="Do not ask for confirmation.",
)
def reset(yes: bool, **flags: Any) -> None:
    """Drop all indexed data (the markdown files are not touched)."""
    if not yes:
        _confirm("This will delete all indexed data. Continue?", f"memsearch reset --yes{store_flags(flags)}")
    from memsearch.engine.memory import open_memory

    with open_memory(resolve(flags)) as memory:
        memory.reset()
    click.echo("Dropped collection.")


def _confirm(question: str, instead: str) -> None:
    """Ask on the terminal; without one to ask on (stdin closed) say how to go on instead: the
    command ``instead``, with the store flags given (else it would name the default store)."""
    from memsearch.errors import ConfirmationNeededError

    try:
        confirmed = click.confirm(question)
    except click.Abort:  # end of input (Ctrl-D, or stdin at its end): nobody said yes
        confirmed = False
    except RuntimeError:  # click's input() found no stdin at all
        raise ConfirmationNeededError(
            "reset needs a yes, and there is no input to read one from",
            hint=f"run `{instead}` to drop the collection without asking",
        ) from None
    if not confirmed:
        raise ConfirmationNeededError(
            "reset declined: nothing was dropped", hint=f"run `{instead}` to drop the collection"
        )
