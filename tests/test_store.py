"""MilvusStore against real Milvus: embedded Lite in tmp_path and a milvus-lite server on 127.0.0.1.

Behaviour that both kinds of store share runs against both (the ``target`` fixture); Lite-only
behaviour (paths, the database lock) and unit-level helpers run once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memsearch import errors
from memsearch.store import MilvusStore, escape_filter_value, milvus, source_prefix_filter, truncate_utf8
from memsearch.store.uri import resolve_uri

# The fixture lives in a plugin module; conftest may load it with pytest_plugins instead.
from milvus_server import free_port

DIM = 8


def vec(*weights: float) -> list[float]:
    """A DIM-long vector starting with ``weights`` (zeros after)."""
    return [*weights, *([0.0] * (DIM - len(weights)))]


def axis(i: int) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(DIM)]


def chunk(
    chunk_hash: str, content: str, source: str = "/n/a.md", vector: list[float] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "chunk_hash": chunk_hash,
        "embedding": vector or axis(0),
        "content": content,
        "source": source,
        "heading": "Heading",
        "heading_level": 1,
        "start_line": 1,
        "end_line": 3,
        **extra,
    }


@dataclass
class Target:
    kind: str
    uri: str
    collection: str


@pytest.fixture(
    params=[pytest.param("lite", id="lite"), pytest.param("server", id="server", marks=pytest.mark.server)]
)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "lite":
        return Target("lite", str(tmp_path / "milvus.db"), "memsearch_chunks")
    uri = request.getfixturevalue("milvus_server_uri")
    return Target("server", uri, f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def open_store(target: Target) -> Iterator[Callable[..., MilvusStore]]:
    """Opens stores on the target (closing them afterwards); server collections are dropped."""
    opened: list[MilvusStore] = []

    def factory(**kwargs: Any) -> MilvusStore:
        kwargs.setdefault("collection", target.collection)
        kwargs.setdefault("dimension", DIM)
        opened.append(MilvusStore(target.uri, **kwargs))
        return opened[-1]

    yield factory
    for opened_store in opened:
        opened_store.close()
    if target.kind == "server":
        with MilvusStore(target.uri, collection=target.collection, dimension=None) as cleanup:
            cleanup.drop()


# --- import cost and URIs -------------------------------------------------------------------


def test_import_does_not_load_pymilvus_or_jieba() -> None:
    code = (
        "import sys, memsearch.store; "
        "print(sorted(m for m in ('pymilvus', 'pandas', 'jieba') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_lite_store_never_loads_pymilvus_or_grpc(tmp_path: Path) -> None:
    """Milvus Lite is driven in-process (memsearch.store.lite): no pymilvus import, no gRPC server."""
    code = (
        "import sys\n"
        "from memsearch.store import MilvusStore\n"
        f"with MilvusStore({str(tmp_path / 'm.db')!r}, dimension=2) as s:\n"
        "    s.upsert([{'chunk_hash': 'a', 'embedding': [1.0, 0.0], 'content': 'alpha', 'source': '/a.md',\n"
        "               'heading': '', 'heading_level': 0, 'start_line': 1, 'end_line': 1}])\n"
        "    s.flush()\n"
        "    assert s.search([1.0, 0.0], query_text='alpha', top_k=1)[0]['chunk_hash'] == 'a'\n"
        "print(sorted(m for m in ('pymilvus', 'grpc') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("uri", "kind"),
    [
        ("http://localhost:19530", "server"),
        ("HTTPS://in01.zillizcloud.com:443", "server"),
        ("tcp://10.0.0.1:19530", "server"),
        ("unix:/tmp/milvus.sock", "server"),
        ("milvus.db", "lite"),
        ("~/.memsearch/milvus.db", "lite"),
        ("httpdocs/milvus.db", "lite"),  # the original called anything starting with "http" remote
    ],
)
def test_resolve_uri_classifies_by_scheme(uri: str, kind: str) -> None:
    assert resolve_uri(uri).kind == kind


def test_resolve_uri_expands_and_resolves_lite_paths(isolated_env: Path) -> None:
    assert resolve_uri("sub/../m.db").path == isolated_env / "m.db"
    assert resolve_uri("~/x/m.db").path == Path(os.environ["HOME"]) / "x" / "m.db"


def test_resolve_uri_redacts_credentials() -> None:
    location = resolve_uri("https://admin:s3cret@example.com:19530")
    assert location.uri == "https://admin:s3cret@example.com:19530"
    assert "s3cret" not in location.display
    assert location.display == "https://***@example.com:19530"


def test_lite_creates_parent_directories(isolated_env: Path) -> None:
    with MilvusStore("deep/er/milvus.db", dimension=DIM) as opened:
        assert opened.uri == str(isolated_env / "deep" / "er" / "milvus.db")
        assert opened.is_local
    assert (isolated_env / "deep" / "er" / "milvus.db").is_dir()


def test_lite_path_must_end_in_db(tmp_path: Path) -> None:
    with pytest.raises(errors.StoreConnectionError) as info:
        MilvusStore(str(tmp_path / "data"), dimension=DIM)
    assert "must end in .db" in info.value.message
    assert "milvus.db" in info.value.hint
    assert not (tmp_path / "data").exists()


def test_lite_plain_file_gets_the_legacy_message(tmp_path: Path) -> None:
    legacy = tmp_path / "old.db"
    legacy.write_bytes(b"SQLite format 3\0")
    with pytest.raises(errors.StoreConnectionError) as info:
        MilvusStore(str(legacy), dimension=DIM)
    assert "stores a database as a directory, but this path is a file" in info.value.message
    assert "If it is a database from Milvus Lite 2.x" in info.value.hint  # does not claim it is one
    assert "memsearch index" in info.value.hint
    assert legacy.read_bytes() == b"SQLite format 3\0"


def test_windows_local_store_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(errors.StoreConnectionError) as info:
        MilvusStore(str(tmp_path / "milvus.db"), dimension=DIM)
    assert "Windows" in info.value.message
    assert "docker run -d -p 19530:19530 milvusdb/milvus:latest standalone" in info.value.hint
    assert "http://localhost:19530" in info.value.hint
    assert "WSL2" in info.value.hint


def test_unreachable_server_fails_fast() -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(errors.StoreConnectionError) as info:
        MilvusStore(uri, dimension=DIM)
    assert time.monotonic() - start < 5
    assert uri in info.value.message
    assert "server is running" in info.value.hint
    assert not isinstance(info.value, errors.StoreLockedError)


# --- filter helpers -------------------------------------------------------------------------


def test_escape_filter_value() -> None:
    assert escape_filter_value('a"b\\c') == 'a\\"b\\\\c'
    assert escape_filter_value("line\nnext\ttab\r") == "line\\nnext\\ttab\\r"
    assert escape_filter_value("\udcff.md") == "\ufffd.md"
    for bad in ("nul\0", "bell\x07", "del\x7f"):
        with pytest.raises(errors.StoreError) as info:
            escape_filter_value(bad)
        assert "control character" in info.value.message


def test_source_prefix_filter_shape() -> None:
    assert source_prefix_filter("/n/docs/") == source_prefix_filter("/n/docs")
    assert source_prefix_filter("/n/my_dir") == '(source == "/n/my_dir" or source like "/n/my\\\\_dir/%")'
    assert source_prefix_filter('/n/a"b') == '(source == "/n/a\\"b" or source like "/n/a\\"b/%")'
    assert source_prefix_filter("/") == '(source like "/%")'


def test_truncate_utf8_keeps_whole_characters() -> None:
    assert truncate_utf8("aé", 2) == "a"
    assert truncate_utf8("中文", 5) == "中"
    assert truncate_utf8("short", 10) == "short"


# --- schema, lifecycle ----------------------------------------------------------------------


@contextlib.contextmanager
def pymilvus_client(target: Target) -> Iterator[Any]:
    """A pymilvus ``MilvusClient`` on the target: how the original memsearch opens the same store."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=target.uri)
    try:
        yield client
    finally:
        client.close()
        if target.kind == "lite":
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_server(str(Path(target.uri).resolve()))


def test_schema_as_pymilvus_sees_it(open_store: Callable[..., MilvusStore], target: Target) -> None:
    """The collection we create is the reference schema, read back through pymilvus (for Lite: a
    database written in-process by memsearch opens with pymilvus, as the original opens it)."""
    opened = open_store()
    opened.close()
    with pymilvus_client(target) as client:
        _check_reference_schema(client, target.collection)
        assert opened.analyzer == "jieba"


def _check_reference_schema(client: Any, collection: str) -> None:
    info = client.describe_collection(collection)
    fields = {f["name"]: f for f in info["fields"]}
    assert list(fields) == [
        "chunk_hash",
        "embedding",
        "content",
        "sparse_vector",
        "source",
        "heading",
        "heading_level",
        "start_line",
        "end_line",
    ]
    types = {name: f["type"].name for name, f in fields.items()}
    assert types == {
        "chunk_hash": "VARCHAR",
        "embedding": "FLOAT_VECTOR",
        "content": "VARCHAR",
        "sparse_vector": "SPARSE_FLOAT_VECTOR",
        "source": "VARCHAR",
        "heading": "VARCHAR",
        "heading_level": "INT64",
        "start_line": "INT64",
        "end_line": "INT64",
    }
    assert fields["chunk_hash"]["is_primary"] and not info["auto_id"]
    assert int(fields["chunk_hash"]["params"]["max_length"]) == 64
    assert int(fields["content"]["params"]["max_length"]) == 65535
    assert int(fields["source"]["params"]["max_length"]) == 1024
    assert int(fields["heading"]["params"]["max_length"]) == 1024
    assert int(fields["embedding"]["params"]["dim"]) == DIM
    assert info["enable_dynamic_field"]
    assert "jieba" in str(fields["content"]["params"]["analyzer_params"])
    (function,) = info["functions"]
    assert function["name"] == "bm25_fn" and function["type"].name == "BM25"
    assert function["input_field_names"] == ["content"]
    assert function["output_field_names"] == ["sparse_vector"]
    indexes = {name: client.describe_index(collection, name) for name in client.list_indexes(collection)}
    by_field = {i["field_name"]: (i["index_type"], i["metric_type"]) for i in indexes.values()}
    assert by_field == {"embedding": ("FLAT", "COSINE"), "sparse_vector": ("SPARSE_INVERTED_INDEX", "BM25")}


def test_store_reads_what_pymilvus_wrote(target: Target) -> None:
    """An index written through pymilvus (the original memsearch's way) is found by this store,
    which on Lite reads the directory in-process; and its analyzer and dimension are adopted."""
    with MilvusStore(target.uri, collection=target.collection, dimension=DIM) as created:
        created.drop()  # start from nothing: pymilvus creates the collection below
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    with pymilvus_client(target) as client:
        schema = MilvusClient.create_schema(enable_dynamic_field=True)
        schema.add_field("chunk_hash", DataType.VARCHAR, max_length=64, is_primary=True)
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=DIM)
        schema.add_field(
            "content",
            DataType.VARCHAR,
            max_length=65535,
            enable_analyzer=True,
            analyzer_params={"tokenizer": "jieba"},
        )
        schema.add_field("sparse_vector", DataType.SPARSE_FLOAT_VECTOR)
        for name in ("source", "heading"):
            schema.add_field(name, DataType.VARCHAR, max_length=1024)
        for name in ("heading_level", "start_line", "end_line"):
            schema.add_field(name, DataType.INT64)
        schema.add_function(Function("bm25_fn", FunctionType.BM25, ["content"], ["sparse_vector"]))
        index_params = MilvusClient.prepare_index_params()
        index_params.add_index(field_name="embedding", index_type="FLAT", metric_type="COSINE")
        index_params.add_index(
            field_name="sparse_vector", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25"
        )
        client.create_collection(target.collection, schema=schema, index_params=index_params)
        client.upsert(target.collection, [chunk("p1", "written by pymilvus about pgbouncer", vector=axis(2))])
        client.flush(target.collection)
    try:
        with MilvusStore(target.uri, collection=target.collection, dimension=None) as reader:
            assert reader.dimension == DIM and reader.analyzer == "jieba"
            assert reader.count() == 1
            hits = reader.search(axis(2), query_text="pgbouncer", top_k=1)
            assert hits[0]["chunk_hash"] == "p1" and hits[0]["score"] == pytest.approx(1.0)
    finally:
        with MilvusStore(target.uri, collection=target.collection, dimension=None) as cleanup:
            cleanup.drop()


def test_a_write_after_another_store_dropped_the_collection_recreates_it(
    open_store: Callable[..., MilvusStore],
) -> None:
    """Two stores of one database (the store's owner serves several memories at once): one resets
    while the other still believes in the collection. Its next write creates the collection again
    (before: "WAL already closed" on Lite, or "No collection"), and a deletion finds nothing."""
    writer, resetter = open_store(), open_store()
    assert writer.upsert([chunk("h1", "alpha notes", "/n/a.md", axis(0))]) == 1
    resetter.drop()
    assert writer.exists  # it has not looked since
    assert writer.upsert([chunk("h2", "beta notes", "/n/b.md", axis(1))]) == 1
    assert writer.count() == 1 and resetter.count() == 1
    resetter.drop()
    writer.refresh()
    assert not writer.exists


def test_upsert_search_delete(open_store: Callable[..., MilvusStore]) -> None:
    opened = open_store()
    rows = [
        chunk("h1", "alpha notes", "/n/a.md", axis(0), topic="x"),
        chunk("h2", "beta notes", "/n/a.md", axis(1)),
        chunk("h3", "gamma notes", "/n/b.md", axis(2)),
    ]
    assert opened.upsert(rows) == 3
    assert opened.upsert(rows) == 3  # idempotent: same keys replace
    assert opened.count() == 3
    results = opened.search(axis(1), query_text="beta", top_k=2)
    assert results[0]["chunk_hash"] == "h2"
    assert set(results[0]) == {
        "content",
        "source",
        "heading",
        "chunk_hash",
        "heading_level",
        "start_line",
        "end_line",
        "score",
    }
    assert results[0]["source"] == "/n/a.md" and results[0]["heading_level"] == 1
    assert opened.get_by_hash("h1") == {
        "content": "alpha notes",
        "source": "/n/a.md",
        "heading": "Heading",
        "chunk_hash": "h1",
        "heading_level": 1,
        "start_line": 1,
        "end_line": 3,
    }
    assert opened.get_by_hash('h1" or chunk_hash != "') is None
    opened.upsert([chunk("h2", "beta rewritten", "/n/a.md", axis(1))])
    assert opened.count() == 3
    assert opened.get_by_hash("h2")["content"] == "beta rewritten"  # type: ignore[index]
    opened.delete_by_source("/n/a.md")
    assert opened.indexed_sources() == {"/n/b.md"}
    opened.delete_by_hashes(["h3"])
    opened.delete_by_hashes([])
    assert opened.count() == 0


def test_duplicate_hashes_in_one_upsert_keep_the_last(open_store: Callable[..., MilvusStore]) -> None:
    opened = open_store()
    assert opened.upsert([chunk("d", "first"), chunk("d", "second")]) == 1
    assert opened.query() == [opened.get_by_hash("d")]
    assert opened.get_by_hash("d")["content"] == "second"  # type: ignore[index]


def test_hybrid_bm25_boosts_keyword_match_and_normalises_scores(
    open_store: Callable[..., MilvusStore],
) -> None:
    opened = open_store()
    opened.upsert(
        [
            chunk("dense", "general notes about meetings", vector=axis(0)),
            chunk("keyword", "the zebra handshake protocol", vector=vec(0.9, 0.4)),
        ]
    )
    results = opened.search(axis(0), query_text="zebra", top_k=2)
    # "keyword" is #2 by vector but #1 by BM25; "dense" is #1 by vector only.
    assert [r["chunk_hash"] for r in results] == ["keyword", "dense"]
    assert results[0]["score"] == pytest.approx((1 / 61 + 1 / 62) / (2 / 61), rel=1e-4)  # 0.9919
    assert results[1]["score"] == pytest.approx(0.5, rel=1e-4)
    top = opened.search(vec(0.9, 0.4), query_text="zebra", top_k=1)
    assert top[0]["chunk_hash"] == "keyword"
    assert top[0]["score"] == pytest.approx(1.0, rel=1e-4)  # #1 in both lists


def test_search_fuses_leg_hits_the_caller_already_has(open_store: Callable[..., MilvusStore]) -> None:
    """``leg_hits`` stands in for a leg (MemSearch.search passes the BM25 leg of a cold start): the
    fused result is the same as running that leg here, and the hits given are the ones fused."""
    opened = open_store()
    opened.upsert(
        [
            chunk("dense", "general notes about meetings", vector=axis(0)),
            chunk("keyword", "the zebra handshake protocol", vector=vec(0.9, 0.4)),
        ]
    )
    sparse = opened.search_leg("sparse", "zebra", top_k=2)
    both = opened.search(axis(0), query_text="zebra", top_k=2, weights=(1.5, 1.0))
    assert opened.search(axis(0), top_k=2, weights=(1.5, 1.0), leg_hits={"sparse": sparse}) == both
    # No BM25 hits given: the dense leg alone decides, and "dense" (#1 by vector) leads.
    alone = opened.search(axis(0), query_text="zebra", top_k=2, leg_hits={"sparse": []})
    assert [r["chunk_hash"] for r in alone] == ["dense", "keyword"]
    assert (
        opened.search(axis(0), top_k=2, mode="sparse", leg_hits={"sparse": sparse})[0]["chunk_hash"]
        == "keyword"
    )


def test_chinese_bm25_and_case_insensitive_english(open_store: Callable[..., MilvusStore]) -> None:
    opened = open_store()
    opened.upsert(
        [
            chunk("zh", "我们使用向量数据库进行语义搜索", vector=axis(0)),
            chunk("en", "The database engine is fast", vector=axis(1)),
            chunk("other", "cats and dogs", vector=axis(2)),
        ]
    )
    # The query vector is orthogonal to every chunk: only BM25 can decide.
    assert opened.search(axis(7), query_text="数据库", top_k=3)[0]["chunk_hash"] == "zh"
    assert opened.search(axis(7), query_text="语义搜索", top_k=3)[0]["chunk_hash"] == "zh"
    assert opened.search(axis(7), query_text="DATABASE", top_k=3)[0]["chunk_hash"] == "en"
    assert opened.search(axis(7), query_text="Engine", top_k=3)[0]["chunk_hash"] == "en"


def test_empty_collection_search(open_store: Callable[..., MilvusStore]) -> None:
    opened = open_store()
    assert opened.search(axis(0), query_text="anything") == []
    assert opened.search(axis(0)) == []
    opened.upsert([chunk("a", "some text")])
    opened.delete_by_hashes(["a"])
    assert opened.search(axis(0), query_text="some text") == []
    assert opened.search(axis(0), top_k=0) == []


def test_filters_escape_quotes_backslashes_and_wildcards(open_store: Callable[..., MilvusStore]) -> None:
    opened = open_store()
    sources = [
        '/n/say "hi".md',
        "/n/back\\slash.md",
        "/n/x_y.md",
        "/n/xzy.md",
        "/n/100%.md",
        "/n/1000.md",
        "/n/tab\there.md",
    ]
    opened.upsert([chunk(f"h{i}", f"text {i}", source) for i, source in enumerate(sources)])
    for i, source in enumerate(sources):
        assert opened.hashes_by_source(source) == {f"h{i}"}
    assert opened.hashes_by_source('/n/xzy.md" or source != "') == set()
    assert opened.hashes_by_source("/n/x%") == set()
    opened.delete_by_source('/n/xzy.md" or source != "')
    assert opened.count() == len(sources)
    opened.delete_by_source("/n/x_y.md")
    assert "/n/xzy.md" in opened.indexed_sources() and "/n/x_y.md" not in opened.indexed_sources()
    assert opened.hashes_by_sources([*sources, "/n/missing.md"]) == {
        **{source: {f"h{i}"} for i, source in enumerate(sources)},
        "/n/x_y.md": set(),
        "/n/missing.md": set(),
    }


def test_source_prefix_matches_path_boundaries(open_store: Callable[..., MilvusStore]) -> None:
    opened = open_store()
    sources = [
        "/n/docs",
        "/n/docs/a.md",
        "/n/docs/sub/b.md",
        "/n/docs2/c.md",
        "/n/my_dir/d.md",
        "/n/myxdir/e.md",
        "/n/100%/f.md",
        "/n/100x/g.md",
        "/n/back\\dir/h.md",
        "/n/backxdir/i.md",
    ]
    opened.upsert([chunk(f"h{i}", f"text {i}", source, axis(i % DIM)) for i, source in enumerate(sources)])

    def under(prefix: str) -> set[str]:
        return {row["source"] for row in opened.query(filter_expr=source_prefix_filter(prefix))}

    assert under("/n/docs") == {"/n/docs", "/n/docs/a.md", "/n/docs/sub/b.md"}
    assert under("/n/docs/") == under("/n/docs")
    assert under("/n/my_dir") == {"/n/my_dir/d.md"}
    assert under("/n/100%") == {"/n/100%/f.md"}
    assert under("/n/back\\dir") == {"/n/back\\dir/h.md"}
    assert under("/n") == set(sources)
    assert under('/n/docs" or source != "') == set()
    hits = opened.search(axis(0), query_text="text", top_k=10, filter_expr=source_prefix_filter("/n/docs"))
    assert {h["source"] for h in hits} == {"/n/docs", "/n/docs/a.md", "/n/docs/sub/b.md"}


def test_dimension_mismatch(open_store: Callable[..., MilvusStore]) -> None:
    open_store().close()
    with pytest.raises(errors.DimensionMismatchError) as info:
        open_store(dimension=DIM * 2)
    assert isinstance(info.value, ValueError)
    assert info.value.message == (
        f"Embedding dimension mismatch: collection '{info.value.message.split(chr(39))[1]}' has dim={DIM} "
        f"but the current embedding provider outputs dim={DIM * 2}. Run 'memsearch reset --yes' to drop the "
        "collection and re-index, or use a different --milvus-uri / --collection."
    )
    assert "`memsearch index <paths>` rebuilds" in info.value.hint and "--force" not in info.value.hint


def test_reopened_collection_is_loaded_and_queryable(open_store: Callable[..., MilvusStore]) -> None:
    first = open_store()
    first.upsert([chunk("a", "persisted text", vector=axis(3))])
    first.close()
    again = open_store()
    assert again.search(axis(3), query_text="persisted", top_k=1)[0]["chunk_hash"] == "a"
    again.close()
    read_only = open_store(dimension=None)
    assert read_only.exists and read_only.dimension == DIM
    assert read_only.count() == 1
    assert read_only.query()[0]["content"] == "persisted text"


def test_read_only_mode_on_a_missing_collection(
    open_store: Callable[..., MilvusStore], target: Target
) -> None:
    read_only = open_store(dimension=None)
    assert not read_only.exists
    calls: list[Callable[[], object]] = [
        read_only.count,
        read_only.query,
        read_only.indexed_sources,
        lambda: read_only.search(axis(0), query_text="x"),
        lambda: read_only.get_by_hash("abc"),
        lambda: read_only.hashes_by_source("/n/a.md"),
        lambda: read_only.upsert([chunk("a", "x")]),
    ]
    for call in calls:
        with pytest.raises(errors.CollectionNotFoundError) as info:
            call()
        assert info.value.message == f"No collection '{target.collection}' at {read_only.uri}"
        assert "memsearch index" in info.value.hint
    read_only.drop()  # no-op
    assert not open_store(dimension=None).exists  # nothing was created
    writer = open_store()
    writer.upsert([chunk("a", "x")])
    assert read_only.count() == 1  # the collection appeared since: found and loaded on demand


def test_drop(open_store: Callable[..., MilvusStore]) -> None:
    opened = open_store()
    opened.upsert([chunk("a", "x")])
    opened.drop()
    assert not opened.exists
    with pytest.raises(errors.CollectionNotFoundError):
        opened.count()
    opened.drop()
    recreated = open_store()
    assert recreated.count() == 0
    assert recreated.search(axis(0), query_text="x") == []


def test_description(open_store: Callable[..., MilvusStore]) -> None:
    created = open_store(description="project notes: memsearch")
    assert created.description == "project notes: memsearch"
    created.close()
    assert open_store(dimension=None).description == "project notes: memsearch"
    reopened = open_store(description="ignored for an existing collection")
    assert reopened.description == "project notes: memsearch"


def test_description_defaults_to_empty(open_store: Callable[..., MilvusStore]) -> None:
    open_store().close()
    assert open_store(dimension=None).description == ""


def test_pagination(open_store: Callable[..., MilvusStore], monkeypatch: pytest.MonkeyPatch) -> None:
    opened = open_store()
    rows = [chunk(f"h{i:02d}", f"text {i}", f"/n/s{i % 3}.md", axis(i % DIM)) for i in range(23)]
    opened.upsert(rows)
    monkeypatch.setattr(milvus, "IN_BATCH", 2)  # where MilvusStore reads it
    for page_size in (1, 4, 22, 23, 1000):
        opened.page_size = page_size
        result = opened.query()
        assert sorted(r["chunk_hash"] for r in result) == [f"h{i:02d}" for i in range(23)], page_size
        assert opened.sources_with_counts() == {"/n/s0.md": 8, "/n/s1.md": 8, "/n/s2.md": 7}
        assert opened.hashes_by_source("/n/s0.md") == {f"h{i:02d}" for i in range(0, 23, 3)}
        by_source = opened.hashes_by_sources(["/n/s0.md", "/n/s1.md", "/n/s2.md"])
        assert {k: len(v) for k, v in by_source.items()} == {"/n/s0.md": 8, "/n/s1.md": 8, "/n/s2.md": 7}
    assert opened.indexed_sources() == {"/n/s0.md", "/n/s1.md", "/n/s2.md"}


def test_long_fields_are_truncated_not_fatal(open_store: Callable[..., MilvusStore]) -> None:
    opened = open_store()
    long_source = "/n/" + "中" * 600 + ".md"  # 1806 bytes > 1024
    rows = [
        chunk("long", "x" * 70_000, long_source, heading="é" * 1500),
        chunk("normal", "ordinary text", "/n/ok.md"),
    ]
    assert opened.upsert(rows) == 2
    assert rows[0]["content"] == "x" * 70_000  # the caller's rows are not modified
    stored = opened.get_by_hash("long")
    assert stored is not None
    assert stored["content"] == "x" * 65535
    assert stored["heading"] == "é" * 512
    assert len(stored["source"].encode()) <= 1024 and long_source.startswith(stored["source"])
    assert opened.hashes_by_source(long_source) == {"long"}  # lookups truncate the same way
    assert opened.hashes_by_sources([long_source]) == {long_source: {"long"}}
    assert opened.get_by_hash("normal") is not None


def test_lite_engine_failures_of_any_type_become_store_errors(tmp_path: Path) -> None:
    """The in-process engine raises plain Python errors too (here numpy's ValueError for a vector of
    words); they surface as one StoreError, as they did through milvus-lite's gRPC layer."""
    with MilvusStore(str(tmp_path / "m.db"), dimension=DIM) as opened:
        opened.upsert([chunk("h1", "alpha notes")])
        with pytest.raises(errors.StoreError, match="ValueError") as info:
            opened.search_leg("dense", ["not a number"] * DIM, top_k=1)  # type: ignore[list-item]
        assert type(info.value) is errors.StoreError
        assert opened.search(axis(0), query_text="alpha", top_k=1)[0]["chunk_hash"] == "h1"  # still usable


def test_driver_errors_become_store_errors(open_store: Callable[..., MilvusStore]) -> None:
    from memsearch.store.lite import fast_path_line

    opened = open_store()
    state = fast_path_line()
    with pytest.raises(errors.StoreError) as info:
        opened.query(filter_expr="this is (( not a filter")
    assert fast_path_line() == state  # the caller's filter, not a failure of the Lite fast path
    assert type(info.value) is errors.StoreError
    assert info.value.message.startswith("Milvus error")
    assert "not a filter" in info.value.message or "expected" in info.value.message
    assert "(code None)" not in info.value.message
    driver = type(info.value.__cause__).__module__.split(".")[0]
    assert driver == ("milvus_lite" if opened.is_local else "pymilvus")  # Lite runs in-process
    opened.close()
    opened.close()
    with pytest.raises(errors.StoreError, match="closed"):
        opened.count()


# --- Milvus Lite only: the database lock ----------------------------------------------------

HOLDER = """
import sys, time
from milvus_lite.db import MilvusLite
db = MilvusLite(sys.argv[1])
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
db.close()
print("released", flush=True)
time.sleep(60)
"""


@pytest.fixture
def hold_database() -> Iterator[Callable[[Path, float], subprocess.Popen[str]]]:
    """Start a process that opens a Lite database, holds it for N seconds, then closes it."""
    procs: list[subprocess.Popen[str]] = []

    def start(path: Path, seconds: float) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _lock_is_free(path: Path) -> bool:
    fd = os.open(path / "LOCK", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def test_locked_database_waits_then_names_the_holder(tmp_path: Path, hold_database: Any) -> None:
    path = tmp_path / "milvus.db"
    holder = hold_database(path, 60)
    start = time.monotonic()
    with pytest.raises(errors.StoreLockedError) as info:
        MilvusStore(str(path), dimension=DIM, lock_timeout=1)
    elapsed = time.monotonic() - start
    assert 1.0 <= elapsed < 4
    assert f"process {holder.pid} (" in info.value.message
    assert str(path) in info.value.message
    assert "memsearch serve" in info.value.hint
    assert "\n" not in info.value.one_line()
    assert isinstance(info.value, errors.StoreConnectionError)


def test_locked_database_opens_once_released(tmp_path: Path, hold_database: Any) -> None:
    path = tmp_path / "milvus.db"
    holder = hold_database(path, 1.0)
    start = time.monotonic()
    with MilvusStore(str(path), dimension=DIM, lock_timeout=10) as opened:
        assert time.monotonic() - start < 8
        assert opened.count() == 0
    assert holder.stdout.readline().strip() == "released"


def test_close_releases_the_lite_lock_and_shares_within_a_process(tmp_path: Path) -> None:
    path = tmp_path / "milvus.db"
    first = MilvusStore(str(path), dimension=DIM)
    second = MilvusStore(str(path), dimension=DIM)  # same process: shares the embedded server
    assert not _lock_is_free(path)
    first.upsert([chunk("a", "x")])
    first.close()
    assert second.count() == 1  # closing one store does not pull the database from the other
    assert not _lock_is_free(path)
    second.close()
    assert _lock_is_free(path)


def test_cli_output_stays_clean(tmp_path: Path) -> None:
    """No jieba banner and no pymilvus RPC tracebacks on stderr, even when a call fails."""
    script = f"""
from memsearch import errors
from memsearch.store import MilvusStore
with MilvusStore({str(tmp_path / "m.db")!r}, dimension=2) as s:
    s.upsert([{{"chunk_hash": "a", "embedding": [1.0, 0.0], "content": "中文 text", "source": "/a",
               "heading": "", "heading_level": 0, "start_line": 1, "end_line": 1}}])
    assert s.search([1.0, 0.0], query_text="中文")[0]["chunk_hash"] == "a"
    try:
        s.query(filter_expr="((")
    except errors.StoreError:
        print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
    assert done.stderr == ""


def test_lite_concurrent_writers_and_readers_lose_nothing(tmp_path: Path) -> None:
    """The indexer upserts from worker threads and the memory service serves several sources at
    once: threads writing (and searching) one in-process Lite database must all land."""
    import threading

    uri = str(tmp_path / "m.db")
    with MilvusStore(uri, dimension=DIM) as shared, MilvusStore(uri, dimension=DIM) as second:
        failures: list[BaseException] = []

        def writer(n: int, target: MilvusStore) -> None:
            try:
                for batch in range(10):
                    rows = [
                        chunk(f"w{n}-{batch}-{i}", f"writer {n} row {i}", f"/n/{n}.md", axis(i % DIM))
                        for i in range(20)
                    ]
                    target.upsert(rows)
                    target.search(axis(n % DIM), query_text=f"writer {n}", top_k=3)
                target.delete_by_hashes([f"w{n}-0-{i}" for i in range(5)])
            except BaseException as exc:  # reported below, not swallowed
                failures.append(exc)

        threads = [threading.Thread(target=writer, args=(n, shared if n % 2 else second)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        shared.flush()
        assert shared.count() == 4 * (200 - 5)
        assert second.sources_with_counts() == {f"/n/{n}.md": 195 for n in range(4)}


def test_stores_opened_at_once_in_one_process_share_one_loaded_collection(tmp_path: Path) -> None:
    """The memory service may open a store on several request threads at once (cold start). Milvus
    Lite caches a collection on its first lookup without a lock, so two first lookups at once made
    two objects, and a search through the one that lost the race found it 'released'."""
    import threading

    uri = str(tmp_path / "m.db")
    first = MilvusStore(uri, dimension=DIM)
    first.upsert([chunk("a", "alpha", vector=axis(0))])
    first.close()
    for _ in range(5):  # each round starts a fresh engine, so the first lookups race again
        barrier = threading.Barrier(6)
        stores: list[MilvusStore] = []
        failures: list[BaseException] = []

        def open_and_search(
            barrier: threading.Barrier = barrier,
            stores: list[MilvusStore] = stores,
            failures: list[BaseException] = failures,
        ) -> None:
            barrier.wait()
            try:
                store = MilvusStore(uri, dimension=DIM, create=False)
                stores.append(store)
                assert len(store.search_leg("dense", axis(0), top_k=1)) == 1
            except BaseException as exc:  # collected and asserted on the test's thread
                failures.append(exc)

        threads = [threading.Thread(target=open_and_search) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        for store in stores:
            store.close()
        assert failures == []
