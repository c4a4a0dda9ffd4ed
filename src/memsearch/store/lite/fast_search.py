"""Milvus Lite searches without the engine's per-row Python loops, with the engine's exact results.

Why: milvus-lite 3.2 is a Python engine, and every search walks every row of the collection in
Python twice (a primary key -> newest version map, then a live-row mask of versions and deletes),
recomputes the norm of every stored vector, and scores BM25 posting by posting. At 20,000 chunks
that was ~80-120 ms of a hybrid search (two legs) on a 2-CPU machine. Between writes none of it
changes: this module keeps, per read snapshot (the sealed segments and the tombstones), the
live-row masks, the unit vectors and the BM25 postings as NumPy arrays, and answers a search with
a few vector operations over them (docs/scaling.md has the measurements).

The answers are the engine's own, bit for bit: each step below repeats the engine's arithmetic
(milvus_lite.search.executor_indexed, index.brute_force, search.distance, index.sparse_inverted,
engine.collection ``_search_sparse``) on the same arrays in the same order, down to float32
rounding and tie order; tests/test_lite_search.py compares both on real stores (several segments,
upserted and deleted rows, filters). Anything this path does not cover is left to the engine:
unflushed rows or deletes in the write buffer, an ANN index other than FLAT, a sparse column it
cannot decode (:meth:`_Bm25.build`), another milvus-lite release (it reads the engine's internals,
so it only runs on the releases it was checked against: :mod:`memsearch.store.lite.compat`).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple


class _Bm25:
    """One segment's BM25 index as arrays, decoded from its stored sparse vectors in one pass.

    The engine builds the same index (``SparseInvertedIndex.build`` over every row, no mask) on a
    segment's first BM25 search, a Python loop over every term of every row: ~5 s at 20,000 chunks,
    and several hundred MB of tuples a memory service keeps. Here the column's packed
    ``(uint32 term, float32 tf)`` pairs are read as one NumPy array and grouped by term (stable, so
    each term's rows stay in row order, as the engine appends them). Document lengths and their
    mean are sums of whole term counts, exact in any order. :meth:`build` returns None for a column
    it cannot read this way (nulls, another type, a term twice in a row); the engine answers then.
    """

    def __init__(
        self, k1: float, b: float, lengths: Any, terms: Any, starts: Any, rows: Any, tf: Any
    ) -> None:
        self.k1, self.b = k1, b
        self.doc_count = len(lengths)
        self.lengths = lengths  # float32 per row, as the engine's _doc_lengths
        total = float(lengths.sum(dtype="float64"))
        self.avgdl = total / self.doc_count if self.doc_count else 0.0
        self.terms = terms  # sorted distinct term ids
        self.starts = starts  # term i's postings: rows[starts[i]:starts[i + 1]]
        self.rows = rows
        self.tf = tf  # float32

    @classmethod
    def build(cls, table: Any, field: str, k1: float, b: float) -> _Bm25 | None:
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
        counts = sizes // 8
        row_of = np.repeat(np.arange(n, dtype=np.int64), counts)
        tf = pairs["tf"].astype(np.float32)
        if not np.array_equal(tf, np.floor(tf)) or (tf < 0).any():
            return None  # not term counts: the lengths' sums would depend on their order
        order = np.argsort(pairs["term"], kind="stable")
        terms_sorted = pairs["term"][order]
        rows = row_of[order]
        if terms_sorted.size > 1:
            same = (terms_sorted[1:] == terms_sorted[:-1]) & (rows[1:] == rows[:-1])
            if same.any():
                return None  # a term twice in one row: the engine's dict keeps one
        terms, starts = np.unique(terms_sorted, return_index=True)
        starts = np.append(starts, terms_sorted.size)
        lengths = np.zeros(n, dtype=np.float32)
        np.add.at(lengths, row_of, tf)
        return cls(k1, b, lengths, terms, starts, rows, tf[order])

    def postings(self, term: int) -> tuple[Any, Any] | None:
        """(rows, tf) of ``term``, or None when no row has it."""
        import numpy as np

        i = int(np.searchsorted(self.terms, term))
        if i >= self.terms.size or int(self.terms[i]) != term:
            return None
        start, stop = int(self.starts[i]), int(self.starts[i + 1])
        return self.rows[start:stop], self.tf[start:stop]


#: Filter masks kept per segment and snapshot (the oldest goes first): a window in parts of 1,000
#: files is ten filters, asked by both legs.
MASKS_KEPT = 64
#: The shortest filter text kept compiled, with its masks (a window of a few dozen files and up).
KEEP_FILTER_CHARS = 2000


class _Segment:
    """What a search needs of one sealed segment within one snapshot."""

    def __init__(self, segment: Any, live: Any) -> None:
        self.segment = segment
        self.pks: list[Any] = list(segment.pks)
        self.live = live  # bool array: the newest version of its key, not deleted
        self.all_live = bool(live.all())
        self.unit: dict[str, tuple[Any, Any]] = {}  # field -> (source vectors, unit vectors of live rows)
        self.bm25: dict[str, _Bm25 | None] = {}
        self.masks: dict[str, Any] = {}  # filter text -> the engine's mask (LiteSearcher._filter_mask)


class _Filter(NamedTuple):
    """A filter as the engine compiled it, with its text (the cache key) and its index plan."""

    text: str
    compiled: Any
    plan: Any
    kept: bool  # long enough to keep (with its masks) for the next search


class _Snapshot:
    def __init__(self, key: tuple[int, ...], tombstones: dict[Any, int], segments: list[_Segment]) -> None:
        self.key = key
        self.tombstones = tombstones
        self.segments = segments


class LiteSearcher:
    """The fast search path for one collection object; :meth:`search` returns None when it does not
    apply (the caller then asks the engine). The caller asks :func:`memsearch.store.lite.compat.supported`
    first (``LiteClient`` does); the equivalence tests and the drift check call it directly, so they
    can compare it with the engine of any milvus-lite release."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self._snapshot: _Snapshot | None = None
        self._filters: dict[str, _Filter] = {}
        self._lock = threading.Lock()

    @property
    def collection(self) -> Any:
        return self._collection

    # -- when it applies, and the snapshot ----------------------------------------------------

    def _current(self) -> _Snapshot | None:
        coll = self._collection
        if coll._memtable.size() != 0:
            return None  # unflushed rows or deletes: the engine merges them
        segments, delta = coll._read_snapshot()
        key = tuple(id(seg) for seg in segments)
        with self._lock:  # one build per snapshot when service threads search at once
            snap = self._snapshot
            if snap is None or snap.key != key or snap.tombstones != delta._map:
                snap = _Snapshot(key, dict(delta._map), self._live_segments(segments, delta))
                self._snapshot = snap
            return snap

    def distinct(self, field: str) -> set[Any] | None:
        """The distinct values of a scalar ``field`` among the live rows (None: not answerable
        here, the engine's query answers). One Arrow ``unique`` per segment: under a millisecond for
        thousands of files, where the engine's query of every row took ~0.5 s (a window of days
        needs the indexed files on every search: ``memsearch.engine.time_search``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        snap = self._current()
        if snap is None:
            return None
        values: set[Any] = set()
        for seg in snap.segments:
            table = seg.segment.table
            if table is None or len(table) == 0 or field not in table.column_names:
                continue
            column = table.column(field)
            if not seg.all_live:
                column = pc.filter(column, pa.array(seg.live))
            values.update(pc.unique(column).to_pylist())
        return values

    @staticmethod
    def _live_segments(segments: Sequence[Any], delta: Any) -> list[_Segment]:
        """Each non-empty segment with its live-row mask: the newest version of each key across
        segments (by sequence number) and not shadowed by a later delete, as the engine decides."""
        import numpy as np

        newest: dict[Any, int] = {}
        for seg in segments:
            for pk, seq in zip(seg.pks, seg.seqs.tolist(), strict=True):
                seq = int(seq)
                if seq > newest.get(pk, -1):
                    newest[pk] = seq
        tombstones = delta._map
        out = []
        for seg in segments:
            if seg.num_rows == 0:
                continue
            seqs = [int(s) for s in seg.seqs.tolist()]
            live = np.fromiter(
                (
                    newest[pk] == seq and tombstones.get(pk, -1) <= seq
                    for pk, seq in zip(seg.pks, seqs, strict=True)
                ),
                dtype=bool,
                count=len(seqs),
            )
            out.append(_Segment(seg, live))
        return out

    def search(
        self,
        query: Any,
        *,
        field: str,
        metric: str | None,
        limit: int,
        expr: str | None,
        output_fields: list[str] | None,
    ) -> list[list[dict[str, Any]]] | None:
        """One query's hits as the engine's ``Collection.search`` returns them, or None."""
        coll = self._collection
        if limit <= 0:
            return None
        from milvus_lite.schema.types import DataType

        coll._require_loaded()
        field = coll._resolve_anns_field(field)
        metric = coll.resolve_search_metric(field, metric)
        schema_field = next(f for f in coll._schema.fields if f.name == field)
        snap = self._current()
        if snap is None:
            return None
        where = self._filter(expr)
        if schema_field.dtype == DataType.SPARSE_FLOAT_VECTOR:
            if metric != "BM25" or not isinstance(query, str):
                return None
            return self._sparse(snap, query, field, limit, where, output_fields)
        if metric != "COSINE" or isinstance(query, str):
            return None
        return self._dense(snap, query, field, limit, where, output_fields)

    def _filter(self, expr: str | None) -> _Filter | None:
        """``expr`` compiled by the engine (its plan too); a long one is kept for the next calls
        with the same text (a ``source in [...]`` of a thousand files takes the engine's parser
        ~10 ms). Short filters are cheap to compile again, and one-off ones (the relevance's
        ``chunk_hash in [...]``) must not push the window's out."""
        if not expr:
            return None
        with self._lock:
            found = self._filters.get(expr)
        if found is None:
            coll = self._collection
            compiled = coll._compile_filter(expr)
            found = _Filter(
                expr, compiled, coll._indexed_filter_plan(compiled), len(expr) >= KEEP_FILTER_CHARS
            )
            if found.kept:
                with self._lock:
                    if len(self._filters) >= MASKS_KEPT:
                        self._filters.pop(next(iter(self._filters)))
                    self._filters[expr] = found
        return found

    @staticmethod
    def _filter_mask(seg: _Segment, where: _Filter | None) -> Any:
        """The engine's mask of ``where`` over one segment, kept per filter text for the snapshot:
        both legs of a search ask for the same one, and a window of days asks again at the next
        search. Evaluating ``source in [...]`` of a thousand files costs the engine a Python
        object per value per segment (a 10,000-file window: ~2 s a search, uncached)."""
        if where is None:
            return None
        from milvus_lite.search.indexed_filter import evaluate_segment_filter

        mask = seg.masks.get(where.text) if where.kept else None
        if mask is None:
            mask = evaluate_segment_filter(seg.segment, where.compiled, where.plan)
            if where.kept:
                if len(seg.masks) >= MASKS_KEPT:
                    seg.masks.pop(next(iter(seg.masks)), None)
                seg.masks[where.text] = mask
        return mask

    # -- the dense leg (executor_indexed + brute_force + distance.cosine_distance) -------------

    def _dense(
        self,
        snap: _Snapshot,
        query: Any,
        field: str,
        limit: int,
        where: _Filter | None,
        output_fields: list[str] | None,
    ) -> list[list[dict[str, Any]]] | None:
        import numpy as np
        from milvus_lite.engine.projection import build_projection_plan, project_record
        from milvus_lite.index.brute_force import BruteForceIndex

        coll = self._collection
        q = np.asarray([list(query)], dtype=np.float32)
        q_norms = np.linalg.norm(q, axis=1, keepdims=True)
        q_unit = q / np.where(q_norms == 0, 1.0, q_norms)
        candidates: list[tuple[float, int, int]] = []
        for source, seg in enumerate(snap.segments):
            index = seg.segment.indexes.get(field)
            if index is not None and not (isinstance(index, BruteForceIndex) and index.metric == "COSINE"):
                return None  # an ANN index: its own search
            vectors, null_mask = seg.segment.vector_data(field)
            mask = self._filter_mask(seg, where)
            if null_mask is not None:
                mask = null_mask if mask is None else mask & null_mask
            local = seg.live if mask is None else seg.live & mask.astype(bool)
            if not local.any():
                continue
            source_vectors = index._vectors if index is not None else vectors
            whole = mask is None
            if whole and field in seg.unit and seg.unit[field][0] is source_vectors:
                unit = seg.unit[field][1]
            else:
                unit = _unit_rows(source_vectors, None if local.all() else np.flatnonzero(local))
                if whole:
                    seg.unit[field] = (source_vectors, unit)
            valid = np.arange(len(local), dtype=np.int64) if local.all() else np.flatnonzero(local)
            with _ONE_BLAS_THREAD:
                sims = q_unit @ unit.T
            dists = np.maximum(1.0 - sims, 0.0)[0]
            k = min(limit, valid.size)
            if k < valid.size:
                part = np.argpartition(dists, k - 1)[:k]
                order = part[np.argsort(dists[part])]
            else:
                order = np.argsort(dists)
            for i in order[:k]:
                candidates.append((float(dists[int(i)]), source, int(valid[int(i)])))
        candidates.sort(key=lambda c: (c[0], c[1], c[2]))
        projection = build_projection_plan(output_fields, coll._schema, api_kind="search")
        kept = candidates[:limit]
        records = _records(
            [(snap.segments[source].segment, local_id) for _, source, local_id in kept],
            projection.engine_fields,
            coll._pk_name,
        )
        hits = []
        for (dist, source, local_id), record in zip(kept, records, strict=True):
            seg = snap.segments[source]
            pk = record.get(coll._pk_name) if coll._pk_name in record else seg.pks[local_id]
            entity = _project(record, coll, projection, project_record)
            hits.append({"id": pk, "distance": 1.0 - dist, "entity": entity})
        return [hits]

    # -- the BM25 leg (collection._search_sparse + index.sparse_inverted) ----------------------

    def _sparse(
        self,
        snap: _Snapshot,
        text: str,
        field: str,
        limit: int,
        where: _Filter | None,
        output_fields: list[str] | None,
    ) -> list[list[dict[str, Any]]] | None:
        from milvus_lite.engine.projection import build_projection_plan, project_record

        coll = self._collection
        spec = coll._index_specs.get(field)
        params = spec.build_params if spec else {}
        k1, b = float(params.get("bm25_k1", 1.5)), float(params.get("bm25_b", 0.75))
        indexes: dict[int, _Bm25] = {}
        for seg in snap.segments:
            if field not in seg.bm25:
                seg.bm25[field] = _Bm25.build(seg.segment.table, field, k1, b)
            built = seg.bm25[field]
            if built is None:
                return None
            indexes[id(seg)] = built
        terms = coll._prepare_sparse_queries([text], field)[0]
        candidates: list[tuple[float, Any, _Segment, int]] = []
        for seg in snap.segments:
            if seg.segment.table is None or len(seg.segment.table) == 0:
                continue
            mask = self._filter_mask(seg, where)
            valid = seg.live if mask is None else seg.live & mask
            if not valid.any():
                continue
            rows = None if valid.all() else valid
            for dist, local_id in _bm25_top(indexes[id(seg)], terms, limit, rows):
                candidates.append((dist, seg.pks[local_id], seg, local_id))
        # The newest version of a key once (segments hold no equal keys after the live mask), then
        # by distance, stable.
        best: dict[Any, tuple[int, tuple[float, Any, _Segment, int]]] = {}
        for cand in candidates:
            seq = int(cand[2].segment.table.column("_seq")[cand[3]].as_py())
            if cand[1] not in best or seq > best[cand[1]][0]:
                best[cand[1]] = (seq, cand)
        ranked = [entry[1] for entry in best.values()]
        ranked.sort(key=lambda c: c[0])
        projection = build_projection_plan(output_fields, coll._schema, api_kind="search")
        kept = ranked[:limit]
        rows = [(seg.segment, local_id) for _, _, seg, local_id in kept]
        records = _records(rows, projection.engine_fields, unpack=False)
        hits = []
        for (dist, pk, _seg, _local_id), record in zip(kept, records, strict=True):
            record.pop("_partition", None)
            entity = _project(record, coll, projection, project_record)
            hits.append({"id": pk, "distance": dist, "entity": entity})
        return [hits]


def _project(record: dict[str, Any], coll: Any, plan: Any, project_record: Any) -> dict[str, Any]:
    """``project_record`` for a search hit: without dynamic fields asked for (memsearch's searches),
    the asked schema fields but the primary key, as it returns them, without its per-hit work on
    the dynamic fields it would then drop (~70 us a hit, most of a deep candidate list)."""
    if plan.include_all_dynamic or plan.explicit_dynamic_fields:
        return dict(project_record(record, coll._schema, plan))
    return {
        name: record[name] for name in plan.response_schema_fields if name != coll._pk_name and name in record
    }


def _records(
    rows: list[tuple[Any, int]], fields: Sequence[str] | None, pk: str = "", *, unpack: bool = True
) -> list[dict[str, Any]]:
    """The ``(segment, row)`` rows as the engine reads them for a search hit (the dense leg:
    ``Segment.row_to_dict``, ``$meta`` unpacked into the top level; the BM25 leg, ``unpack=False``:
    the columns as they are), but read only from the columns a projection needs (``fields``: its
    ``engine_fields``, plus ``pk``; None: every column), with one Arrow ``take`` per segment.

    Why: ``row_to_dict`` converts every column of a hit, the 384 floats of its vector included,
    one Python object at a time; at a few dozen candidates per leg that was most of a search. The
    values are the same conversions of the same cells."""
    import pyarrow as pa

    out: list[dict[str, Any] | None] = [None] * len(rows)
    by_segment: dict[int, tuple[Any, list[int], list[int]]] = {}
    for i, (segment, row) in enumerate(rows):
        by_segment.setdefault(id(segment), (segment, [], []))[1].append(row)
        by_segment[id(segment)][2].append(i)
    for segment, local_ids, places in by_segment.values():
        table = segment.table
        names = [n for n in table.schema.names if n != "_seq"]
        if fields is not None:
            wanted = {*fields, pk}
            names = [n for n in names if n in wanted]
        for place, record in zip(
            places, table.select(names).take(pa.array(local_ids)).to_pylist(), strict=True
        ):
            meta = record.get("$meta") if unpack else None
            if isinstance(meta, str):
                try:
                    decoded = json.loads(meta)
                except ValueError:
                    decoded = None
                if isinstance(decoded, dict):
                    record.update(decoded)
            elif isinstance(meta, dict):
                record.update(meta)
            out[place] = record
    return [record for record in out if record is not None]  # every place is filled


class _OneBlasThread:
    """Run a block with NumPy's OpenBLAS on one thread, then restore its thread count.

    Why: the dense leg is one matrix-vector product (20,000 x 384 at 20,000 chunks, ~1.5 ms on one
    core). OpenBLAS splits it over every core and its threads spin-wait for each other; on a
    machine whose cores are busy with other work that took 15-25 ms instead. Each output value is
    one thread's dot product either way, so the result is the same bit for bit (the tests compare
    against the engine, which runs with the default thread count). A lock keeps two searching
    threads from restoring each other's setting; without a findable OpenBLAS (another BLAS, another
    NumPy build) this does nothing.
    """

    _NAMES = ("scipy_openblas_{}_num_threads64_", "scipy_openblas_{}_num_threads", "openblas_{}_num_threads")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: tuple[Any, Any] | None = None
        self._looked = False

    def _find(self) -> tuple[Any, Any] | None:
        import ctypes
        import glob
        import os

        import numpy

        libs = os.path.dirname(os.path.dirname(numpy.__file__))
        for path in sorted(glob.glob(os.path.join(libs, "numpy.libs", "lib*openblas*"))):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for name in self._NAMES:
                getter = getattr(lib, name.format("get"), None)
                setter = getattr(lib, name.format("set"), None)
                if getter is not None and setter is not None:
                    getter.restype = ctypes.c_int
                    return getter, setter
        return None

    def __enter__(self) -> None:
        self._lock.acquire()
        self._before = 1
        try:
            if not self._looked:
                self._looked = True
                self._calls = self._find()
            if self._calls is not None:
                self._before = int(self._calls[0]())
                if self._before != 1:
                    self._calls[1](1)
        except Exception:  # no usable OpenBLAS: run as the engine would
            self._calls, self._before = None, 1

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self._calls is not None and self._before != 1:
                self._calls[1](self._before)
        finally:
            self._lock.release()


_ONE_BLAS_THREAD = _OneBlasThread()


def _unit_rows(vectors: Any, rows: Any) -> Any:
    """``distance.cosine_distance``'s unit candidates: rows scaled by their norm (0 -> left as is)."""
    import numpy as np

    candidates = np.asarray(vectors if rows is None else vectors[rows], dtype=np.float32)
    norms = np.linalg.norm(candidates, axis=1, keepdims=True)
    return candidates / np.where(norms == 0, 1.0, norms)


def _bm25_top(index: _Bm25, terms: dict[int, float], limit: int, valid: Any) -> list[tuple[float, int]]:
    """``SparseInvertedIndex.search`` for one query: (distance = -score, local id), best first.

    The same float32 arithmetic per posting as the engine's loop (Python floats meet float32
    values), summed per document in query-term order; ties keep the order in which documents were
    first reached, as the engine's dict does.
    """
    import numpy as np

    if index.doc_count == 0 or not terms:
        return []
    n_docs, k1, b = index.doc_count, index.k1, index.b
    avgdl = index.avgdl if index.avgdl > 0 else 1.0
    scores = np.zeros(index.doc_count, dtype=np.float32)
    reached: list[Any] = []
    for term, weight in terms.items():
        found = index.postings(term)
        if found is None:
            continue
        ids, tf32 = found
        df = ids.size  # every row, as the engine counts it (no mask at build)
        if valid is not None:
            keep = valid[ids]
            ids, tf32 = ids[keep], tf32[keep]
            if ids.size == 0:
                continue
        idf = math.log((n_docs - df + 0.5) / (df + 0.5) + 1.0)
        dl = index.lengths[ids]
        tf = tf32.astype(np.float64)  # the engine's Python floats
        norm = (tf * (k1 + 1.0)).astype(np.float32) / (tf32 + k1 * (1.0 - b + b * dl / avgdl))
        scores[ids] = scores[ids] + idf * norm * weight
        reached.append(ids)
    if not reached:
        return []
    everything = np.concatenate(reached)
    docs, first = np.unique(everything, return_index=True)
    docs = docs[np.argsort(first, kind="stable")]  # the order documents were first reached
    order = np.argsort(-scores[docs], kind="stable")[:limit]
    return [(float(-scores[i]), int(i)) for i in docs[order].tolist()]
