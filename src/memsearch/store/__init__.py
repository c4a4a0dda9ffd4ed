"""The Milvus store: the one place that talks to Milvus (Lite or server).

Owns the collection schema (the original's), hybrid dense + BM25 search fused by RRF, upsert,
delete and paginated scalar queries, filter-expression escaping, and turning every driver failure
into a :mod:`memsearch.errors` class with a hint. Milvus Lite is driven in this process by
:mod:`memsearch.store.lite`, without pymilvus; pymilvus is imported (inside functions only: it is
slow to import, docs/scaling.md) for Milvus servers and Zilliz Cloud alone. Both are one typed
driver interface (:class:`~memsearch.store.driver.StoreDriver`).

The package is split along those parts; this module re-exports their public names, so
``from memsearch.store import ...`` keeps working:

- :mod:`~memsearch.store.milvus`: ``MilvusStore`` (schema, writes, queries);
- :mod:`~memsearch.store.searching`: its search part: the legs, their candidates, the one fusion;
- :mod:`~memsearch.store.connect`: opening Milvus Lite (waiting for a held database) or a server;
- :mod:`~memsearch.store.driver`: the typed driver interface, and pymilvus' client adapted to it;
- :mod:`~memsearch.store.lite`: Milvus Lite in this process, the one package that reads
  milvus-lite's internals (its fast search path, pinned to the releases it was verified on);
- :mod:`~memsearch.store.schema`: the collection's schema and indexes;
- :mod:`~memsearch.store.fusion`: the two legs, their weights per query, weighted RRF;
- :mod:`~memsearch.store.filters`: filter expressions, every value escaped;
- :mod:`~memsearch.store.rows`: values as stored (UTF-8, byte limits) and upsert batches;
- :mod:`~memsearch.store.driver_errors`: driver failures as memsearch errors, Lite lock holders;
- :mod:`~memsearch.store.analyzer`: the BM25 analyzer and jieba for Milvus Lite.

What callers can rely on:

- URIs are classified by a table of schemes; a Lite path is expanded, resolved and must end in
  ``.db`` (pymilvus itself refuses anything else, so a plain directory path is rejected up front
  with a hint instead of a driver error).
- A Lite database held by another process is waited for (``lock_timeout``), then reported with the
  holder's PID and command line.
- Filter values are escaped in one helper; ``source_prefix_filter`` matches on path boundaries and
  escapes LIKE wildcards.
- ``query``/``indexed_sources``/``hashes_by_source`` page through results.
- Over-long ``source``/``heading``/``content`` values are truncated to the field's UTF-8 byte
  limit instead of failing the whole batch. Milvus server counts VARCHAR ``max_length``
  in bytes, Milvus Lite in characters; a byte limit satisfies both.
- Empty-collection search is detected with a consistent query, not lagging row-count stats
 ; ``count()`` uses ``count(*)`` for the same reason.
- Read-only use of a missing collection raises ``CollectionNotFoundError``.
- The ``content`` analyzer segments Chinese (jieba) when the ``jieba`` package is installed.
"""

from memsearch.store.analyzer import ANALYZER_CHOICES, ANALYZERS, analyzer_params_for, default_analyzer_params
from memsearch.store.connect import CONNECT_TIMEOUT, LOCK_POLL_INTERVAL
from memsearch.store.driver_errors import lock_holders
from memsearch.store.filters import escape_filter_value, source_prefix_filter
from memsearch.store.fusion import HYBRID_TILT, LEGS, RRF_K, SEARCH_MODES, fuse, hybrid_weights
from memsearch.store.milvus import (
    DEFAULT_COLLECTION,
    DEFAULT_URI,
    DELETE_BATCH,
    IN_BATCH,
    PAGE_SIZE,
    MilvusStore,
)
from memsearch.store.rows import FIELD_MAX_BYTES, UPSERT_MAX_BYTES, UPSERT_MAX_ROWS, truncate_utf8

__all__ = [
    "ANALYZERS",
    "ANALYZER_CHOICES",
    "CONNECT_TIMEOUT",
    "DEFAULT_COLLECTION",
    "DEFAULT_URI",
    "DELETE_BATCH",
    "FIELD_MAX_BYTES",
    "HYBRID_TILT",
    "IN_BATCH",
    "LEGS",
    "LOCK_POLL_INTERVAL",
    "PAGE_SIZE",
    "RRF_K",
    "SEARCH_MODES",
    "UPSERT_MAX_BYTES",
    "UPSERT_MAX_ROWS",
    "MilvusStore",
    "analyzer_params_for",
    "default_analyzer_params",
    "escape_filter_value",
    "fuse",
    "hybrid_weights",
    "lock_holders",
    "source_prefix_filter",
    "truncate_utf8",
]
