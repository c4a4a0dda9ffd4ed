"""The one table of a memory's operations (``memsearch.engine.operations``) and the faces built on it.

Every face of a memory — the synchronous ``Memory``, the awaitable ``MemSearch``, the service's
request handling — reads the same rows: the signatures match them, a call is checked once where it
enters (nothing is opened for a refused call), and the service refuses a request by the same rows.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path

import pytest

from memsearch import MemSearch
from memsearch.engine.interface import Memory
from memsearch.engine.operations import MAX_TOP_K, OPERATIONS, REQUIRED
from memsearch.errors import InvalidArgumentError, ServiceRequestError
from memsearch.service.ops import STORE_OPS
from memsearch.service.protocol import parse_request


def _params(fn: object) -> list[tuple[str, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [
        (p.name, REQUIRED if p.default is inspect.Parameter.empty else p.default)
        for p in sig.parameters.values()
        if p.name != "self"
    ]


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_face_of_an_operation_matches_its_row(name: str) -> None:
    op = OPERATIONS[name]
    row = [(p.name, p.default) for p in op.params]
    assert _params(getattr(Memory, name)) == row  # the synchronous face
    assert not inspect.iscoroutinefunction(getattr(Memory, name))
    assert _params(getattr(MemSearch, name)) == row  # the original's face: async where it embeds
    assert inspect.iscoroutinefunction(getattr(MemSearch, name)) is op.embeds
    here = getattr(MemSearch, op.here)  # what does it in the owning process takes every argument
    assert {n for n, _ in _params(here) if n != "options"} <= {n for n, _ in row}
    assert inspect.iscoroutinefunction(here) is op.embeds
    if op.op != "index":  # the service serialises index runs itself
        assert op.op in STORE_OPS


def test_the_memory_faces_are_exactly_the_operations() -> None:
    """Nothing else is public on ``Memory`` but ``index`` (a shorthand of its report) and closing."""
    public = {n for n in vars(Memory) if not n.startswith("_")}
    assert public == set(OPERATIONS) | {"index", "close"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.search("x", top_k=0), "top_k must be between 1 and 1000 (got 0)"),
        (lambda m: m.search("x", top_k=MAX_TOP_K + 1), "top_k must be between 1 and 1000"),
        (lambda m: m.search("x", top_k=True), "argument 'top_k' of 'search' has the wrong type (bool)"),
        (lambda m: m.search("x" * 100_001), "accepts at most 100,000"),
        (lambda m: m.search("x", recency_half_life=-1), "recency_half_life must be between 0 and 36500"),
        (lambda m: m.search("x", since=3), "argument 'since' of 'search' has the wrong type (int)"),
        (lambda m: m.expand("ab", context_lines=-1), "context_lines must be between 0 and 100000"),
        (lambda m: m.count(missing_ok="no"), "argument 'missing_ok' of 'count' has the wrong type"),
    ],
)
def test_a_call_is_checked_once_where_it_enters_before_anything_opens(
    tmp_path: Path, call: object, message: str
) -> None:
    db = tmp_path / "m.db"
    with (
        Memory(MemSearch(milvus_uri=str(db), embedding_provider="hash")) as memory,
        pytest.raises(InvalidArgumentError) as refused,
    ):
        call(memory)  # type: ignore[operator]
    assert message in refused.value.message and refused.value.exit_code == 2
    assert not db.exists()  # refused before the store (or its owner) was asked anything


def test_the_awaitable_face_checks_the_same_rows(tmp_path: Path) -> None:
    ms = MemSearch(milvus_uri=str(tmp_path / "m.db"), embedding_provider="hash")
    with pytest.raises(InvalidArgumentError, match="top_k must be between 1 and 1000"):
        asyncio.run(ms.search("x", top_k=5000))
    with pytest.raises(InvalidArgumentError, match="'force' of 'index_with_report' has the wrong type"):
        asyncio.run(ms.index_with_report(force="yes"))  # type: ignore[arg-type]
    assert not (tmp_path / "m.db").exists()


def _request(op: str, **args: object) -> bytes:
    return json.dumps({"op": op, "settings": {}, "args": args}).encode()


def test_the_service_refuses_requests_by_the_same_rows() -> None:
    assert parse_request(_request("search", query="x"))["args"] == {"query": "x"}
    assert parse_request(_request("index", force=True))["op"] == "index"
    assert parse_request(_request("query_chunks", source="/a"))["args"] == {"source": "/a"}
    with pytest.raises(
        ServiceRequestError, match="not a valid memsearch service request: unknown argument 'progress'"
    ):
        parse_request(_request("index", progress=1))  # this process's own: never sent
    with pytest.raises(ServiceRequestError, match="'search' needs the argument 'query'"):
        parse_request(_request("search", top_k=3))
    with pytest.raises(ServiceRequestError, match="'since' of 'search' has the wrong type"):
        parse_request(_request("search", query="x", since=20261103))
    with pytest.raises(ServiceRequestError, match=r"^top_k must be between 1 and 1000 \(got 0\)$"):
        parse_request(_request("search", query="x", top_k=0))
    with pytest.raises(ServiceRequestError, match="unknown operation 'query'"):
        parse_request(_request("query", filter_expr="1 == 1"))  # no raw filter from a client


def test_a_sync_memory_works_inside_a_running_loop_and_without_one(tmp_path: Path) -> None:
    """``compact`` calls a ``Memory`` from a coroutine: work done here that embeds then runs on a
    helper thread's loop rather than failing; from plain code it runs on a loop of its own."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Pool\n\nThe connection pool holds forty.\n")
    memory = Memory(MemSearch([str(notes)], milvus_uri=str(tmp_path / "m.db"), embedding_provider="hash"))
    with memory:
        assert memory.index() == 1

        async def inside() -> list[dict[str, object]]:
            return memory.search("connection pool", top_k=1)

        hits = asyncio.run(inside())
        assert hits and "forty" in str(hits[0]["content"])
        assert memory.search("connection pool", top_k=1) == hits
