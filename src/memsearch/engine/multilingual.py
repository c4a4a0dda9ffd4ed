"""The multilingual leg at index time: the sidecar's vectors brought level with the chunks.

With ``embedding.multilingual`` on, every chunk has a second vector from the multilingual model
(the ``use`` provider) in the store's sidecar (``memsearch.store.multilingual``). After an
``index`` run has written the chunk collection, :func:`sync_sidecar` embeds the chunks the sidecar
lacks and drops the vectors of chunks that are gone. Why after, from the stored chunks, rather than
beside each new chunk: the chunk collection is the truth, and it is also written by processes with
the leg off and by the original memsearch; reading what it holds catches up with all of them, and
the first run after the leg is turned on is the same code embedding every chunk (with a progress
bar of its own). A run that changed some files only looks at those files' chunks, unless the two
collections' counts differ (then at all of them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsearch.chunker import clean_content_for_embedding
from memsearch.store.filters import escape_filter_value
from memsearch.store.rows import chunked, stored_value

if TYPE_CHECKING:
    from memsearch.core import MemSearch
    from memsearch.embeddings import EmbeddingProvider
    from memsearch.engine.index_pipeline import Progress
    from memsearch.store import MilvusStore

logger = logging.getLogger("memsearch")

#: The provider of the multilingual leg (a row of ``memsearch.embeddings.PROVIDERS``).
PROVIDER = "use"
#: Chunks embedded and upserted per step.
STEP = 64
#: Sources per ``source in [...]`` query.
_SOURCES_PER_QUERY = 200
#: The label of the leg's progress bar (``PhasedProgress``).
PHASE = "Multilingual vectors"


def leg_embedder(ms: MemSearch) -> EmbeddingProvider:
    """``ms``'s multilingual model (created on first use, behind the embedding cache like the
    default model). Raises ``MissingDependencyError`` with the install command when the
    ``multilingual`` extra is not installed."""
    if ms._leg is None:
        from memsearch.embeddings import get_provider

        provider = get_provider(PROVIDER)
        if ms._use_cache:
            from memsearch.embeddings.cache import with_cache

            provider = with_cache(provider)
        ms._leg = provider
    return ms._leg


def leg_model(ms: MemSearch) -> str:
    """The multilingual leg's model when ``ms`` has the leg on, else "" (no import, no model)."""
    if not ms._multilingual:
        return ""
    from memsearch.embeddings import DEFAULT_MODELS

    return DEFAULT_MODELS[PROVIDER]


#: The stores (URI, collection) already told that they have no multilingual vectors.
_WARNED: set[tuple[str, str]] = set()


def warn_no_vectors(ms: MemSearch) -> None:
    """Say once per process and store that the leg is on but the store has no second vectors yet."""
    if (ms._uri, ms._collection) in _WARNED:
        return
    _WARNED.add((ms._uri, ms._collection))
    logger.warning(
        "memsearch: embedding.multilingual is on, but this index has no multilingual vectors yet; "
        "searching without them (run `memsearch index` to add them)"
    )


@dataclass(frozen=True)
class SyncReport:
    """What a sync did: vectors embedded, stale ones dropped, whether it looked at every chunk."""

    embedded: int = 0
    dropped: int = 0
    full: bool = False


async def sync_sidecar(
    store: MilvusStore,
    embedder: EmbeddingProvider,
    *,
    sources: Iterable[str] | None = None,
    progress: Progress | None = None,
) -> SyncReport:
    """Give every chunk of ``sources`` (None: of the store) a vector of ``embedder`` in the
    sidecar, and drop the sidecar's vectors of chunks no longer stored (see the module docstring).
    The sidecar is created, or re-created for another model, first."""
    from memsearch.engine.index_pipeline import start_phase

    if not store.exists:
        return SyncReport()
    sidecar = store.multilingual
    created = sidecar.ensure(embedder.model_name, embedder.dimension)
    full = sources is None or created or sidecar.count() != store.count()
    if full:
        chunks = {row["chunk_hash"]: row for row in store.query()}
        have = sidecar.hashes()
    else:
        wanted = sorted({stored_value("source", s) for s in sources or ()})
        chunks, have = {}, set()
        for batch in chunked(wanted, _SOURCES_PER_QUERY):
            expr = "source in [" + ", ".join(f'"{escape_filter_value(s)}"' for s in batch) + "]"
            chunks.update({row["chunk_hash"]: row for row in store.query(filter_expr=expr)})
            have |= sidecar.hashes_where(expr)
    stale = sorted(have - set(chunks))
    sidecar.delete_by_hashes(stale)
    missing = [row for key, row in chunks.items() if key not in have]
    if missing:
        start_phase(progress, PHASE, len(missing))
    done = 0
    for part in chunked(missing, STEP):
        texts = [clean_content_for_embedding(str(row.get("content") or "")) for row in part]
        vectors = await embedder.embed(texts)
        pairs = zip(part, vectors, strict=True)
        sidecar.upsert([(str(row["chunk_hash"]), str(row["source"]), vec) for row, vec in pairs])
        done += len(part)
        if progress:
            progress(done, len(missing))
    if missing or stale:
        sidecar.flush()
    return SyncReport(len(missing), len(stale), full)


def leg_state(store: MilvusStore) -> dict[str, Any]:
    """For ``stats``: the sidecar's model and how many chunks have a vector in it."""
    sidecar = store.multilingual
    model = sidecar.model()
    return {"model": model, "vectors": sidecar.count() if model is not None else 0}
