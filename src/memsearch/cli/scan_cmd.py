"""``memsearch scan``: list secrets already in memory files; ``--redact`` cleans the journals, keeping
them as they were for ``--restore``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from memsearch.cli.options import common_options, resolve
from memsearch.cli.render import plural, shown
from memsearch.cli.undo import SECRET_HELP


@click.command("scan")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option(
    "--redact",
    "rewrite",
    is_flag=True,
    help="Rewrite the daily journals without their secrets (after showing what goes and asking), "
    "keeping them as they were for --restore, and reindex them. Hand-written notes are listed, never "
    "rewritten.",
)
@click.option(
    "--restore",
    is_flag=False,
    flag_value="last",
    default=None,
    metavar="[ID]",
    help="Give back the journals a --redact rewrote, byte for byte: backup ID, or the last one.",
)
@click.option("--list", "list_backups", is_flag=True, help="With --restore: list the kept backups.")
@click.option(
    "--force",
    is_flag=True,
    help="With --restore: restore a file changed since (its text is kept as a backup).",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    metavar="VALUE",
    help="With --restore: a value `forget --secret` took out of the backup since. " + SECRET_HELP,
)
@click.option("--dry-run", is_flag=True, help="With --redact: only show what would change.")
@click.option("--yes", "-y", is_flag=True, help="With --redact: do not ask for confirmation.")
@common_options
def scan(
    paths: tuple[str, ...],
    rewrite: bool,
    restore: str | None,
    list_backups: bool,
    force: bool,
    secrets: tuple[str, ...],
    dry_run: bool,
    yes: bool,
    **flags: Any,
) -> None:
    """List secrets in memory files (path, line, kind; never the value).

    PATHS default to ./.memsearch/memory. Exits 0 when nothing is found, 1 when a secret is
    (with --redact: when one is left in a hand-written note).

    \b
    Example:
      memsearch scan
      memsearch scan --redact
      memsearch scan --restore          # the journals as they were before the last --redact
    """
    from memsearch import redact
    from memsearch.cli import undo as undo_view
    from memsearch.engine import secret_scan
    from memsearch.errors import ForgetTargetError, SecretsFoundError

    cfg = resolve(flags)
    undo_view.recover_first(cfg)
    if restore is not None or list_backups:
        if restore is None or rewrite:
            raise ForgetTargetError(
                "--list goes with --restore" if restore is None else "--restore and --redact are opposites",
                hint="`memsearch scan --restore --list` lists the backups, `--restore ID` restores one",
            )
        if list_backups:
            undo_view.list_backups("scan")
            return
        backup = None if restore == "last" else restore
        undo_view.restore_backup("scan", backup, undo_view.read_values(secrets), force, cfg)
        return
    roots = list(paths) or [str(Path(".memsearch") / "memory")]
    files = secret_scan.memory_files(roots)
    # a scan always looks, even with redaction turned off (env={}: MEMSEARCH_REDACT is not read)
    r = cfg.redact
    redactor = redact.from_settings(True, r.notes, r.patterns, r.allow, env={})
    if rewrite:
        _redact(files, redactor, cfg, dry_run=dry_run, yes=yes, flags=flags)
    hits = secret_scan.scan_files(files, redactor)
    for hit in hits:
        click.echo(f"{shown(str(hit.path))}:{hit.line}: {hit.kind}")
    if not hits:
        click.echo(f"No secrets found in {plural(len(files), 'file')}.")
        return
    hint = (
        "these are hand-written notes: edit them, or take a value out with `memsearch forget --secret -` "
        "(index leaves their secrets out by default)"
        if rewrite and not dry_run
        else f"run `{_redact_command(paths, flags)}` to rewrite the journals without them"
    )
    raise SecretsFoundError(f"{plural(len(hits), 'secret')} found in memory files (listed above)", hint=hint)


def _redact_command(paths: tuple[str, ...], flags: dict[str, Any]) -> str:
    """The ``scan --redact`` of the same folders and store, as it can be copied: without the
    paths it would scan ./.memsearch/memory, another folder."""
    import shlex

    from memsearch.cli.options import store_flags

    named = "".join(f" {shlex.quote(path)}" for path in paths)
    return f"memsearch scan --redact{named}{store_flags(flags)}"


def _redact(
    files: list[Path], redactor: Any, cfg: Any, *, dry_run: bool, yes: bool, flags: dict[str, Any]
) -> None:
    """Show what ``--redact`` takes out of the journals, ask, then rewrite them (kept for --restore)."""
    from memsearch import redact
    from memsearch.cli import undo as undo_view
    from memsearch.engine import secret_scan
    from memsearch.engine.memory import open_memory

    with open_memory(cfg) as memory:
        planned = secret_scan.redactions(files, redactor)
        if not planned:
            return
        journals = {r.path for r in planned}
        click.echo(f"Will redact {plural(len(planned), 'secret')} in {plural(len(journals), 'journal')}:")
        for r in planned:
            click.echo(f"  {shown(str(r.path))}:{r.line}: {r.kind}  {r.shown}")
        if dry_run:
            click.echo("Dry run: nothing was changed.")
            return
        if not yes:
            undo_view.confirm(
                "Redact them? (the journals are kept as they were for `--restore`)", flags, command="scan"
            )
        outcome, done = secret_scan.redact_journals(files, redactor, memory, cfg, redact.current(cfg))
    for path, count in done.items():
        click.echo(f"Redacted {plural(count, 'item')} in {shown(str(path))}")
    click.echo(f"Reindexed: {plural(outcome.reindexed_chunks, 'chunk')} embedded.")
    undo_view.report_outcome(outcome, kept="the journals as they were", undo="memsearch scan --restore")
