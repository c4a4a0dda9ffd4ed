"""``memsearch migrate``: a real Milvus Lite store copied to a real server-mode store (``milvus-lite
server`` on 127.0.0.1, tests/milvus_server.py), vectors and chunk IDs as they are.

After the copy every search returns the same hits from both stores (same chunk IDs, same order,
scores equal within float tolerance); the copy reads the Lite store through the memory service that
holds it; a run cut short resumes, skipping what is there; and a destination holding other chunks
is refused by the verification, with the source left as it was.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from cli_process import memsearch
from memsearch import MemSearch
from memsearch.engine.migrate_store import STORED_FIELDS
from memsearch.store import MilvusStore
from test_service import EXAMPLES, start_service

pytestmark = pytest.mark.server

QUERIES = [
    "database connection timeout",
    "订单导出失败",
    "why did we choose the retry policy",
    "what did we decide on 2026-11-03",
    "rollback",
]


@pytest.fixture
def lite(tmp_path: Path, isolated_env: Path) -> tuple[str, Path]:
    """A Lite store of the example memory (the default ONNX model), and the memory folder."""
    notes = tmp_path / "memory"
    shutil.copytree(EXAMPLES, notes)
    # Distinct sections (lengths and words differ): no two chunks tie in either leg, so the order
    # of the hits is the ranking's, not the engine's order of ties (docs/scaling.md).
    sections = [
        f"## {topic} ({n})\n\nWe looked at {topic} again on day {n}: {detail}; "
        + " ".join(("and", "then", "checked", "the", "logs", "twice", "more")[:n])
        + ".\n"
        for n in range(1, 7)
        for topic, detail in (
            (
                "the export job",
                "it retries three times with a two second backoff, then marks the batch failed",
            ),
            ("the invoice search", "names are compared without accents since the last migration"),
            ("the release checklist", "staging first, a smoke test, then production on Tuesday morning"),
            ("发票导出", "导出任务失败后重试三次，间隔两秒，" + "再次确认" * n),
        )
    ]
    (notes / "runbook.md").write_text("# Runbook\n\n" + "\n".join(sections), encoding="utf-8")
    uri = str(tmp_path / "milvus.db")
    proc = memsearch("index", str(notes), "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    return uri, notes


def _migrate(lite: str, server: str, collection: str, *more: str) -> dict[str, Any]:
    proc = memsearch(
        "migrate", "--to", server, "--to-collection", collection, "--milvus-uri", lite, "-j", *more
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def _hits(uri: str, collection: str, notes: Path) -> list[list[dict[str, Any]]]:
    async def run() -> list[list[dict[str, Any]]]:
        with MemSearch([str(notes)], milvus_uri=uri, collection=collection) as ms:
            return [await ms.search(query, top_k=10) for query in QUERIES]

    return asyncio.run(run())


def test_every_search_returns_the_same_hits_after_the_move(
    lite: tuple[str, Path], milvus_server_uri: str
) -> None:
    uri, notes = lite
    collection = f"moved_{uuid.uuid4().hex[:8]}"
    service = start_service(uri)  # a memory service holds the Lite store: the copy reads through it
    try:
        report = _migrate(uri, milvus_server_uri, collection)
    finally:
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=30) == 0
    with MilvusStore(uri, dimension=None) as source:
        chunks = source.count()
    assert chunks > 25
    assert report["chunks"] == report["copied"] == report["verified"] == chunks and report["already"] == 0
    assert report["destination"] == milvus_server_uri and report["collection"] == collection

    before = _hits(uri, "memsearch_chunks", notes)
    after = _hits(milvus_server_uri, collection, notes)
    assert any(before)
    for query, mine, theirs in zip(QUERIES, before, after, strict=True):
        assert [h["chunk_hash"] for h in theirs] == [h["chunk_hash"] for h in mine], query
        assert [h["score"] for h in theirs] == pytest.approx([h["score"] for h in mine], rel=1e-5), query

    again = _migrate(uri, milvus_server_uri, collection)  # the next run finds it all there
    assert again["copied"] == 0 and again["already"] == again["verified"] == chunks


def test_a_copy_cut_short_resumes_and_a_destination_with_other_chunks_is_refused(
    lite: tuple[str, Path], milvus_server_uri: str
) -> None:
    uri, _ = lite
    collection = f"resumed_{uuid.uuid4().hex[:8]}"
    source = MilvusStore(uri, dimension=None)
    first = source.rows_after("", 10)  # what a run stopped after two pages of five left there
    chunks, analyzer, dimension = source.count(), source.analyzer, source.dimension
    source.close()
    fields = STORED_FIELDS
    with MilvusStore(
        milvus_server_uri, collection=collection, dimension=dimension, analyzer=analyzer
    ) as dest:
        dest.upsert([{key: row[key] for key in fields} for row in first])

    report = _migrate(uri, milvus_server_uri, collection, "--batch", "5")
    assert report["already"] == 10 and report["copied"] == chunks - 10 and report["verified"] == chunks

    with MilvusStore(
        milvus_server_uri, collection=collection, dimension=dimension, analyzer=analyzer
    ) as dest:
        dest.upsert(
            [
                {
                    **{key: first[0][key] for key in fields},
                    "chunk_hash": "f" * 16,
                    "content": "not in the source",
                }
            ]
        )
    proc = memsearch("migrate", "--to", milvus_server_uri, "--to-collection", collection, "--milvus-uri", uri)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: the destination holds chunks the source does not")
    assert "Traceback" not in proc.stderr
    with MilvusStore(uri, dimension=None) as source:
        assert source.count() == chunks  # the source as it was


def test_the_source_is_not_a_destination(lite: tuple[str, Path]) -> None:
    uri, _ = lite
    proc = memsearch("migrate", "--to", uri, "--milvus-uri", uri)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: the destination is the source") and "Hint:" in proc.stderr
