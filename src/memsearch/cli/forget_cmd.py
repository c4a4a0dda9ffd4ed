"""``memsearch forget``: remove memory from the markdown, the index and the embedding cache."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memsearch.cli.options import common_options, resolve, store_flags
from memsearch.cli.render import plural, shown
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
    dry_run: bool,
    yes: bool,
    **flags: Any,
) -> None:
    """Forget memory: remove it from the markdown files, the index and the embedding cache.

    Name what to forget by CHUNK_HASH (the `Chunk:` line of `memsearch search`), by --session,
    --turn or --anchor (a journal entry's anchor; given together, an entry must match all), or by
    --query; several selectors add up. What will go
    is listed (file, lines, heading, a preview with secrets replaced) and confirmed first. A journal
    entry goes whole; a hand-written note loses the chunk's lines. All of it is removed, or nothing.
    --query proposes only hits that match strongly (their relevance is shown); when none does, it
    refuses and removes nothing, --yes or not.

    \b
    Example:
      memsearch forget --session 7c1e9a52-3b4d-4f60-9a8e-0d2c4b6e8f10 --dry-run
      memsearch forget 3f2a9c1e8b7d6a50 --yes
      memsearch forget --query "staging database password" -k 2
    """
    from memsearch import redact
    from memsearch.engine import forget_apply
    from memsearch.engine.memory import open_memory
    from memsearch.errors import ForgetTargetError, NothingToForgetError

    if not (chunk_hashes or session or turn or anchor or query):
        raise ForgetTargetError(
            "nothing named to forget",
            hint="give a CHUNK_HASH, --session, --turn, --anchor or --query (see `memsearch forget --help`)",
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
    with open_memory(cfg, start=True) as memory:
        recovered = forget_apply.recover(cfg)
        if recovered:
            click.echo(f"Completed {plural(recovered, 'interrupted forget')}.")
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
            _confirm(len(blocks), flags)
        outcome = forget_apply.forget_blocks(blocks, memory, cfg, index_redactor)
    click.echo(
        f"Forgot {plural(len(blocks), 'block')}: {plural(len(outcome.changed), 'file')} rewritten, "
        f"{plural(len(outcome.removed), 'journal')} removed, "
        f"{plural(outcome.cache_deleted, 'cached vector')} deleted, reindexed."
    )


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
    """Every block the selectors name, each once, in file order (``redactors``: the one ``index``
    uses, the one for previews)."""
    from memsearch.engine.forget import blocks_for_chunk, blocks_for_entries
    from memsearch.errors import StaleChunkError

    index_redactor, preview_redactor = redactors
    found: list[Block] = []
    sizes = {"max_chunk_size": cfg.chunking.max_chunk_size, "overlap_lines": cfg.chunking.overlap_lines}

    def of_row(row: dict[str, Any]) -> list[Block]:
        return blocks_for_chunk(row, **sizes, redactor=index_redactor, shown=preview_redactor)

    for chunk_hash in chunk_hashes:
        found += of_row(memory.get_chunk(chunk_hash))
    if match:
        dirs = [str(Path(d).expanduser().resolve()) for d in (memory_dirs or [DEFAULT_MEMORY_DIR])]
        found += blocks_for_entries(dirs, match, preview_redactor)
    if query:
        import dataclasses

        from memsearch.engine.forget import forget_floor, strong_hits

        floor = forget_floor(cfg.search.min_relevance)
        hits = memory.search(query, top_k=top_k)
        strong = strong_hits(query, hits, floor)  # none: WeakMatchError, nothing is forgotten
        if len(strong) < len(hits):
            weak = len(hits) - len(strong)
            click.echo(f"Left out {plural(weak, 'weak hit')} (relevance below {floor:.2f}).")
        for row in strong:
            try:
                blocks = of_row(dict(row))
            except StaleChunkError as exc:  # one stale hit must not stop the others
                click.echo(f"Warning: skipped a hit: {exc.one_line()}", err=True)
                continue
            found += [dataclasses.replace(b, relevance=float(row["relevance"])) for b in blocks]
    unique = {(b.path, b.start, b.end): b for b in found}
    return [unique[k] for k in sorted(unique)]


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


def _confirm(count: int, flags: dict[str, Any]) -> None:
    """Ask on the terminal; with no input to ask on, say how to go on without asking."""
    from memsearch.errors import ConfirmationNeededError

    instead = f"memsearch forget ... --yes{store_flags(flags)}"
    try:
        confirmed = click.confirm(f"Forget {plural(count, 'block')}? This cannot be undone")
    except click.Abort:
        confirmed = False
    except RuntimeError:
        raise ConfirmationNeededError(
            "forget needs a yes, and there is no input to read one from",
            hint=f"add --yes (`{instead}`) to forget without asking",
        ) from None
    if not confirmed:
        raise ConfirmationNeededError(
            "forget declined: nothing was changed", hint=f"add --yes (`{instead}`) to forget without asking"
        )
