"""``memsearch scan``: list secrets already in memory files; ``--redact`` cleans the journals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from memsearch.cli.options import common_options, resolve
from memsearch.cli.render import plural, shown


@click.command("scan")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option(
    "--redact",
    "rewrite",
    is_flag=True,
    help="Rewrite the daily journals without their secrets (atomically, mode kept) and reindex them. "
    "Hand-written notes are listed, never rewritten.",
)
@common_options
def scan(paths: tuple[str, ...], rewrite: bool, **flags: Any) -> None:
    """List secrets in memory files (path, line, kind; never the value).

    PATHS default to ./.memsearch/memory. Exits 0 when nothing is found, 1 when a secret is
    (with --redact: when one is left in a hand-written note).

    \b
    Example:
      memsearch scan
      memsearch scan --redact
    """
    from memsearch import redact
    from memsearch.engine import secret_scan
    from memsearch.errors import SecretsFoundError

    cfg = resolve(flags)
    roots = list(paths) or [str(Path(".memsearch") / "memory")]
    files = secret_scan.memory_files(roots)
    # a scan always looks, even with redaction turned off (env={}: MEMSEARCH_REDACT is not read)
    r = cfg.redact
    redactor = redact.from_settings(True, r.notes, r.patterns, r.allow, env={})
    if rewrite:
        done = secret_scan.redact_journals(files, redactor)
        for path, count in done.items():
            click.echo(f"Redacted {plural(count, 'item')} in {shown(str(path))}")
        if done:
            _reindex(cfg, roots)
    hits = secret_scan.scan_files(files, redactor)
    for hit in hits:
        click.echo(f"{shown(str(hit.path))}:{hit.line}: {hit.kind}")
    if not hits:
        click.echo(f"No secrets found in {plural(len(files), 'file')}.")
        return
    hint = (
        "these are hand-written notes: edit them yourself (index leaves their secrets out by default)"
        if rewrite
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


def _reindex(cfg: Any, roots: list[str]) -> None:
    """Bring the index up to date with the rewritten journals (old chunks replaced)."""
    from memsearch.engine.memory import open_memory

    dirs = [r for r in roots if Path(r).exists()]
    with open_memory(cfg, dirs) as memory:
        report = memory.index_with_report()
    click.echo(f"Reindexed: {plural(report.indexed_chunks, 'chunk')} embedded.")
