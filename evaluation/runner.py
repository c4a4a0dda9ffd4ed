"""Index a dataset's corpus with one configuration, run every query, score it.

The indexing path is the product's, step for step (``memsearch.engine.index_pipeline``):
``chunk_markdown`` with
the configured size and overlap, ``clean_content_for_embedding`` for the text the model sees, the
reference chunk-ID formula, and rows upserted into a real Milvus Lite collection (in a temporary
directory) whose BM25 analyzer is the one under test. A test checks that the default
configuration stores exactly the rows ``MemSearch.index`` stores. Two chunking experiments exist
only here, as configuration variants: heading breadcrumbs in the embedded text, and merging tiny
sections into their neighbour.

Search runs through ``MilvusStore.search`` in one of its modes (``hybrid``, ``dense``, ``sparse``)
with the query embedded by the same provider; hybrid fuses by the weights ``MemSearch.search``
uses over ``search.candidates`` hits per leg (or by Milvus' plain RRF over 10 hits per leg, the
original's); the optional cross-encoder stage reranks the best 30 fused candidates, as
``MemSearch.search`` does. Latency is the wall time of that whole path per query (query embedding,
store search, reranking), after one warm-up query.
"""

from __future__ import annotations

import bisect
import hashlib
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evaluation.dataset import Dataset
from evaluation.metrics import DEPTH, Hit, query_scores, summarize
from memsearch.chunker import (
    Chunk,
    chunk_markdown,
    clean_content_for_embedding,
    find_headings,
    split_lines,
)
from memsearch.config.schema import DEFAULT_CANDIDATES
from memsearch.engine.index_pipeline import chunk_record


@dataclass(frozen=True)
class IndexConfig:
    """What decides the stored rows: analyzer, chunking, and what text is embedded."""

    analyzer: str = "auto"
    max_chunk_size: int = 1500
    overlap_lines: int = 2
    #: Prefix the embedded text with the chunk's parent headings ("A > B > C").
    breadcrumbs: bool = False
    #: Merge a chunk shorter than this many characters into the adjacent chunk of the same file
    #: (when the result still fits ``max_chunk_size``); 0 = off.
    merge_below: int = 0
    #: The provider of the dense leg ("" = the harness's model).
    provider: str = ""
    #: Give every chunk its second vector (the multilingual leg, ``engine.multilingual``).
    multilingual: bool = False

    @property
    def key(self) -> str:
        raw = repr(
            (
                self.analyzer,
                self.max_chunk_size,
                self.overlap_lines,
                self.breadcrumbs,
                self.merge_below,
                self.provider,
                self.multilingual,
            )
        )
        return hashlib.sha256(raw.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class RunConfig:
    """One row of the report: an index configuration, a search mode, an optional reranker."""

    name: str
    index: IndexConfig = field(default_factory=IndexConfig)
    mode: str = "hybrid"
    reranker: str = ""
    #: Hybrid fusion: "weighted" (``store.hybrid_weights``, what ``MemSearch.search`` does) or
    #: "rrf" (Milvus' plain RRF, the original memsearch's).
    fusion: str = "weighted"
    #: Hits per leg before a weighted fusion (``search.candidates``; the plain RRF rows fetch 10).
    candidates: int = DEFAULT_CANDIDATES


@dataclass
class RunResult:
    """Per-query scores and hits, summaries, and latency of one configuration on one dataset."""

    config: RunConfig
    dataset: str
    per_query: dict[str, dict[str, float]]
    hits: dict[str, list[Hit]]
    summary: dict[str, dict[str, float]]
    latencies_ms: list[float]
    chunks: int
    skipped: str = ""

    @property
    def latency_p50(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else 0.0

    @property
    def latency_mean(self) -> float:
        return statistics.fmean(self.latencies_ms) if self.latencies_ms else 0.0


# --- chunk variants -----------------------------------------------------------------------------


def breadcrumb_trails(lines: list[str]) -> tuple[list[int], list[list[str]]]:
    """For each heading (by 0-based line index), the titles of its enclosing headings and itself."""
    indexes: list[int] = []
    trails: list[list[str]] = []
    stack: list[tuple[int, str]] = []
    for h in find_headings(lines):
        while stack and stack[-1][0] >= h.level:
            stack.pop()
        stack.append((h.level, h.title))
        indexes.append(h.index)
        trails.append([title for _, title in stack])
    return indexes, trails


def breadcrumb(chunk: Chunk, indexes: list[int], trails: list[list[str]], lines: list[str]) -> str:
    """``Parent > Child`` for the section a chunk starts in; its own heading is included only when
    the chunk's text does not already begin with that heading line."""
    pos = bisect.bisect_right(indexes, chunk.start_line - 1) - 1
    if pos < 0:
        return ""
    trail = trails[pos]
    starts_with_heading = indexes[pos] == chunk.start_line - 1 and chunk.content.startswith(
        lines[indexes[pos]].strip()
    )
    shown = trail[:-1] if starts_with_heading else trail
    return " > ".join(shown)


def merge_tiny(chunks: list[Chunk], lines: list[str], below: int, max_size: int) -> list[Chunk]:
    """Merge chunks shorter than ``below`` characters with the next adjacent chunk of the file
    (a short last chunk joins the previous one), while the merged text fits ``max_size``."""
    if below <= 0 or len(chunks) < 2:
        return list(chunks)

    def joined(first: Chunk, last: Chunk) -> Chunk:
        content = "\n".join(lines[first.start_line - 1 : last.end_line]).strip()
        return Chunk(
            content, first.source, first.heading, first.heading_level, first.start_line, last.end_line
        )

    def adjacent(a: Chunk, b: Chunk) -> bool:
        # Only blank lines or headings of sections without text (which make no chunk) in between.
        between = lines[a.end_line : b.start_line - 1]
        return b.start_line > a.end_line and all(not ln.strip() or ln.startswith("#") for ln in between)

    out: list[Chunk] = []
    for chunk in chunks:
        if out and len(out[-1].content) < below and adjacent(out[-1], chunk):
            candidate = joined(out[-1], chunk)
            if len(candidate.content) <= max_size:
                out[-1] = candidate
                continue
        out.append(chunk)
    if len(out) >= 2 and len(out[-1].content) < below and adjacent(out[-2], out[-1]):
        candidate = joined(out[-2], out[-1])
        if len(candidate.content) <= max_size:
            out[-2:] = [candidate]
    return out


def corpus_chunks(path: Path, text: str, config: IndexConfig) -> list[tuple[Chunk, str]]:
    """The chunks of one file and the text embedded for each, under ``config``."""
    source = str(path)
    chunks = chunk_markdown(
        text, source, max_chunk_size=config.max_chunk_size, overlap_lines=config.overlap_lines
    )
    lines = split_lines(text)
    chunks = merge_tiny(chunks, lines, config.merge_below, config.max_chunk_size)
    indexes, trails = breadcrumb_trails(lines) if config.breadcrumbs else ([], [])
    out = []
    for chunk in chunks:
        embedded = clean_content_for_embedding(chunk.content)
        if config.breadcrumbs:
            trail = breadcrumb(chunk, indexes, trails, lines)
            embedded = f"{trail}\n{embedded}" if trail else embedded
        out.append((chunk, embedded))
    return out


# --- the harness --------------------------------------------------------------------------------


class Harness:
    """Builds one collection per (dataset, index configuration) and runs configurations on it.

    ``embedder`` embeds documents (wrap it in the embedding cache to pay for each text once across
    runs); ``query_embedder`` embeds queries (the bare provider, so latency is what a user sees).
    """

    def __init__(self, embedder: Any, query_embedder: Any, workdir: Path) -> None:
        self.embedder = embedder
        self.query_embedder = query_embedder
        self.workdir = workdir
        #: Other providers' (document embedder, query embedder), by provider name: the dense leg of
        #: an :attr:`IndexConfig.provider` row and the multilingual leg (:meth:`add_provider`).
        self._providers: dict[str, tuple[Any, Any]] = {}
        self._stores: dict[tuple[str, str], Any] = {}
        self._chunk_counts: dict[tuple[str, str], int] = {}
        self._rerankers: dict[str, Any] = {}

    @property
    def model(self) -> str:
        name: str = self.embedder.model_name
        return name

    def add_provider(self, name: str, embedder: Any, query_embedder: Any) -> None:
        """Make provider ``name`` available to rows that ask for it (``IndexConfig``)."""
        self._providers[name] = (embedder, query_embedder)

    def has_provider(self, name: str) -> bool:
        return name in self._providers

    def _embedders(self, config: IndexConfig) -> tuple[Any, Any]:
        if config.provider:
            return self._providers[config.provider]
        return self.embedder, self.query_embedder

    async def store_for(self, dataset: Dataset, config: IndexConfig) -> Any:
        """The collection holding ``dataset`` indexed under ``config`` (built on first request)."""
        from memsearch.store import MilvusStore

        key = (dataset.name, config.key)
        if key in self._stores:
            return self._stores[key]
        embedder, _ = self._embedders(config)
        store = MilvusStore(
            str(self.workdir / f"{_safe(dataset.name)}.db"),
            collection=f"eval_{config.key}",
            dimension=embedder.dimension,
            analyzer=config.analyzer,
        )
        chunks: list[tuple[str, Chunk]] = []
        texts: list[str] = []
        for path in sorted(dataset.corpus.resolve().rglob("*.md")):
            text = path.read_text(encoding="utf-8")
            for chunk, embedded in corpus_chunks(path, text, config):
                chunks.append((chunk.chunk_id(embedder.model_name), chunk))
                texts.append(embedded)
        for start in range(0, len(chunks), 256):
            vectors = await embedder.embed(texts[start : start + 256])
            part = chunks[start : start + 256]
            records = [chunk_record(cid, chunk, vec) for (cid, chunk), vec in zip(part, vectors, strict=True)]
            store.upsert(records)
        # Sealed before the queries: Milvus Lite otherwise rebuilds the BM25 index of its growing
        # segment at every sparse search (minutes per query set at 10,000 chunks).
        store.flush()
        if config.multilingual:  # the product's own step (index with embedding.multilingual on)
            from memsearch.engine.multilingual import PROVIDER, sync_sidecar

            await sync_sidecar(store, self._providers[PROVIDER][0])
        self._stores[key] = store
        self._chunk_counts[key] = len({chunk_id for chunk_id, _ in chunks})
        return store

    def reranker(self, model: str) -> Any:
        from memsearch.reranker import CrossEncoderReranker

        if model not in self._rerankers:
            self._rerankers[model] = CrossEncoderReranker(model)
        return self._rerankers[model]

    async def _search(self, store: Any, query: str, config: RunConfig) -> list[dict[str, Any]]:
        embedder, query_embedder = self._embedders(config.index)
        vector: Sequence[float] = [0.0] * embedder.dimension
        if config.mode != "sparse":
            vector = (await query_embedder.embed_query([query]))[0]
        from memsearch.engine.hybrid_search import RERANK_CANDIDATES
        from memsearch.store import hybrid_weights

        fetch = max(RERANK_CANDIDATES, DEPTH) if config.reranker else DEPTH
        weighted = config.fusion == "weighted"
        crossing = None
        if config.index.multilingual:  # the query's vector of the multilingual model: the third leg
            from memsearch.engine.multilingual import PROVIDER

            crossing = (await self._providers[PROVIDER][1].embed_query([query]))[0]
        results: list[dict[str, Any]] = store.search(
            vector,
            query_text=query,
            top_k=fetch,
            mode=config.mode,
            weights=hybrid_weights(query) if weighted else None,
            candidates=config.candidates if weighted else DEPTH,  # the original: 10 per leg
            multilingual=crossing,
        )
        if config.reranker:
            results = self.reranker(config.reranker).rerank(query, results, top_k=DEPTH)
        return results

    async def run(self, dataset: Dataset, config: RunConfig) -> RunResult:
        """Every query of ``dataset`` under ``config``: scores, hits and latency."""
        store = await self.store_for(dataset, config.index)
        root = dataset.corpus.resolve()
        if dataset.queries:
            await self._search(store, dataset.queries[0].query, config)  # warm-up: sessions, jieba
        per_query: dict[str, dict[str, float]] = {}
        hits: dict[str, list[Hit]] = {}
        latencies: list[float] = []
        for q in dataset.queries:
            started = time.perf_counter()
            results = await self._search(store, q.query, config)
            latencies.append((time.perf_counter() - started) * 1000)
            ranked = [_to_hit(r, root) for r in results[:DEPTH]]
            hits[q.qid] = ranked
            per_query[q.qid] = query_scores(ranked, q.gold)
        return RunResult(
            config,
            dataset.name,
            per_query,
            hits,
            summarize(dataset.queries, per_query),
            latencies,
            self._chunk_counts[(dataset.name, config.index.key)],
        )

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def _to_hit(result: dict[str, Any], root: Path) -> Hit:
    source = Path(str(result["source"]))
    try:
        rel = source.relative_to(root).as_posix()
    except ValueError:
        rel = source.as_posix()
    return Hit(rel, int(result["start_line"]), int(result["end_line"]))


def with_index(config: RunConfig, **changes: Any) -> RunConfig:
    """``config`` with its index configuration changed (for variant rows)."""
    return replace(config, index=replace(config.index, **changes))
