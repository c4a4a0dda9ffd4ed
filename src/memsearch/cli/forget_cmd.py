"""``memsearch forget``: remove memory from the markdown, the index and the embedding cache."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memsearch.cli.options import common_options, resolve
from memsearch.cli.render import plural, shown
from memsearch.cli.undo import SECRET_HELP
from memsearch.engine.operations import MAX_TOP_K

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.forget import Block
    from memsearch.engine.interface import Memory
    from memsearch.redact import Redactor

DEFAULT_MEMORY_DIR = str(Path(".memsearch") / "memory")


@click.command("forget")
@click.argument("chunk_hashes", nargs=-1, metavar="[CHUNK_HASH]...")
@click.option("--session", default=None, help="Forget every journal entry of this session (all day files).")
@click.option(
    "--turn", default=None, help="Forget the journal entry of this turn (with --session: of that session)."
)
@click.option(
    "--anchor",
    default=None,
    help="Forget the journal entries whose anchor has every field of this one "
    "(e.g. '<!-- session:abc turn:t1 -->').",
)
@click.option(
    "--query",
    "-q",
    default=None,
    help="Forget what a search for this text finds (the same hybrid search); only hits at or above "
    "the strong-match floor (search.min_relevance) are proposed.",
)
@click.option(
    "--top-k",
    "-k",
    type=click.IntRange(min=1, max=MAX_TOP_K),
    default=1,
    show_default=True,
    help="With --query: how many of the best hits to consider (weak ones are never proposed).",
)
@click.option(
    "--memory-dir",
    "memory_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help=f"Journal folder searched by --session and --turn (repeatable; default {DEFAULT_MEMORY_DIR}).",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    metavar="VALUE",
    help="Forget this value wherever memsearch keeps text: every journal and note, the index, the "
    "cache, the recall log and logs (replaced by [REDACTED:forgotten]); with --undo, the value a "
    "backup needs. " + SECRET_HELP,
)
@click.option(
    "--undo",
    is_flag=False,
    flag_value="last",
    default=None,
    metavar="[ID]",
    help="Give back what a forget took out of hand-written notes: backup ID, or the last one.",
)
@click.option("--list", "list_backups", is_flag=True, help="With --undo: list the kept backups.")
@click.option(
    "--force", is_flag=True, help="With --undo: restore a file changed since (its text is kept as a backup)."
)
@click.option("--dry-run", is_flag=True, help="Only show what would be forgotten.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@common_options
def forget(
    chunk_hashes: tuple[str, ...],
    session: str | None,
    turn: str | None,
    anchor: str | None,
    query: str | None,
    top_k: int,
    memory_dirs: tuple[str, ...],
    secrets: tuple[str, ...],
    undo: str | None,
    list_backups: bool,
    force: bool,
    dry_run: bool,
    yes: bool,
    **flags: Any,
) -> None:
    """Forget memory: remove it from the markdown files, the index and the embedding cache.

    Name what to forget by CHUNK_HASH (the `Chunk:` line of `memsearch search`), by --session,
    --turn or --anchor (a journal entry's anchor; given together, an entry must match all), or by
    --query; several selectors add up. What will go
    is listed (file, lines, heading, a preview with secrets replaced) and confirmed first. A journal
    entry goes whole; a hand-written note loses the chunk's lines, which are kept for --undo. All
    of it is removed, or nothing. --query proposes only hits that match strongly (their relevance is
    shown); when none does, it refuses and removes nothing, --yes or not. --secret forgets a leaked
    value everywhere instead.

    \b
    Example:
      memsearch forget --session 7c1e9a52-3b4d-4f60-9a8e-0d2c4b6e8f10 --dry-run
      memsearch forget 3f2a9c1e8b7d6a50 --yes
      memsearch forget --query "staging database password" -k 2
      memsearch forget --undo                # the last forget of a note, back
      memsearch forget --secret -            # asks for the value; gone from every file
    """
    from memsearch import redact
    from memsearch.cli import undo as undo_view
    from memsearch.engine import forget_apply
    from memsearch.engine.memory import open_memory
    from memsearch.errors import ForgetTargetError, NothingToForgetError

    selected = bool(chunk_hashes or session or turn or anchor or query)
    if undo is not None or list_backups:
        if undo is None or selected:
            raise ForgetTargetError(
                "--list goes with --undo"
                if undo is None
                else "--undo restores a backup: it takes no selector",
                hint="`memsearch forget --undo --list` lists them, `memsearch forget --undo ID` restores one",
            )
        cfg = resolve(flags)
        undo_view.recover_first(cfg)
        if list_backups:
            undo_view.list_backups("forget")
            return
        backup = None if undo == "last" else undo
        undo_view.restore_backup("forget", backup, undo_view.read_values(secrets), force, cfg)
        return
    if secrets:
        if selected:
            raise ForgetTargetError(
                "--secret forgets a value wherever it is: it takes no other selector", hint="give it alone"
            )
        from memsearch.cli.forget_value import forget_value

        dirs = memory_dirs or (DEFAULT_MEMORY_DIR,)
        forget_value(undo_view.read_values(secrets), dirs, dry_run=dry_run, yes=yes, flags=flags)
        return
    if not selected:
        raise ForgetTargetError(
            "nothing named to forget",
            hint="give a CHUNK_HASH, --session, --turn, --anchor, --query or --secret "
            "(see `memsearch forget --help`)",
        )
    fields: dict[str, str] = {k: v for k, v in (("session", session), ("turn", turn)) if v}
    if anchor is not None:
        from memsearch.engine.journal import parse_anchor_fields

        parsed = parse_anchor_fields(anchor if "<!--" in anchor else f"<!-- {anchor} -->")
        if not parsed:
            raise ForgetTargetError(
                "the --anchor has no key:value fields",
                hint="copy the anchor comment, e.g. '<!-- session:abc turn:t1 -->'",
            )
        fields.update(parsed)
    if query is not None and not query.strip():
        raise ForgetTargetError(
            "the --query is empty", hint='give words to search for, e.g. --query "timeout"'
        )
    cfg = resolve(flags)
    index_redactor = redact.current(cfg)
    r = cfg.redact  # previews never show a secret, even with redaction turned off
    preview_redactor = redact.from_settings(True, r.notes, r.patterns, r.allow, env={})
    undo_view.recover_first(cfg)
    with open_memory(cfg, start=True) as memory:
        redactors = (index_redactor, preview_redactor)
        blocks = _select(memory, cfg, chunk_hashes, fields, query, top_k, memory_dirs, redactors)
        if not blocks:
            raise NothingToForgetError(
                "nothing matches: no memory was forgotten",
                hint="check the id with `memsearch search` (or --memory-dir for another journal folder)",
            )
        _show(blocks)
        if dry_run:
            click.echo("Dry run: nothing was changed.")
            return
        if not yes:
            from memsearch.engine.journal import is_journal

            notes = any(not is_journal(b.path) for b in blocks)
            undo_view.confirm(f"Forget {plural(len(blocks), 'block')}?", flags, notes=notes)
        outcome = forget_apply.forget_blocks(blocks, memory, cfg, index_redactor)
    click.echo(
        f"Forgot {plural(len(blocks), 'block')}: {plural(len(outcome.changed), 'file')} rewritten, "
        f"{plural(len(outcome.removed), 'journal')} removed, "
        f"{plural(outcome.cache_deleted, 'cached vector')} deleted, reindexed."
    )
    undo_view.report_outcome(outcome, kept="the notes as they were", undo="memsearch forget --undo")


def _select(
    memory: Memory,
    cfg: MemSearchConfig,
    chunk_hashes: Sequence[str],
    match: dict[str, str],
    query: str | None,
    top_k: int,
    memory_dirs: Sequence[str],
    redactors: tuple[Redactor, Redactor],
) -> list[Block]:
    """Every block the selectors name (:func:`memsearch.engine.forget.select_blocks`)."""
    from memsearch.engine.forget import select_blocks

    return select_blocks(
        memory,
        cfg,
        chunk_hashes=chunk_hashes,
        match=match,
        memory_dirs=[str(Path(d).expanduser().resolve()) for d in (memory_dirs or [DEFAULT_MEMORY_DIR])],
        query=query,
        top_k=top_k,
        redactors=redactors,
        warn=lambda message: click.echo(f"Warning: {message}", err=True),
        note=click.echo,
    )


def _show(blocks: Sequence[Block]) -> None:
    click.echo(f"Will forget {plural(len(blocks), 'block')}:")
    for b in blocks:
        where = f"{shown(b.path)} {b.span}"
        if b.heading:
            where += f"  {shown(b.heading)}"
        ids = " ".join(f"{k}:{b.anchor[k]}" for k in ("session", "turn") if b.anchor.get(k))
        if b.relevance is not None:
            where += f"  (relevance {b.relevance:.2f})"
        click.echo(f"  {where}" + (f"  [{shown(ids)}]" if ids else ""))
        if b.preview:
            click.echo(f"    {shown(b.preview)}")
