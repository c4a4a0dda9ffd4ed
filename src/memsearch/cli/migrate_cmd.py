"""``memsearch migrate``: copy the index to another store, then verify it (``engine.migrate_store``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from memsearch.cli.options import echo_json, resolve, store_options
from memsearch.engine.migrate_store import PAGE_ROWS
from memsearch.engine.operations import MAX_EXPORT_ROWS


@click.command("migrate")
@click.option(
    "--to",
    "destination",
    required=True,
    metavar="URI",
    help="The store to copy into: a Milvus server (http://host:19530), Zilliz Cloud, or a Lite path.",
)
@click.option("--to-token", default=None, help="Its token, or env:VAR (Milvus server / Zilliz Cloud).")
@click.option("--to-collection", default=None, help="The collection there (default: the source's name).")
@click.option(
    "--batch",
    type=click.IntRange(1, MAX_EXPORT_ROWS),
    default=PAGE_ROWS,
    show_default=True,
    help="Chunks per page read and written (each with its vector).",
)
@click.option("--json-output", "-j", is_flag=True, help="Print what was done as JSON.")
@store_options
def migrate(
    destination: str,
    to_token: str | None,
    to_collection: str | None,
    batch: int,
    json_output: bool,
    **flags: Any,
) -> None:
    """Copy this store's chunks, with their vectors and chunk IDs, to another store; then verify.

    Nothing is embedded again, so a Milvus Lite index moves to a Milvus server in minutes. Stopped
    part way (Ctrl+C, a lost connection), run it again: it skips what is already there. The copy is
    then read back and compared with the source, chunk by chunk. The source is left as it is:
    point memsearch at the copy when you are ready.

    \b
    Example:
      memsearch migrate --to http://milvus.internal:19530
      memsearch config set milvus.uri http://milvus.internal:19530
    """
    from memsearch.config.env import resolve_env_ref
    from memsearch.engine.memory import open_memory
    from memsearch.engine.migrate_store import migrate as copy_store
    from memsearch.store import MilvusStore

    cfg = resolve(flags)
    collection = to_collection or cfg.milvus.collection
    token = resolve_env_ref(to_token, key="--to-token") if to_token else None

    def open_destination(dimension: int, analyzer: str) -> MilvusStore:
        return MilvusStore(
            destination,
            token=token,
            collection=collection,
            dimension=dimension,
            analyzer=analyzer,
            lock_timeout=cfg.milvus.lock_timeout,
        )

    shown = [0]

    def progress(done: int, total: int) -> None:
        interactive = not json_output and sys.stderr.isatty()
        if interactive and total and done * 10 // total > shown[0]:  # every tenth, on a terminal
            shown[0] = done * 10 // total
            click.echo(f"  {done:,} of {total:,} chunks", err=True)

    with open_memory(cfg) as memory:
        report = copy_store(memory, open_destination, page=batch, progress=progress)
    if json_output:
        echo_json(report.to_dict())
        return
    click.echo(
        f"Copied {report.chunks:,} chunks to {report.destination} (collection {report.collection}): "
        f"{report.copied:,} written, {report.already:,} already there."
    )
    click.echo(f"Verified: {report.verified:,} chunks, the same chunk IDs, text and vectors as the source.")
    click.echo(f"To use it: memsearch config set milvus.uri {report.destination}")
    if collection != cfg.milvus.collection:
        click.echo(f"      and: memsearch config set milvus.collection {collection}")
