"""The embedding cache: identical text is never embedded twice by the same model.

This module owns :class:`EmbeddingCache` (a SQLite file of float32 vectors keyed by model and the
sha256 of the exact text the model received) and :class:`CachedEmbedder` (a provider wrapper that
meets the same protocol: it looks vectors up, embeds only the misses, stores them).

Why: re-indexing after a chunker change, a moved file or a model switch back and forth would
otherwise pay for every chunk again, and remote providers bill per token. Why SQLite in WAL mode
with a busy timeout: the watcher, hooks and CLI commands of several agents may embed at once, in
different processes, and readers must never block on a writer. The cache is an optimisation only:
if its file is locked for too long or damaged, embedding carries on without it (logged once).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeVar

from memsearch import private
from memsearch.embeddings import EmbeddingProvider, as_provider
from memsearch.embeddings.base import batched, check_finite, is_finite

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (model, text_sha256)
) WITHOUT ROWID
"""
#: SQLite's default limit on host parameters is 999 on old builds; stay well below it.
_LOOKUP_CHUNK = 500
_BUSY_TIMEOUT_MS = 10_000
#: Extra attempts after a "database is locked" error the busy handler did not absorb, waiting
#: 50 ms, 100 ms, ... 1.6 s (3.15 s in all: on a busy machine another process's WAL switch or
#: recovery can hold the file that long, and a dropped write costs a re-embedding later).
_BUSY_RETRIES = 6
_T = TypeVar("_T")


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def text_key(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _to_blob(vector: Sequence[float]) -> bytes:
    packed = array("f", vector)
    if sys.byteorder == "big":  # the file is little-endian everywhere
        packed.byteswap()
    return packed.tobytes()


def _from_blob(blob: bytes) -> list[float]:
    packed = array("f")
    packed.frombytes(blob)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tolist()


class EmbeddingCache:
    """A SQLite store of vectors by (model, text sha256); safe to share between processes.

    The connection opens on first use (creating the parent directory). Methods are thread-safe.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()  # close() may run inside _run (a damaged file)
        self._disabled = False

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and not self._disabled:
            self._create_private()
            conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                with conn:
                    conn.execute(_SCHEMA)
            except sqlite3.Error:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _create_private(self) -> None:
        """Create the file with mode 0600 (SQLite gives its -wal and -shm files the same mode), or
        make an existing one 0600; refuse one that is not a regular file of ours (a link, a FIFO,
        another user's), which turns the cache off. Checked on the opened descriptor, which never
        follows a link and never blocks."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = private.open_ours(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise sqlite3.OperationalError(str(exc)) from None
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, private.FILE_MODE)
        finally:
            os.close(fd)

    def _failed(self, action: str, exc: sqlite3.Error) -> None:
        """Log a cache failure; a damaged file turns the cache off for this process."""
        if _is_busy(exc):
            log.warning("embedding cache %s: %s busy (%s); continuing without it", self.path, action, exc)
            return
        log.warning("embedding cache %s unusable (%s: %s); continuing without it", self.path, action, exc)
        self._disabled = True
        self.close()

    def _run(self, action: str, work: Callable[[sqlite3.Connection], _T], default: _T) -> _T:
        """Run ``work`` on the connection under the lock; on error log and return ``default``.

        SQLite's busy handler does not cover every contention case (switching to WAL, WAL
        recovery), so a "locked"/"busy" error is retried a few times before giving up.
        """
        with self._lock:
            for attempt in range(_BUSY_RETRIES + 1):
                try:
                    conn = self._connect()
                    return default if conn is None else work(conn)
                except sqlite3.Error as exc:
                    if _is_busy(exc) and attempt < _BUSY_RETRIES:
                        time.sleep(0.05 * 2**attempt)
                        continue
                    self._failed(action, exc)
        return default

    def get_many(self, model: str, keys: Iterable[str]) -> dict[str, list[float]]:
        """The cached vectors among ``keys`` (a missing key is simply absent from the result)."""
        wanted = list(dict.fromkeys(keys))

        def lookup(conn: sqlite3.Connection) -> dict[str, list[float]]:
            found: dict[str, list[float]] = {}
            for chunk in batched(wanted, _LOOKUP_CHUNK):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    "SELECT text_sha256, dim, vector FROM embeddings "
                    f"WHERE model = ? AND text_sha256 IN ({marks})",
                    (model, *chunk),
                )
                for key, dim, blob in rows:
                    vector = _from_blob(blob)
                    # A torn or foreign row, or one holding NaN (written before vectors were
                    # checked), is a miss: the text is embedded again and the row replaced.
                    if len(vector) == dim and is_finite(vector):
                        found[key] = vector
            return found

        return self._run("lookup", lookup, {})

    def put_many(self, model: str, items: Iterable[tuple[str, Sequence[float]]]) -> None:
        """Store vectors by key (one transaction; an existing row is replaced)."""
        now = time.time()
        rows = [(model, key, len(vector), _to_blob(vector), now) for key, vector in items]
        if not rows:
            return

        def store(conn: sqlite3.Connection) -> None:
            with conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (model, text_sha256, dim, vector, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    rows,
                )

        self._run("store", store, None)

    def count(self, model: str | None = None) -> int:
        """How many vectors are cached (for ``model`` only, if given)."""

        def count_rows(conn: sqlite3.Connection) -> int:
            if model is None:
                return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            sql = "SELECT COUNT(*) FROM embeddings WHERE model = ?"
            return int(conn.execute(sql, (model,)).fetchone()[0])

        return self._run("count", count_rows, 0)

    def clear(self, model: str | None = None) -> None:
        """Forget every vector (of ``model`` only, if given)."""

        def delete(conn: sqlite3.Connection) -> None:
            with conn:
                if model is None:
                    conn.execute("DELETE FROM embeddings")
                else:
                    conn.execute("DELETE FROM embeddings WHERE model = ?", (model,))

        self._run("clear", delete, None)

    def forget(self, keys: Iterable[str]) -> int:
        """Delete the vectors of the texts ``keys`` (every model's); how many rows went.

        For ``memsearch forget``: ``secure_delete`` overwrites the deleted rows (vector and key)
        with zeros, and a truncating checkpoint moves the pages into the main file and empties the
        WAL, so their bytes leave the cache files, not just its index (a reader holding an old
        snapshot may delay the truncation until it is done)."""
        wanted = list(dict.fromkeys(keys))

        def delete(conn: sqlite3.Connection) -> int:
            conn.execute("PRAGMA secure_delete = ON")
            gone = 0
            with conn:
                for chunk in batched(wanted, _LOOKUP_CHUNK):
                    marks = ",".join("?" * len(chunk))
                    gone += conn.execute(
                        f"DELETE FROM embeddings WHERE text_sha256 IN ({marks})", chunk
                    ).rowcount
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return gone

        return self._run("forget", delete, 0) if wanted else 0

    def close(self) -> None:
        """Close the file (it reopens on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CachedEmbedder(EmbeddingProvider):
    """An :class:`~memsearch.embeddings.EmbeddingProvider` that consults an :class:`EmbeddingCache`.

    Documents (``embed``) are cached under the provider's ``cache_namespace`` (provider and model;
    falls back to ``model_name``) and the sha256 of the text *as sent to the model*, prefixes
    included. Texts repeated within one call are embedded once. Misses are embedded in
    ``batch_size`` slices and stored after each slice, so an interrupted run keeps what it paid for.
    Queries (``embed_query``) are passed through: they are rarely repeated and cheap.
    ``hits`` and ``misses`` count texts since construction.
    """

    def __init__(self, provider: EmbeddingProvider, cache: EmbeddingCache) -> None:
        self.provider = as_provider(provider)
        self.cache = cache
        self.hits = 0
        self.misses = 0

    @property
    def model_name(self) -> str:
        return self.provider.model_name

    @property
    def dimension(self) -> int:
        return self.provider.dimension

    @property
    def batch_size(self) -> int:
        return self.provider.batch_size

    @property
    def namespace(self) -> str:
        return self.provider.cache_namespace or self.provider.model_name

    @property
    def cache_namespace(self) -> str:
        return self.provider.cache_namespace

    def document_text(self, text: str) -> str:
        return self.provider.document_text(text)

    def prepare(self) -> None:
        self.provider.prepare()

    def warm(self) -> None:
        self.provider.warm()

    def bulk(self) -> AbstractContextManager[object]:
        return self.provider.bulk()

    def release_model(self) -> None:
        self.provider.release_model()

    def close(self) -> None:
        """Close the provider's connections and the cache file (both reopen on next use)."""
        self.provider.close()
        self.cache.close()

    async def aclose(self) -> None:
        await self.provider.aclose()
        self.cache.close()

    @property
    def _provider_label(self) -> str:
        errors = getattr(self.provider, "errors", None)
        return str(getattr(errors, "label", None) or type(self.provider).__name__)

    def _sent_text(self, text: str) -> str:
        return self.provider.document_text(text)

    def uncached(self, texts: list[str]) -> list[str]:
        """The distinct texts among ``texts`` whose vectors the cache lacks (those ``embed`` would
        send to the model)."""
        keys = {text_key(self._sent_text(text)): text for text in texts}
        known = self.cache.get_many(self.namespace, keys)
        return [text for key, text in keys.items() if key not in known]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        keys = [text_key(self._sent_text(text)) for text in texts]
        namespace = self.namespace
        known = self.cache.get_many(namespace, keys)
        first_of: dict[str, int] = {}
        for index, key in enumerate(keys):
            if key not in known:
                first_of.setdefault(key, index)
        missing = list(first_of.items())
        for chunk in batched(missing, self.batch_size):
            vectors = await self.provider.embed([texts[index] for _, index in chunk])
            # Built-in providers check their vectors; a registered one may not: never cache NaN.
            check_finite(vectors, provider=self._provider_label, model=self.model_name)
            # Rounded through float32 like stored vectors, so a hit equals the first result exactly.
            fresh = {
                key: _from_blob(_to_blob(vector)) for (key, _), vector in zip(chunk, vectors, strict=True)
            }
            self.cache.put_many(namespace, fresh.items())
            known.update(fresh)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        result: list[list[float]] = [known[key] for key in keys]
        if len({len(vector) for vector in result}) > 1:
            # Vectors of two dimensions under one model name (a server swapped the model): trust
            # only fresh vectors, and overwrite what the cache held.
            fresh_all: list[list[float]] = await self.provider.embed(texts)
            check_finite(fresh_all, provider=self._provider_label, model=self.model_name)
            self.cache.put_many(namespace, zip(keys, fresh_all, strict=True))
            return fresh_all
        return result

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        return await self.provider.embed_query(list(texts))


def with_cache(provider: EmbeddingProvider) -> CachedEmbedder:
    """``provider`` behind this user's embedding cache (``~/.memsearch/embedding-cache.sqlite``):
    the default model's and the multilingual leg's vectors alike (each under its own namespace)."""
    return CachedEmbedder(provider, EmbeddingCache(private.home() / "embedding-cache.sqlite"))
