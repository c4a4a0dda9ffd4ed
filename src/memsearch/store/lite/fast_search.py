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
cannot decode (``segments.Bm25.build``), another milvus-lite release (it reads the engine's internals,
so it only runs on the releases it was checked against: :mod:`memsearch.store.lite.compat`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from memsearch.store.lite.segments import (
    Bm25,
    SegmentArrays,
    live_masks,
    live_masks_by_walk,
    share_engine_vectors,
)

#: Filter masks kept per segment (the oldest goes first): a window in parts of 1,000
#: files is ten filters, asked by both legs.
MASKS_KEPT = 64
#: The shortest filter text kept compiled, with its masks (a window of a few dozen files and up).
KEEP_FILTER_CHARS = 2000


class _Segment:
    """What a search needs of one sealed segment within one snapshot: its live rows, and the
    arrays kept for the segment across snapshots (:class:`~memsearch.store.lite.segments.SegmentArrays`:
    its BM25 postings, its unit vectors, the masks of its long filters)."""

    def __init__(self, arrays: SegmentArrays, live: Any) -> None:
        self.arrays = arrays
        self.segment = arrays.segment
        self.pks: list[Any] = self.segment.pks
        self.live = live  # bool array: the newest version of its key, not deleted
        self.all_live = bool(live.all())
        self.live_count = int(live.sum())
        self.masks = arrays.masks  # filter text -> the engine's mask (LiteSearcher._filter_mask)


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
        self.distinct: dict[str, set[Any]] = {}


class LiteSearcher:
    """The fast search path for one collection object; :meth:`search` returns None when it does not
    apply (the caller then asks the engine). The caller asks :func:`memsearch.store.lite.compat.supported`
    first (``LiteClient`` does); the equivalence tests and the drift check call it directly, so they
    can compare it with the engine of any milvus-lite release."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self._snapshot: _Snapshot | None = None
        #: Per sealed segment (by identity), what was derived from it; dropped with the segment.
        self._arrays: dict[int, SegmentArrays] = {}
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
                snap = _Snapshot(key, dict(delta._map), self._live_segments(segments, delta._map))
                self._snapshot = snap
            return snap

    def count(self) -> int | None:
        """Live rows (the engine's ``num_entities``) from the snapshot's masks: no walk of every
        row's key, as the engine's count does (``memsearch stats`` asks on every call). None: not
        answerable here (unflushed writes)."""
        snap = self._current()
        return None if snap is None else sum(seg.live_count for seg in snap.segments)

    def distinct(self, field: str) -> set[Any] | None:
        """The distinct values of a scalar ``field`` among the live rows (None: not answerable
        here, the engine's query answers). One Arrow ``unique`` per segment, once per snapshot:
        a window of days needs the indexed files on every search (``memsearch.engine.time_search``),
        where the engine's query of every row took ~0.5 s at thousands of files."""
        import pyarrow as pa
        import pyarrow.compute as pc

        snap = self._current()
        if snap is None:
            return None
        known = snap.distinct.get(field)
        if known is not None:
            return set(known)
        values: set[Any] = set()
        for seg in snap.segments:
            table = seg.segment.table
            if table is None or len(table) == 0 or field not in table.column_names:
                continue
            column = table.column(field)
            if not seg.all_live:
                column = pc.filter(column, pa.array(seg.live))
            values.update(pc.unique(column).to_pylist())
        snap.distinct[field] = values
        return set(values)

    def _live_segments(self, segments: Sequence[Any], tombstones: dict[Any, int]) -> list[_Segment]:
        """Each non-empty segment with its live-row mask (``segments.live_masks``) and the arrays
        kept for it; the arrays of segments no longer in the snapshot (merged away) are let go."""
        masks = live_masks(segments, tombstones)
        if masks is None:
            masks = live_masks_by_walk(segments, tombstones)
        kept = {id(seg): self._arrays.get(id(seg)) for seg in segments}
        self._arrays = {
            key: arrays if arrays is not None and arrays.segment is seg else SegmentArrays(seg)
            for (key, arrays), seg in zip(kept.items(), segments, strict=True)
        }
        return [
            _Segment(self._arrays[id(seg)], live)
            for seg, live in zip(segments, masks, strict=True)
            if seg.num_rows
        ]

    def query(
        self,
        expr: str | None,
        output_fields: list[str] | None,
        limit: int | None,
        *,
        order_by_pk: bool = False,
    ) -> list[dict[str, Any]] | None:
        """``Collection.query``'s rows, or None when it does not apply (unflushed writes): the rows
        :meth:`matches` finds, the first ``limit`` of them read (:meth:`rows`)."""
        found = self.matches(expr, order_by_pk=order_by_pk, limit=limit)
        if found is None:
            return None
        return self.rows(found[:limit] if limit is not None else found, output_fields)

    def matches(
        self, expr: str | None, *, order_by_pk: bool = False, limit: int | None = None
    ) -> list[tuple[Any, int]] | None:
        """Where the rows matching ``expr`` are (segment, row), in ``Collection.query``'s order:
        segments in snapshot order, rows in file order, or by key with ``order_by_pk``. None when
        it does not apply (unflushed writes).

        Why: the engine's query gathers every row's key and sequence number and concatenates every
        vector of the collection before it applies the filter (~100 ms at 100,000 chunks); the
        indexer asks it for the chunks of each changed file, so a one-file change cost O(store).
        Here the filter runs on each segment's columns (the engine's own evaluation), masked by the
        snapshot's live rows, and nothing is read until :meth:`rows` reads the rows wanted."""
        import numpy as np

        coll = self._collection
        coll._require_loaded()
        snap = self._current()
        if snap is None:
            return None
        where = self._filter(expr)
        found: list[tuple[Any, int]] = []
        for seg in snap.segments:
            mask = self._filter_mask(seg, where)
            rows = seg.live if mask is None else seg.live & np.asarray(mask, dtype=bool)
            found.extend((seg, int(i)) for i in np.flatnonzero(rows))
            if limit is not None and not order_by_pk and len(found) >= limit:
                break
        if order_by_pk:
            found.sort(key=lambda hit: hit[0].pks[hit[1]])
        return found

    def rows(self, found: Sequence[tuple[Any, int]], output_fields: list[str] | None) -> list[dict[str, Any]]:
        """The rows at ``found`` (from :meth:`matches`), projected as ``Collection.query`` projects."""
        from milvus_lite.engine.projection import build_projection_plan, project_record

        coll = self._collection
        projection = build_projection_plan(output_fields, coll._schema, api_kind="query")
        return [project_record(seg.segment.row_to_dict(i), coll._schema, projection) for seg, i in found]

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
            if index is not None and not seg.arrays.shared:
                share_engine_vectors(seg.segment, field)
                seg.arrays.shared = True
            vectors, null_mask = seg.segment.vector_data(field)
            mask = self._filter_mask(seg, where)
            if null_mask is not None:
                mask = null_mask if mask is None else mask & null_mask
            local = seg.live if mask is None else seg.live & mask.astype(bool)
            if not local.any():
                continue
            source_vectors = index._vectors if index is not None else vectors
            unit = seg.arrays.unit(field, source_vectors, seg.live)
            if mask is not None:  # the filtered rows' unit vectors (each row is scaled on its own)
                unit = unit[np.flatnonzero(local[seg.live])]
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
        indexes: dict[int, Bm25] = {}
        for seg in snap.segments:
            bm25 = seg.arrays.bm25
            if field not in bm25:
                bm25[field] = Bm25.build(seg.segment.table, field, k1, b)
            built = bm25[field]
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
            for dist, local_id in indexes[id(seg)].top(terms, limit, rows):
                candidates.append((dist, seg.pks[local_id], seg, local_id))
        # The newest version of a key once (segments hold no equal keys after the live mask), then
        # by distance, stable.
        best: dict[Any, tuple[int, tuple[float, Any, _Segment, int]]] = {}
        for cand in candidates:
            seq = int(cand[2].segment.seqs[cand[3]])
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
    against the engine, which runs with the default thread count). Searches on several threads (the
    memory service answers clients at once) each run their product on one core at the same time:
    the first to enter sets one thread, the last to leave restores the count (a lock guards only
    that bookkeeping). Without a findable OpenBLAS (another BLAS, another NumPy build) this does
    nothing.
    """

    _NAMES = ("scipy_openblas_{}_num_threads64_", "scipy_openblas_{}_num_threads", "openblas_{}_num_threads")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: tuple[Any, Any] | None = None
        self._looked = False
        self._users = 0  # blocks running now: the first sets one thread, the last restores
        self._before = 1

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
        with self._lock:
            if self._users == 0:
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
            self._users += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._calls is not None and self._before != 1:
                self._calls[1](self._before)


_ONE_BLAS_THREAD = _OneBlasThread()
