"""``memsearch migrate``: a memory's chunks copied to another store, vectors and chunk IDs as they
are, resumable, then verified.

Why: Milvus Lite is the right store for one machine up to a ceiling (docs/scaling.md); past it, or
for a team sharing one index, the memory moves to a Milvus server or Zilliz Cloud. Indexing again
there would embed every chunk again (the model's work is most of a full index: over an hour at
100,000 chunks with the default model on two cores); copying the rows with their vectors takes
seconds to minutes, and the chunk IDs stay the same, so the next ``index`` finds nothing to do.

How, so that it can be stopped and run again at any point:

- the source is read a page at a time in chunk-ID order, through the store's owner
  (``Memory.export_page``: a memory service or program holding the Lite store answers, and the
  store is never opened twice);
- the destination collection gets the source's schema, vector dimension and BM25 analyzer (the
  same tokens, so the same BM25 scores where the engine is the same);
- each page is compared with the destination's rows of the same chunk-ID range (the same cursor):
  a page already there (the same chunk IDs and vectors) is left alone, any other is upserted. So a
  run cut short (Ctrl-C, a lost connection) resumes by running it again: it skips what is there;
- then both stores are walked again side by side: every chunk ID, field and vector must be the
  same, and nothing more may be in the destination; anything else is one clear error.

The source is left as it was; pointing memsearch at the destination is the user's step
(``memsearch config set milvus.uri ...``), printed at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsearch.errors import MigrationError

if TYPE_CHECKING:
    from memsearch.engine.interface import Memory
    from memsearch.store import MilvusStore

__all__ = ["MigrateReport", "migrate"]

#: Rows per page read and written (each carries its vector: ~8 KB of JSON at 384 dimensions).
PAGE_ROWS = 500

#: Opens the destination store for the source's (dimension, BM25 analyzer).
OpenDestination = Callable[[int, str], "MilvusStore"]
#: Called after each page: (rows done, rows in all).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class MigrateReport:
    """What a migration did: the source and destination, the chunks in all, those copied now and
    those that were already there (a run resumed), and the verification's count."""

    source: str
    destination: str
    collection: str
    chunks: int
    copied: int
    already: int
    verified: int

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def migrate(
    memory: Memory,
    open_destination: OpenDestination,
    *,
    page: int = PAGE_ROWS,
    progress: Progress | None = None,
) -> MigrateReport:
    """Copy ``memory``'s store into the store ``open_destination`` opens, then verify it (see the
    module docstring). Raises :class:`~memsearch.errors.MigrationError` when the destination is
    the source or does not match the source after the copy."""
    first = memory.export_page("", page)
    info = first["store"]
    dimension = info["dimension"] or (len(first["rows"][0]["embedding"]) if first["rows"] else 0)
    destination = open_destination(int(dimension), str(info["analyzer"]))
    try:
        if (destination.uri, destination.collection) == (info["uri"], info["collection"]):
            raise MigrationError(
                f"the destination is the source ({info['uri']}, collection {info['collection']})",
                hint="give --to another store (a Milvus server URI), or --to-collection another name",
            )
        copied = already = 0
        rows, after = first["rows"], ""
        while rows:
            if _same(rows, destination.rows_after(after, len(rows))):
                already += len(rows)
            else:
                destination.upsert([_writable(row) for row in rows])
                copied += len(rows)
            if progress is not None:
                progress(copied + already, int(info["count"]))
            after = str(rows[-1]["chunk_hash"])
            rows = memory.export_page(after, page)["rows"]
        destination.flush()
        verified = _verify(memory, destination, page)
        return MigrateReport(
            str(info["uri"]), destination.uri, destination.collection, verified, copied, already, verified
        )
    finally:
        destination.close()


def _writable(row: dict[str, Any]) -> dict[str, Any]:
    """A source row as the store writes it (the stored fields; the BM25 vector is the server's)."""
    return {key: row[key] for key in STORED_FIELDS}


#: The fields a chunk is written with (the BM25 vector is the server's to compute).
STORED_FIELDS = (
    "chunk_hash",
    "embedding",
    "content",
    "source",
    "heading",
    "heading_level",
    "start_line",
    "end_line",
)


def _same(rows: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> bool:
    """Whether the destination's rows of a page's chunk-ID range are the page's rows, field by field
    and vector by vector (floats as stored: both sides hold float32 values)."""
    return len(rows) == len(theirs) and all(
        all(mine[key] == other.get(key) for key in STORED_FIELDS)
        for mine, other in zip(rows, theirs, strict=True)
    )


def _verify(memory: Memory, destination: MilvusStore, page: int) -> int:
    """Walk both stores side by side in chunk-ID order: the same rows, and none more in the
    destination; returns the rows compared. MigrationError at the first difference."""
    after, compared = "", 0
    while True:
        rows = memory.export_page(after, page)["rows"]
        theirs = destination.rows_after(after, len(rows) or 1)
        if not rows:
            if theirs:
                raise MigrationError(
                    f"the destination holds chunks the source does not (from {theirs[0]['chunk_hash']} on)",
                    hint="migrate into a new collection (--to-collection NAME), or drop the "
                    "destination collection first; the source is unchanged",
                )
            return compared
        if not _same(rows, theirs):
            at = next(i for i, row in enumerate(rows) if i >= len(theirs) or not _same([row], [theirs[i]]))
            raise MigrationError(
                f"the destination does not match the source after the copy (first difference at chunk "
                f"{rows[at]['chunk_hash']})",
                hint="run `memsearch migrate` again (it copies what is missing); the source is unchanged",
            )
        compared += len(rows)
        after = str(rows[-1]["chunk_hash"])
