"""Kept originals on the command line: ``forget --undo [ID]`` and ``scan --restore [ID]`` (with
``--list``), and reading a value to forget or restore (``--secret VALUE`` or ``--secret -``).

One module for both commands, since both read the same backups (:mod:`memsearch.engine.backups`);
each only names which backups are its own (``command``).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from memsearch.cli.options import store_flags
from memsearch.cli.render import plural, shown

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.forget_apply import Outcome

#: The help text shared by the commands' ``--secret`` options.
SECRET_HELP = (
    "`-` reads it from stdin (one a line) or asks for it without echo; a value typed on the command "
    "line is visible to other users in `ps` and stays in your shell history: prefer `-`."
)
#: What a listing calls each command's backups, and how one is restored.
RESTORE = {"forget": "memsearch forget --undo", "scan": "memsearch scan --restore"}


def read_values(given: Sequence[str]) -> list[str]:
    """The values of ``--secret`` options: ``-`` reads stdin (each non-empty line) or, on a
    terminal, asks without echoing."""
    values: list[str] = []
    for value in given:
        if value != "-":
            values.append(value)
            continue
        stdin = sys.stdin
        if stdin.isatty():
            values.append(click.prompt("Value", hide_input=True, prompt_suffix=": "))
        else:
            values += [line.rstrip("\r\n") for line in stdin.read().splitlines() if line.strip()]
    return values


def list_backups(command: str) -> None:
    """Print the kept originals of ``command``, newest first, and how they are restored."""
    from memsearch.engine.backups import KEEP_COUNT, KEEP_DAYS, listing

    kept = listing(command)
    if not kept:
        click.echo(f"No backups of `memsearch {command}` are kept.")
        return
    click.echo(f"Kept originals, newest first (restore one with `{RESTORE[command]} ID`):")
    for b in kept:
        when = dt.datetime.fromtimestamp(b.created).strftime("%Y-%m-%d %H:%M")
        needs = (
            f"  (needs {plural(b.values_needed, 'forgotten value')}: --secret -)" if b.values_needed else ""
        )
        click.echo(f"  {b.id}  {when}  {shown(b.what)}: {plural(len(b.paths), 'file')}{needs}")
        for path in b.paths:
            click.echo(f"      {shown(path)}")
    click.echo(f"Backups older than {KEEP_DAYS} days, and all but the newest {KEEP_COUNT}, are deleted.")


def restore_backup(
    command: str, backup_id: str | None, values: Sequence[str], force: bool, cfg: MemSearchConfig
) -> None:
    """Restore ``backup_id`` (None: the newest of ``command``), then index the files again."""
    from memsearch.engine import backups, forget_apply
    from memsearch.errors import BackupNotFoundError

    if backup_id is None:
        kept = backups.listing(command)
        if not kept:
            raise BackupNotFoundError(
                f"nothing to restore: no backup of `memsearch {command}` is kept",
                hint="journal entries removed by forget are not kept; notes are, for 30 days",
            )
        backup_id = kept[0].id
    restored = backups.restore(backup_id, values, force=force)
    for r in restored:
        extra = "; the text added since was kept at its end" if r.tail else ""
        extra += "; what it held was kept as a new backup" if r.overwritten else ""
        click.echo(f"Restored {shown(r.path)}{extra}")
    indexed = [r.path for r in restored if r.indexed]
    chunks = forget_apply.reindex_restored(cfg, indexed) if indexed else 0
    click.echo(
        f"Restored backup {backup_id}: {plural(len(restored), 'file')}, {plural(chunks, 'chunk')} indexed."
    )


def recover_first(cfg: MemSearchConfig) -> None:
    """Complete what a killed ``forget``, ``scan --redact`` or restore left
    (:func:`memsearch.engine.forget_apply.recover`) before anything else, and say so."""
    from memsearch.engine.forget_apply import recover

    line = completed_line(recover(cfg))
    if line:
        click.echo(line, err=True)


def completed_line(done: tuple[int, int]) -> str:
    """What :func:`memsearch.engine.forget_apply.recover` completed, as a line ("" for nothing)."""
    changes, restores = done
    parts = [plural(changes, "interrupted change")] if changes else []
    parts += [f"the restore of {plural(restores, 'file')}"] if restores else []
    return f"Completed {' and '.join(parts)}." if parts else ""


def report_outcome(outcome: Outcome, *, kept: str, undo: str) -> None:
    """The lines every change ends with: what the store's rewrite did, and the backup that undoes
    it (``kept`` says what it holds, ``undo`` is the command, before the backup's id)."""
    purged = outcome.purged
    if purged.get("requested"):
        click.echo("The Milvus server was asked to compact: it drops the deleted rows' data when that runs.")
    elif purged.get("purged"):
        rows, files = (
            plural(purged.get("rows", 0), "deleted row"),
            plural(purged.get("files", 0), "data file"),
        )
        done = f": {rows} dropped, {files} rewritten" if purged.get("files") else ""
        click.echo(f"The store's files hold no deleted row{done}.")
    elif purged:
        click.echo(
            "Warning: this milvus-lite is not a release memsearch verified its rewrite on: the deleted "
            "rows stay in the store's files until Milvus Lite compacts them",
            err=True,
        )
    if outcome.backup:
        click.echo(f"Kept {kept}: backup {outcome.backup} (`{undo} {outcome.backup}` gives them back).")


def confirm(question: str, flags: dict[str, Any], *, notes: bool = False, command: str = "forget") -> None:
    """Ask on the terminal; with no input to ask on, say how to go on without asking."""
    from memsearch.errors import ConfirmationNeededError

    instead = f"memsearch {command} ... --yes{store_flags(flags)}"
    kept = " (hand-written notes are kept for `--undo`; journal entries are not)" if notes else ""
    try:
        confirmed = click.confirm(f"{question}{kept}")
    except click.Abort:
        confirmed = False
    except RuntimeError:
        raise ConfirmationNeededError(
            f"{command} needs a yes, and there is no input to read one from",
            hint=f"add --yes (`{instead}`) to forget without asking",
        ) from None
    if not confirmed:
        raise ConfirmationNeededError(
            f"{command} declined: nothing was changed",
            hint=f"add --yes (`{instead}`) to go on without asking",
        )
