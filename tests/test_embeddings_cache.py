"""The SQLite embedding cache and the CachedEmbedder wrapper."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from memsearch.embeddings import EmbeddingProvider
from memsearch.embeddings.base import ApiErrors, BatchingEmbedder
from memsearch.embeddings.cache import CachedEmbedder, EmbeddingCache, text_key
from memsearch.errors import EmbeddingAPIError


class Counting:
    """A minimal protocol implementation (no base class) that counts what it embeds."""

    model_name = "count-model"
    dimension = 3
    batch_size = 2

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.query_calls: list[list[str]] = []
        self.fail_after = fail_after

    @staticmethod
    def vector(text: str) -> list[float]:
        return [float(len(text)), 0.5, -0.25]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise EmbeddingAPIError("down")
        self.calls.append(list(texts))
        return [self.vector(t) for t in texts]

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        self.query_calls.append(list(texts))
        return [self.vector(t) for t in texts]


class Prefixed(BatchingEmbedder):
    """A base-class provider with a document prefix, to check what the cache hashes."""

    provider_name = "prefixed"
    default_model = "e5-ish"
    api_errors: ClassVar[ApiErrors] = ApiErrors("Prefixed")

    def __init__(self) -> None:
        super().__init__()
        self.document_prefix = "passage: "
        self.seen: list[str] = []

    async def _embed_batch(self, conn: object, texts: list[str], *, query: bool) -> list[list[float]]:
        self.seen.extend(texts)
        return [[1.0, float(len(t))] for t in texts]


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[EmbeddingCache]:
    with EmbeddingCache(tmp_path / "cache" / "embedding-cache.sqlite") as opened:
        yield opened


async def test_hits_skip_the_provider(cache: EmbeddingCache) -> None:
    provider = Counting()
    cached = CachedEmbedder(provider, cache)
    first = await cached.embed(["alpha", "beta"])
    assert provider.calls == [["alpha", "beta"]]
    second = await cached.embed(["alpha", "gamma", "beta"])
    assert provider.calls == [["alpha", "beta"], ["gamma"]]
    assert second == [first[0], Counting.vector("gamma"), first[1]]
    assert (cached.hits, cached.misses) == (2, 3)
    third = await cached.embed(["beta", "alpha", "gamma"])
    assert len(provider.calls) == 2
    assert third == [second[2], second[0], second[1]]
    assert await cached.embed([]) == []


async def test_repeated_text_in_one_call_is_embedded_once(cache: EmbeddingCache) -> None:
    provider = Counting()
    vectors = await CachedEmbedder(provider, cache).embed(["same", "other", "same"])
    assert provider.calls == [["same", "other"]]
    assert vectors[0] == vectors[2]


async def test_misses_are_embedded_in_batch_slices_and_kept_on_failure(cache: EmbeddingCache) -> None:
    provider = Counting(fail_after=2)
    cached = CachedEmbedder(provider, cache)
    with pytest.raises(EmbeddingAPIError):
        await cached.embed([f"t{i}" for i in range(6)])
    assert provider.calls == [["t0", "t1"], ["t2", "t3"]]
    assert cache.count("count-model") == 4  # what was paid for is kept
    provider.fail_after = None
    await cached.embed([f"t{i}" for i in range(6)])
    assert provider.calls[2:] == [["t4", "t5"]]


async def test_vectors_round_trip_as_float32(cache: EmbeddingCache) -> None:
    class Precise(Counting):
        @staticmethod
        def vector(text: str) -> list[float]:
            return [0.1, 1 / 3, -2.5e-8]

    cached = CachedEmbedder(Precise(), cache)
    fresh = await cached.embed(["x"])
    again = await cached.embed(["x"])
    assert fresh == again  # the first answer is already float32-rounded, like every later hit
    assert fresh[0] == pytest.approx([0.1, 1 / 3, -2.5e-8], rel=1e-6)


async def test_key_is_the_text_as_sent_to_the_model(cache: EmbeddingCache) -> None:
    provider = Prefixed()
    cached = CachedEmbedder(provider, cache)
    await cached.embed(["hello"])
    assert provider.seen == ["passage: hello"]
    assert cached.namespace == "prefixed:e5-ish"
    assert set(cache.get_many("prefixed:e5-ish", [text_key("passage: hello")])) == {
        text_key("passage: hello")
    }
    assert cache.get_many("prefixed:e5-ish", [text_key("hello")]) == {}


async def test_models_do_not_share_vectors(cache: EmbeddingCache) -> None:
    one, other = Counting(), Counting()
    other.model_name = "another-model"  # type: ignore[misc]
    await CachedEmbedder(one, cache).embed(["text"])
    await CachedEmbedder(other, cache).embed(["text"])
    assert len(one.calls) == len(other.calls) == 1
    assert cache.count() == 2


async def test_queries_pass_through_uncached(cache: EmbeddingCache) -> None:
    provider = Counting()
    cached = CachedEmbedder(provider, cache)
    await cached.embed_query(["q"])
    await cached.embed_query(["q"])
    assert provider.query_calls == [["q"], ["q"]]
    assert provider.calls == [] and cache.count() == 0


def test_wrapper_meets_the_protocol_and_delegates(cache: EmbeddingCache) -> None:
    cached = CachedEmbedder(Counting(), cache)
    assert isinstance(cached, EmbeddingProvider)
    assert (cached.model_name, cached.dimension, cached.batch_size) == ("count-model", 3, 2)


async def test_cache_persists_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as first:
        await CachedEmbedder(Counting(), first).embed(["kept"])
    provider = Counting()
    with EmbeddingCache(path) as second:
        await CachedEmbedder(provider, second).embed(["kept"])
    assert provider.calls == []
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_dimension_change_under_one_name_re_embeds(cache: EmbeddingCache) -> None:
    provider = Counting()
    cached = CachedEmbedder(provider, cache)
    await cached.embed(["old"])
    cache.put_many("count-model", [(text_key("old"), [1.0, 2.0])])  # a 2-wide vector for the same key
    vectors = await cached.embed(["old", "new"])
    assert [len(v) for v in vectors] == [3, 3]
    assert cache.get_many("count-model", [text_key("old")])[text_key("old")] == vectors[0]


def test_two_processes_and_threads_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    writer = textwrap.dedent(
        f"""
        from memsearch.embeddings.cache import EmbeddingCache
        cache = EmbeddingCache({str(path)!r})
        for i in range(150):
            cache.put_many("m", [(f"child-{{i}}", [float(i)] * 4)])
        print(cache.count("m") >= 150)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)

    def write(prefix: str) -> None:
        with EmbeddingCache(path) as cache:
            for i in range(150):
                cache.put_many("m", [(f"{prefix}-{i}", [float(i)] * 4)])

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0 and out.strip() == "True"
    with EmbeddingCache(path) as reader:
        assert reader.count("m") == 450
        assert reader.get_many("m", ["child-149", "a-7"]) == {"child-149": [149.0] * 4, "a-7": [7.0] * 4}


async def test_a_damaged_cache_file_is_bypassed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "broken.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    provider = Counting()
    with caplog.at_level(logging.WARNING, logger="memsearch.embeddings.cache"), EmbeddingCache(path) as cache:
        cached = CachedEmbedder(provider, cache)
        assert await cached.embed(["a"]) == [Counting.vector("a")]
        assert await cached.embed(["a"]) == [Counting.vector("a")]
    assert len(provider.calls) == 2
    assert "continuing without it" in caplog.text


def test_clear(cache: EmbeddingCache) -> None:
    cache.put_many("m1", [("k", [1.0])])
    cache.put_many("m2", [("k", [2.0])])
    cache.clear("m1")
    assert (cache.count("m1"), cache.count("m2")) == (0, 1)
    cache.clear()
    assert cache.count() == 0
