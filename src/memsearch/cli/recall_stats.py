"""``memsearch stats --recall``: the recall log (:mod:`memsearch.agent.recall_log`) summed per session."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import click

from memsearch.cli.options import echo_json

__all__ = ["show_recall"]


def show_recall(cfg: Any, days: int, json_output: bool) -> None:
    """Print one row per session of ``cfg``'s collection in the last ``days`` days, flagging the
    sessions where memory was never consulted (no search, no expand). ``skipped`` counts the
    prompts whose auto-inject found nothing at or above the strong-match floor (nothing injected)."""
    from memsearch.agent import recall_log

    rows = recall_log.summarise(recall_log.read_events(cfg.milvus.collection, time.time() - days * 86400))
    if json_output:
        echo_json(
            {
                "collection": cfg.milvus.collection,
                "days": days,
                "logging": recall_log.enabled(cfg),
                "sessions": [row.to_dict() for row in rows],
            }
        )
        return
    if not recall_log.enabled(cfg):
        click.echo("Recall log: off (telemetry.recall = false or MEMSEARCH_RECALL_LOG=0)")
    if not rows:
        click.echo(f"No recall events for collection {cfg.milvus.collection} in the last {days} days.")
        return
    click.echo(f"Recall, collection {cfg.milvus.collection}, last {days} days:")
    head = ("session", "host", "started", "injected", "skipped", "searches", "hits", "expands", "captures")
    table: list[tuple[str, ...]] = [head]
    for row in rows:
        started = dt.datetime.fromtimestamp(row.started).strftime("%Y-%m-%d %H:%M")
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
