"""The engine wing: what turns markdown into an index and answers from it.

Private to memsearch (no import path here is a public interface; the public faces of this wing are
the original's modules ``memsearch.core``, ``memsearch.chunker``, ``memsearch.scanner``,
``memsearch.index_state`` and ``memsearch.watcher``). It owns incremental indexing (``indexer``,
``manifest``), the hybrid search and its time window (``hybrid_search``, ``time_search``,
``timeframe``), reading a hit back (``expand``), the markdown memory's formats and records
(``journal``, ``written``, ``project_files``), forgetting (``forget``, ``forget_apply``), the scan
for stored secrets (``secret_scan``), index migrations (``migration``) and the seam between callers
and the store's owner (``interface``, ``memory``, ``ownership``). The rules for what it may import
are in docs/architecture.md (enforced by tests/test_import_rules.py).
"""
