"""``memsearch search``: hybrid search over the index."""

from __future__ import annotations

from typing import Any

import click

from memsearch.cli.options import common_options, echo_json, resolve, store_flags
from memsearch.cli.render import shown
from memsearch.service import MAX_TOP_K  # the service refuses more (a huge top_k cost gigabytes)

#: Plain output shows this many characters of a chunk, then points at ``expand``. Every hit shows its
#: chunk hash (a ``Chunk:`` line after the original's ``Source:`` and ``Heading:``), short ones too.
PREVIEW_CHARS = 500


def _words(_ctx: click.Context, _param: click.Parameter, query: str) -> str:
    """The query, refused when blank: an empty query ranks every chunk alike (arbitrary hits)."""
    from memsearch.errors import EmptyQueryError

    if not query.strip():
        raise EmptyQueryError(
            "The search query is empty", hint='give words to search for, e.g. memsearch search "timeout"'
        )
    return query


@click.command("search")
@click.argument("query", callback=_words)
@click.option(
    "--top-k",
    "-k",
    type=click.IntRange(min=1, max=MAX_TOP_K),
    default=5,
    show_default=True,
    help=f"Number of results (at most {MAX_TOP_K}).",
)
@click.option("--source-prefix", default=None, help="Only results from files under this path.")
@common_options
@click.option(
    "--reranker-model",
    default=None,
    help="Reranker: a cross-encoder model, or jev:<model> for the remote Jev API ('' disables).",
)
@click.option("--json-output", "-j", is_flag=True, help="Print results as JSON.")
def search(query: str, top_k: int, source_prefix: str | None, json_output: bool, **flags: Any) -> None:
    """Search indexed memory for QUERY.

    \b
    Example:
      memsearch search "redis connection timeout" --top-k 3
      memsearch search "订单导出失败" --source-prefix ./memory --json-output
    """
    from memsearch.cli.recall_output import search_results
    from memsearch.memory import open_memory

    cfg = resolve(flags)
    with open_memory(cfg, start=True, keep_model=False) as memory:
        results = memory.run(memory.search(query, top_k=top_k, source_prefix=source_prefix))
    results = search_results(cfg, query, results, store_flags(flags))  # recall budget, recall log
    if json_output:
        echo_json(results)
        return
    if not results:
        click.echo("No results found.")
        return
    for i, r in enumerate(results, 1):
        click.echo(f"\n--- Result {i} (score: {r['score']:.4f}) ---")
        click.echo(f"Source: {shown(r['source'])}")
        if r.get("heading"):
            click.echo(f"Heading: {shown(r['heading'])}")
        click.echo(f"Chunk: {r['chunk_hash']}")  # for `memsearch expand`, short hits too
        content = r["content"]
        if len(content) > PREVIEW_CHARS:
            click.echo(content[:PREVIEW_CHARS])
            expand = f"memsearch expand {r['chunk_hash']}{store_flags(flags)}"
            click.echo(f"  ... [truncated, run '{expand}' for full content]")
        else:
            click.echo(content)
