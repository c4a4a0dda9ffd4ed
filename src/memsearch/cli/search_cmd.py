"""``memsearch search``: hybrid search over the index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from memsearch.cli.options import common_options, echo_json, resolve, store_flags
from memsearch.cli.render import shown
from memsearch.engine.operations import MAX_TOP_K  # the memory refuses more (a huge top_k cost gigabytes)

if TYPE_CHECKING:
    from memsearch.engine.timeframe import Window

#: Plain output shows this many characters of a chunk, then points at ``expand``. Every hit shows its
#: chunk hash (a ``Chunk:`` line after the original's ``Source:`` and ``Heading:``), short ones too.
PREVIEW_CHARS = 500


class _Relevance(click.ParamType):  # type: ignore[type-arg]
    """A relevance from 0 to 1, or ``floor``: the strong-match floor of the configuration."""

    name = "X|floor"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float | str:
        if value == FLOOR:
            return FLOOR
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not 0 <= number <= 1:
            self.fail(f"{value!r} is not a relevance from 0 to 1, nor 'floor'", param, ctx)
        return number


#: ``--min-relevance floor``: the configured strong-match floor (``search.min_relevance``).
FLOOR = "floor"


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
@click.option(
    "--since",
    default=None,
    metavar="DAY",
    help="Only hits of this day or later: 2026-11-03, 7d, 2w, yesterday, last monday, 昨天, 三天前.",
)
@click.option("--until", default=None, metavar="DAY", help="Only hits of this day or earlier (same forms).")
@click.option(
    "--time-phrases/--no-time-phrases",
    default=True,
    show_default=True,
    help="Read a time phrase in QUERY ('last week', '上周') as a window of days (and search without it).",
)
@click.option(
    "--recency-half-life",
    type=click.FloatRange(min=0, max=36_500),
    default=None,
    metavar="DAYS",
    help="Weigh each score by 0.5^(age/DAYS): newer memory first (search.recency_half_life; 0 = off).",
)
@click.option(
    "--min-relevance",
    type=_Relevance(),
    default=None,
    help="Leave out hits whose relevance is below X (0-1), or below the strong-match floor "
    "(search.min_relevance) with 'floor'. Default: every hit; the floor when an agent reads the output.",
)
@common_options
@click.option(
    "--reranker-model",
    default=None,
    help="Reranker: a cross-encoder model, or jev:<model> for the remote Jev API ('' disables).",
)
@click.option("--json-output", "-j", is_flag=True, help="Print results as JSON.")
def search(
    query: str,
    top_k: int,
    source_prefix: str | None,
    since: str | None,
    until: str | None,
    time_phrases: bool,
    min_relevance: float | str | None,
    json_output: bool,
    **flags: Any,
) -> None:
    """Search indexed memory for QUERY.

    A time phrase in QUERY ("last week", "yesterday", "in October", "上周", "三天前") limits the
    hits to its days and is left out of the words searched; --since/--until set the days instead.
    Each hit shows its relevance (0-1: how likely it answers QUERY); with --min-relevance, hits
    below it are left out, and "No strong match" says memory holds nothing on QUERY.

    \b
    Example:
      memsearch search "redis connection timeout" --top-k 3
      memsearch search "订单导出失败" --source-prefix ./memory --json-output
      memsearch search "what did we decide last week about retries"
      memsearch search "retry policy" --since 2026-11-01 --until 2026-11-30
      memsearch search "staging database password" --min-relevance floor
    """
    from memsearch.cli.recall_output import for_agent, search_results
    from memsearch.engine.memory import open_memory
    from memsearch.engine.timeframe import search_window

    cfg = resolve(flags)
    text, window = search_window(query, since, until, time_phrases=time_phrases)  # bad days: Error
    half_life = cfg.search.recency_half_life or None
    if min_relevance is None and for_agent():
        min_relevance = FLOOR  # what a model reads keeps to the floor, as MCP and auto-inject do
    floor = cfg.search.min_relevance if min_relevance == FLOOR else float(min_relevance or 0)
    with open_memory(cfg, start=True) as memory:
        results = memory.search(
            query,
            top_k=top_k,
            source_prefix=source_prefix,
            since=since,
            until=until,
            time_phrases=time_phrases,
            recency_half_life=half_life,
        )
    if window is not None:
        _say_window(text, window, results)
    _say_gone(results, store_flags(flags))
    best = max((r["relevance"] for r in results), default=0.0)
    strong = [r for r in results if r["relevance"] >= floor]
    weak = bool(results) and not strong  # every hit under the floor: memory holds nothing on it
    results = search_results(cfg, query, strong, store_flags(flags))  # recall budget, recall log
    if json_output:
        if weak:
            click.echo(_nothing_strong(best, floor), err=True)
        echo_json(results)
        return
    if not results:
        click.echo(_nothing_strong(best, floor) if weak else "No results found.")
        return
    for i, r in enumerate(results, 1):
        click.echo(f"\n--- Result {i} (score: {r['score']:.4f}, relevance: {r['relevance']:.2f}) ---")
        click.echo(f"Source: {shown(r['source'])}")
        if r.get("heading"):
            click.echo(f"Heading: {shown(r['heading'])}")
        click.echo(f"Chunk: {r['chunk_hash']}")  # for `memsearch expand`, short hits too
        if r.get("date"):
            click.echo(f"Date: {r['date']}" + (f" {r['time']}" if r.get("time") else ""))
        content = r["content"]
        if len(content) > PREVIEW_CHARS:
            click.echo(content[:PREVIEW_CHARS])
            expand = f"memsearch expand {r['chunk_hash']}{store_flags(flags)}"
            click.echo(f"  ... [truncated, run '{expand}' for full content]")
        else:
            click.echo(content)


def _say_gone(results: list[dict[str, Any]], flags: str) -> None:
    """Hits whose file is not on this machine any more (moved or deleted since it was indexed), on
    stderr with the command that removes their chunks."""
    from memsearch.engine.index_scan import gone_path, prune_command

    gone = [path for path in (gone_path(str(r["source"])) for r in results) if path is not None]
    if gone:
        hits = "1 hit is" if len(gone) == 1 else f"{len(gone)} hits are"
        click.echo(
            f"Note: {hits} from files not found on this machine (moved or deleted?); "
            f"`{shown(prune_command(gone))}{flags}` removes them from the index.",
            err=True,
        )


def _nothing_strong(best: float, floor: float) -> str:
    """What hits all under the floor mean: memory holds nothing on the query (worded so a model
    stops rewording the search)."""
    return (
        f"No strong match in memory: the best hit has relevance {best:.2f}, under the floor of "
        f"{floor:.2f}. Memory holds nothing on this; answer without it."
    )


def _say_window(text: str, window: Window, results: list[dict[str, Any]]) -> None:
    """The days searched, on stderr (stdout keeps the original's shapes: the JSON list, the hits)."""
    where = f"{window}" + (
        f' (from "{shown(window.phrase)}"; searched for "{shown(text)}")' if window.phrase else ""
    )
    click.echo(f"Time window: {where}", err=True)
    if window.phrase and results and not any(r.get("in_window") for r in results):
        click.echo("Nothing indexed in that window: hits of any day.", err=True)
