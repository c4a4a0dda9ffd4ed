"""An ``index`` run's writing steps: which chunks to embed, the embed-and-upsert pipeline, and
finishing each file (its stale chunks dropped, its manifest entry written) once all its new chunks
are in (``memsearch.engine.indexer`` runs them after the scan).

Order of writes: new chunks are embedded and upserted first, stale chunks of a file are deleted
only after all of its new chunks are in, so a failed embedding (a network error, a rate limit)
never leaves a file half-indexed until the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsearch.chunker import Chunk, clean_content_for_embedding
from memsearch.engine.index_scan import FileWork
from memsearch.engine.manifest import Manifest
from memsearch.errors import EmbeddingError
from memsearch.index_report import format_error

if TYPE_CHECKING:
    from memsearch.embeddings import EmbeddingProvider
    from memsearch.store import MilvusStore

Progress = Callable[[int, int], None]


class PhasedProgress:
    """A progress callback that is told when a run moves to another phase (the CLI's bar starts
    a new bar with the phase's label): ``index`` embeds the chunks, then, with the multilingual leg
    on, their second vectors (``engine.multilingual``). A plain ``(done, total)`` callable gets the
    phases one after the other."""

    def phase(self, label: str, total: int) -> None:
        """A new phase of ``total`` steps begins (its ``(done, total)`` calls follow)."""

    def __call__(self, done: int, total: int) -> None:
        """``done`` of ``total`` steps of the current phase."""


def start_phase(progress: Progress | None, label: str, total: int) -> None:
    """Tell ``progress`` that a phase begins, when it is one that shows phases."""
    if isinstance(progress, PhasedProgress):
        progress.phase(label, total)


#: Chunks embedded and upserted per step. The provider splits a step into its own (often tiny)
#: batches; a larger step keeps Milvus upserts few and cheap.
UPSERT_BATCH = 64
#: Rows upserted between flushes on Milvus Lite. Lite keeps unflushed rows in a write buffer and
#: its flush builds the new segment and its indexes in memory at once, then merges segments in the
#: background: flushing every few thousand rows bounds that peak and needs fewer merges (the
#: figures are in docs/scaling.md). A server seals segments itself, and frequent flushes there are
#: discouraged.
LITE_FLUSH_ROWS = 5000


def mark_new_chunks(store: MilvusStore, work: list[FileWork], *, force: bool) -> None:
    """Which chunks of each changed file the store lacks (all of them with ``force``; a chunk ID
    twice in a file once), and which of its stored chunks are stale."""
    existing = store.hashes_by_sources([w.source for w in work]) if work else {}
    for w in work:
        old_ids = existing.get(w.source, set())
        seen: set[str] = set()
        for i, cid in enumerate(w.ids):
            if cid in seen:
                continue
            seen.add(cid)
            if force or cid not in old_ids:
                w.to_embed.append(i)
        w.stale = old_ids - set(w.ids)
        w.remaining = len(w.to_embed)


async def embed_and_store(
    store: MilvusStore,
    embedder_factory: Callable[[], EmbeddingProvider],
    work: list[FileWork],
    progress: Progress | None,
    *,
    release: bool,
    clock: EmbedClock | None = None,
) -> int:
    """Embed the new chunks of all changed files in shared batches, upserting each batch.

    Pipelined: batch k is upserted on a worker thread while batch k+1 is embedded. The model
    releases the GIL and Milvus Lite's upsert (BM25 tokenising, writes) is Python, so on 2 cores
    the store's work hides behind the embedding instead of adding to it. One upsert at a time,
    in batch order; a failure stops the run after the batches before it are stored. With
    ``release``, a local model is dropped once the last batch is embedded.
    """
    todo = [(w, i) for w in work for i in w.to_embed]
    if not todo:
        return 0
    embedder = embedder_factory()  # not before: a run with nothing to embed never asks for it
    batch = max(UPSERT_BATCH, embedder.batch_size)
    done = 0
    unflushed = 0
    storing: asyncio.Future[int] | None = None
    stored_part: list[tuple[FileWork, int]] = []

    def store_batch(records: list[dict[str, Any]]) -> int:
        nonlocal unflushed
        written = store.upsert(records)
        unflushed += len(records)
        if store.is_local and unflushed >= LITE_FLUSH_ROWS:
            store.flush()
            unflushed = 0
        return written

    async def settle() -> None:
        """Wait for the upsert in flight and count its chunks as stored."""
        nonlocal storing, done
        if storing is None:
            return
        pending, storing = storing, None
        await pending
        for w, _ in stored_part:
            w.remaining -= 1
        done += len(stored_part)
        if progress:
            progress(done, len(todo))

    start_phase(progress, "Embedding", len(todo))
    if progress:
        progress(0, len(todo))
    try:
        for start in range(0, len(todo), batch):
            part = todo[start : start + batch]
            texts = [clean_content_for_embedding(w.chunks[i].content) for w, i in part]
            vectors = await embed(embedder, texts, clock)
            if release and start + batch >= len(todo):  # the last batch: drop the model
                embedder.release_model()
            pairs = zip(part, vectors, strict=True)
            records = [chunk_record(w.ids[i], w.chunks[i], vec) for (w, i), vec in pairs]
            await settle()
            stored_part = part
            storing = asyncio.ensure_future(asyncio.to_thread(store_batch, records))
        await settle()
    finally:
        if storing is not None:  # an embedding failed: let the upsert in flight finish first
            with contextlib.suppress(Exception):
                await settle()
    return done


def finish_files(store: MilvusStore, work: list[FileWork], manifest: Manifest) -> int:
    """Files whose new chunks are all in: drop their stale chunks and record them in the manifest
    (a file left partly indexed leaves it, to be retried next run); returns chunks deleted."""
    deleted = 0
    for w in work:
        if w.remaining:
            manifest.files.pop(w.source, None)  # partially indexed: retry next run
            continue
        if w.stale:
            store.delete_by_hashes(sorted(w.stale))
            deleted += len(w.stale)
        manifest.files[w.source] = w.entry
    return deleted


def chunk_record(chunk_id: str, chunk: Chunk, vector: Sequence[float]) -> dict[str, Any]:
    """The row upserted for one chunk. ``content`` is the chunk's original text, not the cleaned text
    that was embedded: search results and ``expand`` show what the file says, and the original
    stores the same, so indexes are shared."""
    return {
        "chunk_hash": chunk_id,
        "embedding": list(vector),
        "content": chunk.content,
        "source": chunk.source,
        "heading": chunk.heading,
        "heading_level": chunk.heading_level,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
    }


def retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a background warm-up's outcome as seen: if it failed, the embedding that needs the model
    fails the same way and reports it; a run with nothing to embed must not fail for it."""
    if not future.cancelled():
        future.exception()


@dataclass
class EmbedClock:
    """The seconds one index run waited for its embedder (``IndexReport.embed_seconds``): what the
    model costs, against everything else the run does."""

    seconds: float = 0.0


async def embed(
    embedder: EmbeddingProvider, texts: list[str], clock: EmbedClock | None = None
) -> list[list[float]]:
    """``embedder.embed(texts)``, one vector per text, any failure as one :class:`EmbeddingError`;
    its wall time added to ``clock`` (a failure ends the run, so its time is never reported)."""
    start = time.perf_counter()
    try:
        vectors = await embedder.embed(texts)
    except EmbeddingError:
        raise
    except Exception as exc:  # an SDK error we did not map: still one clear line
        raise EmbeddingError(f"embedding failed: {format_error(exc)}") from exc
    if len(vectors) != len(texts):
        raise EmbeddingError(f"the embedding provider returned {len(vectors)} vectors for {len(texts)} texts")
    if clock is not None:
        clock.seconds += time.perf_counter() - start
    return vectors
