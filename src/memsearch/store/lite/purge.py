"""Rewriting a Milvus Lite collection's data files so that deleted rows leave the disk.

Why: Milvus Lite deletes by tombstone. A deleted row stays in its Parquet data file (its text, its
vector, its BM25 terms), masked by a tombstone in a delta file, until the engine's own compaction
merges that file, which it does only once four files of one size bucket exist. So a chunk that
``forget`` removed, a secret included, was still on disk after the forget of a small store. After
a forget memsearch asks for a purge: every data file that holds a deleted row is rewritten without
it, by the engine's own compaction step run on just those files, then the data files nobody
references and their index sidecars are removed, and the tombstones no data file needs any more
are dropped.

Crash safety is the engine's: the merged file is written first, then the manifest is replaced in
one rename, then the old files are deleted; a process killed in between leaves files the manifest
does not name, which the engine removes when it next opens the database (``execute_recovery``).
``forget`` keeps its intent record until the purge returned, so the next ``forget`` or ``index``
purges again after a crash, which opens the database and so completes the cleanup.

Like the fast search it reads the engine's private members (the manifest, the delta index, the
compaction manager, the maintenance lock), so it runs only on the milvus-lite releases
:mod:`memsearch.store.lite.compat` names; elsewhere it does nothing and says so in its answer
(``purged`` 0), and the caller warns. The cost is that of rewriting the files involved (one file of
every row in a store that was indexed in one run): docs/scaling.md has the measurements.
"""

from __future__ import annotations

import os
from typing import Any

from memsearch.store.lite import compat

__all__ = ["purge_deleted"]


def purge_deleted(collection: Any) -> dict[str, int]:
    """Rewrite ``collection``'s data files that hold deleted rows (the caller holds the database's
    write lock). Returns ``purged`` (1: done, 0: not on this milvus-lite), ``files`` rewritten and
    ``rows`` dropped from them."""
    if not compat.supported():
        return {"purged": 0, "files": 0, "rows": 0}
    collection.flush()  # rows and tombstones still in the write buffer go to files; the WAL goes
    collection._wait_for_bg()  # a background compaction in flight finishes first
    files = rows = 0
    with collection._maintenance_lock:
        manifest, delta = collection._manifest, collection._delta_index
        manager = collection._compaction_mgr
        segments = collection._segments_snapshot()
        for partition in manifest.list_partitions():
            folder = os.path.join(collection._data_dir, "partitions", partition)
            stale: list[str] = []
            for segment in segments:
                if segment.partition != partition:
                    continue
                dead = sum(
                    delta.is_deleted(pk, int(seq)) for pk, seq in zip(segment.pks, segment.seqs, strict=True)
                )
                if dead:
                    stale.append(os.path.relpath(segment.file_path, folder))
                    rows += dead
            known = set(manifest.get_data_files(partition))
            stale = [name for name in stale if name in known]
            if stale:
                manager._compact_files(partition, folder, stale, manifest, delta)
                files += len(stale)
        if files:
            collection._refresh_segment_cache()
            collection._cleanup_orphan_index_files()
            manager._gc_tombstones(manifest, delta)
    if files:
        collection._ensure_loaded_segments_indexed()  # the merged files' vector indexes, as after a merge
    return {"purged": 1, "files": files, "rows": rows}
