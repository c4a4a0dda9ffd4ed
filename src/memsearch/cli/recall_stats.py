"""``memsearch stats --recall``: the recall log summed per session (:mod:`memsearch.agent.recall_report`,
the report the console's "What memory did" view draws too)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from memsearch.cli.options import echo_json

__all__ = ["show_recall"]


def show_recall(cfg: Any, days: int, json_output: bool) -> None:
    """Print one row per session of ``cfg``'s collection in the last ``days`` days, flagging the
    sessions where memory was never consulted (no search, no expand). ``skipped`` counts the
    prompts whose auto-inject found nothing at or above the strong-match floor (nothing injected)."""
    from memsearch.agent.recall_log import SessionRecall
    from memsearch.agent.recall_report import report

    data = report(cfg, cfg.milvus.collection, days)
    if json_output:
        echo_json(data)
        return
    fields = SessionRecall.__dataclass_fields__
    rows = [SessionRecall(**{k: v for k, v in row.items() if k in fields}) for row in data["sessions"]]
    if not data["logging"]:
        click.echo("Recall log: off (telemetry.recall = false or MEMSEARCH_RECALL_LOG=0)")
    if not rows:
        click.echo(f"No recall events for collection {cfg.milvus.collection} in the last {days} days.")
        return
    click.echo(f"Recall, collection {cfg.milvus.collection}, last {days} days:")
    head = ("session", "host", "started", "injected", "skipped", "searches", "hits", "expands", "captures")
    table: list[tuple[str, ...]] = [head]
    for row in rows:
        try:
            started = dt.datetime.fromtimestamp(row.started).strftime("%Y-%m-%d %H:%M")
        except (OverflowError, ValueError, OSError):  # a time no calendar day holds (a damaged log)
            started = "?"
        counts = (row.injected_tokens, row.skips, row.searches, row.hits, row.expands, row.captures)
        table.append((row.session[:36], row.host or "?", started, *(str(n) for n in counts)))
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for i, line in enumerate(table):
        text = "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        if i and not rows[i - 1].consulted:
            text += "  <- memory never consulted"
        click.echo(text)
    idle = sum(1 for row in rows if not row.consulted)
    click.echo(f"{len(rows)} session(s); {idle} never consulted memory (no search, no expand).")
    for call in data["llm"]:
        click.echo(
            f"Model calls for {call['purpose']}: {call['calls']}"
            + (f" ({call['failed']} failed)" if call["failed"] else "")
            + f", {call['prompt_tokens']} tokens sent, {call['answer_tokens']} received."
        )
