"""What the fast search keeps of each sealed Milvus Lite segment, and which of its rows are live.

Why a module of its own: a sealed segment never changes (its Parquet file is immutable), so what
the fast search derives from it (the BM25 postings, the unit vectors) is kept per segment object and
survives every write that only adds a segment or a tombstone. Before, a write (one changed file:
a new segment of a few rows, a few tombstones) made the next search rebuild every segment's arrays
and walk every row's key in Python: seconds at 100,000 chunks, on the first search after each hook
capture (docs/scaling.md). Now that search derives only what the write changed:

- :func:`live_masks`: the live rows of a snapshot from the engine's own key maps (``pk_to_row``):
  only the keys of the segments other than the largest are looked up, and only the tombstones'
  keys; the engine walks every key of every segment.
- :class:`SegmentArrays`: per segment, its BM25 postings (built once), the masks of its long
  filters (a window of days), and its unit vectors of the live rows; when rows die (they only ever
  die in a sealed segment) the unit vectors are taken from the previous ones (a copy of the rows
  left) instead of normalised again.

Each array repeats the engine's arithmetic so that answers stay the engine's own, bit for bit (see
``fast_search``). :func:`share_engine_vectors` also gives back memory the engine holds twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


class Bm25:
    """One segment's BM25 index as arrays, decoded from its stored sparse vectors in one pass.

    The engine builds the same index (``SparseInvertedIndex.build`` over every row, no mask) on a
    segment's first BM25 search, a Python loop over every term of every row: ~5 s at 20,000 chunks,
    and several hundred MB of tuples a memory service keeps. Here the column's packed
    ``(uint32 term, float32 tf)`` pairs are read as one NumPy array and grouped by term (stable, so
    each term's rows stay in row order, as the engine appends them). What a posting contributes
    apart from the query's weight depends on the segment alone (its lengths, their mean, the
    term's document count), so it is computed here once, with the engine's arithmetic: per
    posting its normalised term frequency (``norm``), per term its ``idf``. Postings take 8 bytes
    (an int32 row and a float32). :meth:`build` returns None for a column it cannot read this way
    (nulls, another type, a term twice in a row); the engine answers then.
    """

    def __init__(self, lengths: Any, terms: Any, starts: Any, rows: Any, norm: Any, idf: list[float]) -> None:
        self.doc_count = len(lengths)
        self.slot = {int(term): i for i, term in enumerate(terms.tolist())}
        self.starts = starts  # term i's postings: rows[starts[i]:starts[i + 1]]
        self.rows = rows  # int32, in row order within a term
        self.norm = norm  # float32, the engine's tf_norm of each posting
        self.idf = idf  # per term, a Python float as the engine's

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.norm.nbytes + self.starts.nbytes)

    @classmethod
    def build(cls, table: Any, field: str, k1: float, b: float) -> Bm25 | None:
        import numpy as np
        import pyarrow as pa

        column = table.column(field).combine_chunks()
        if column.type != pa.binary() or column.null_count:
            return None
        n = len(column)
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=n + 1, offset=column.offset * 4)
        sizes = np.diff(offsets)
        if (sizes % 8).any():
            return None
        first, last = int(offsets[0]), int(offsets[-1])
        pairs = np.frombuffer(
            column.buffers()[2] if last > first else b"",
            dtype=np.dtype([("term", "<u4"), ("tf", "<f4")]),
            count=(last - first) // 8,
            offset=first if last > first else 0,
        )
        row_of = np.repeat(np.arange(n, dtype=np.int32), sizes // 8)
        tf = pairs["tf"].astype(np.float32)
        if not np.array_equal(tf, np.floor(tf)) or (tf < 0).any():
            return None  # not term counts: the lengths' sums would depend on their order
        # Document lengths are sums of whole term counts: exact in any order and precision.
        lengths = np.bincount(row_of, weights=tf, minlength=n).astype(np.float32)
        order = np.argsort(pairs["term"], kind="stable")
        terms_sorted = pairs["term"][order]
        rows = row_of[order]
        del row_of
        if terms_sorted.size > 1:
            same = (terms_sorted[1:] == terms_sorted[:-1]) & (rows[1:] == rows[:-1])
            if same.any():
                return None  # a term twice in one row: the engine's dict keeps one
        terms, starts = np.unique(terms_sorted, return_index=True)
        del terms_sorted
        starts = np.append(starts, rows.size).astype(np.int64)
        total = float(lengths.sum(dtype="float64"))
        avgdl = total / n if n else 0.0
        avgdl = avgdl if avgdl > 0 else 1.0
        tf32 = tf[order]
        del tf, order
        # sparse_inverted.search: tf_norm = (tf * (k1 + 1.0)) / (tf + k1 * (1.0 - b + b * dl / avgdl)),
        # tf a Python float meeting float32 values (NumPy 2 rounds the Python float to float32).
        dl = lengths[rows]
        norm = (tf32.astype(np.float64) * (k1 + 1.0)).astype(np.float32) / (
            tf32 + k1 * (1.0 - b + b * dl / avgdl)
        )
        del dl, tf32
        df = np.diff(starts).tolist()  # every row, as the engine counts it (no mask at build)
        idf = [math.log((n - d + 0.5) / (d + 0.5) + 1.0) for d in df]
        return cls(lengths, terms, starts, rows, norm, idf)

    def top(self, terms: dict[int, float], limit: int, valid: Any) -> list[tuple[float, int]]:
        """``SparseInvertedIndex.search`` for one query: (distance = -score, local id), best first.

        Scores are summed per document in float32, in query-term order, as the engine's loop does;
        ties keep the order in which documents were first reached (the engine's dict order). Only
        the documents a term reaches are touched: no sort of all of them, a partition picks the
        best ``limit`` (and their ties) first.
        """
        import numpy as np

        if self.doc_count == 0 or not terms:
            return []
        scores = np.zeros(self.doc_count, dtype=np.float32)
        reached_at = np.full(self.doc_count, -1, dtype=np.int64)
        newly: list[Any] = []
        reached = 0
        for term, weight in terms.items():
            slot = self.slot.get(term)
            if slot is None:
                continue
            start, stop = int(self.starts[slot]), int(self.starts[slot + 1])
            ids, norm = self.rows[start:stop], self.norm[start:stop]
            if valid is not None:
                keep = valid[ids]
                ids, norm = ids[keep], norm[keep]
                if ids.size == 0:
                    continue
            scores[ids] = scores[ids] + self.idf[slot] * norm * weight
            new = ids[reached_at[ids] < 0]
            reached_at[new] = np.arange(reached, reached + new.size)
            reached += new.size
            newly.append(new)
        if not reached:
            return []
        docs = np.concatenate(newly)  # in the order they were first reached
        negated = -scores[docs]
        if limit < docs.size:
            kth = np.partition(negated, limit - 1)[limit - 1]
            keep = np.flatnonzero(negated <= kth)  # the best `limit` and every tie (order kept)
            docs, negated = docs[keep], negated[keep]
        order = np.argsort(negated, kind="stable")[:limit]
        return [(float(-scores[i]), int(i)) for i in docs[order].tolist()]


class SegmentArrays:
    """What the fast search derived from one sealed segment (held while the segment is live)."""

    def __init__(self, segment: Any) -> None:
        self.segment = segment
        self.bm25: dict[str, Bm25 | None] = {}
        #: Whether :func:`share_engine_vectors` ran for it.
        self.shared = False
        #: A long filter's text -> the engine's mask of it over this segment (``LiteSearcher``'s
        #: ``_filter_mask``; a window of days asks for the same one at every search, and a write
        #: that leaves this segment as it is leaves its masks valid).
        self.masks: dict[str, Any] = {}
        #: field -> (source vectors, live mask they were taken for, unit vectors of those rows)
        self._unit: dict[str, tuple[Any, Any, Any]] = {}

    def unit(self, field: str, source: Any, live: Any) -> Any:
        """The unit vectors of ``live``'s rows of ``source`` (``distance.cosine_distance``'s:
        each row over its norm, 0 left as is). Rows of a sealed segment only ever die, so after a
        write the previous unit vectors lose the rows that died (one copy) and are not computed
        again; each row's values are the same either way (it is scaled on its own)."""
        import numpy as np

        held = self._unit.get(field)
        if held is not None and held[0] is source:
            _, before, vectors = held
            if np.array_equal(before, live):
                return vectors
            if not (live & ~before).any():
                vectors = vectors[np.flatnonzero(live[before])]
                self._unit[field] = (source, live, vectors)
                return vectors
        vectors = unit_rows(source, None if live.all() else np.flatnonzero(live))
        self._unit[field] = (source, live, vectors)
        return vectors


def unit_rows(vectors: Any, rows: Any) -> Any:
    """``distance.cosine_distance``'s unit candidates: rows scaled by their norm (0 -> left as is)."""
    import numpy as np

    candidates = np.asarray(vectors if rows is None else vectors[rows], dtype=np.float32)
    norms = np.linalg.norm(candidates, axis=1, keepdims=True)
    return candidates / np.where(norms == 0, 1.0, norms)


def live_masks(segments: Sequence[Any], tombstones: dict[Any, int]) -> list[Any] | None:
    """Per segment, its live rows: the newest version of each key across segments (by sequence
    number) and not shadowed by a later delete, as the engine decides; None when a segment holds a
    key twice (then :func:`live_masks_by_walk` decides).

    A key can be shadowed only by a version in another segment, so only the keys of the segments
    other than the largest are looked up in the others' key maps; and only the tombstones' keys are
    looked up for deletes. A one-file change (a small new segment, a few tombstones) costs lookups
    for those rows, not for the store."""
    import numpy as np

    if any(len(seg.pk_to_row) != seg.num_rows for seg in segments):
        return None
    masks = [np.ones(seg.num_rows, dtype=bool) for seg in segments]
    if len(segments) > 1:
        largest = max(range(len(segments)), key=lambda i: segments[i].num_rows)
        for i, seg in enumerate(segments):
            if i == largest:
                continue
            others = [(j, other) for j, other in enumerate(segments) if j != i]
            seqs = seg.seqs
            for row, pk in enumerate(seg.pks):
                for j, other in others:
                    at = other.pk_to_row.get(pk)
                    if at is None:
                        continue
                    mine, theirs = int(seqs[row]), int(other.seqs[at])
                    if theirs > mine:
                        masks[i][row] = False
                    elif mine > theirs:
                        masks[j][at] = False
    for pk, deleted_at in tombstones.items():
        for i, seg in enumerate(segments):
            at = seg.pk_to_row.get(pk)
            if at is not None and deleted_at > int(seg.seqs[at]):
                masks[i][at] = False
    return masks


def live_masks_by_walk(segments: Sequence[Any], tombstones: dict[Any, int]) -> list[Any]:
    """:func:`live_masks` by walking every row's key, as the engine does (any segment layout)."""
    import numpy as np

    newest: dict[Any, int] = {}
    for seg in segments:
        for pk, seq in zip(seg.pks, seg.seqs.tolist(), strict=True):
            seq = int(seq)
            if seq > newest.get(pk, -1):
                newest[pk] = seq
    masks = []
    for seg in segments:
        seqs = [int(s) for s in seg.seqs.tolist()]
        masks.append(
            np.fromiter(
                (
                    newest[pk] == seq and tombstones.get(pk, -1) <= seq
                    for pk, seq in zip(seg.pks, seqs, strict=True)
                ),
                dtype=bool,
                count=len(seqs),
            )
        )
    return masks


def share_engine_vectors(segment: Any, field: str) -> None:
    """Let the engine's flat index of ``field`` use the segment's own vectors instead of its copy.

    Why: milvus-lite loads a segment's FLAT index from its ``.npy`` file, a second copy of the
    vectors the segment's table already holds (4 bytes x dimension per chunk: 147 MB at 100,000
    chunks of 384 dimensions). When the two hold the same values, the index is pointed at the
    table's (read-only) array and the copy is freed; the engine computes the same on the same
    values. Anything else (nulls, another index type, different values) is left as it is."""
    import numpy as np
    from milvus_lite.index.brute_force import BruteForceIndex

    index = segment.indexes.get(field)
    if not isinstance(index, BruteForceIndex):
        return
    vectors, null_mask = segment.vector_data(field)
    held = index._vectors
    if held is vectors or null_mask is not None or np.shares_memory(held, vectors):
        return
    if held.dtype == vectors.dtype and held.shape == vectors.shape and np.array_equal(held, vectors):
        index._vectors = vectors
