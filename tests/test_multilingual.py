"""The multilingual leg (``embedding.multilingual``): a question in one language finds the note in
the other, through every face, with other processes on the store.

Real parts throughout: the default ONNX model and the multilingual model (the ``multilingual``
extra, which ``.[dev]`` installs), Milvus Lite, ``memsearch`` processes, a memory service, the MCP
server driven by the SDK's client."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from cli_process import memsearch
from memsearch import MemSearch
from memsearch.store import MilvusStore
from test_service import start_service

pytestmark = pytest.mark.model

#: Notes in two languages, and a question in the other language for each.
NOTES = {
    "checkout.md": "# Checkout\n\n## Timeouts\n\nThe checkout service timed out because the database "
    "connection pool was exhausted; we raised the pool size to fifty connections.\n",
    "bread.md": "# Recipes\n\n## Bread\n\nMix flour, water, salt and yeast, and let the dough rise "
    "overnight before baking it.\n",
    "导出.md": "# 导出\n\n## 订单导出\n\n订单导出失败的原因是文件编码错误，"
    "我们改成了带 BOM 的 UTF-8 编码。\n",
    "天气.md": "# 周末\n\n## 爬山\n\n周六天气很好，我们去爬山，下午在山顶吃了午饭。\n",
}
#: A Chinese question whose answer is an English note.
ZH_QUESTION = "数据库连接池太小导致结账超时了吗？"
ASKED = {ZH_QUESTION: "checkout.md", "why did the order export fail?": "导出.md"}


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in NOTES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@asynccontextmanager
async def _memory(notes: Path, db: Path, *, on: bool) -> AsyncIterator[MemSearch]:
    ms = MemSearch([str(notes)], milvus_uri=str(db), multilingual=on)
    try:
        yield ms
    finally:
        await ms.aclose()


def _names(hits: list[dict[str, object]]) -> list[str]:
    return [Path(str(h["source"])).name for h in hits]


def _vectors(db: Path) -> tuple[set[str], set[str]]:
    """(the chunk hashes of the collection, those of its sidecar)."""
    with MilvusStore(str(db), dimension=None) as store:
        return {r["chunk_hash"] for r in store.query()}, store.multilingual.hashes()


async def test_a_question_finds_the_note_in_the_other_language(notes: Path, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with _memory(notes, db, on=True) as ms:
        report = await ms.index_with_report()
        assert report.indexed_chunks == 4 and report.multilingual_embedded == 4
        for question, note in ASKED.items():
            hits = await ms.search(question, top_k=2)
            assert _names(hits)[0] == note, (question, hits)
        # Found across languages, a note is a strong match by the multilingual similarity alone.
        hits = await ms.search(ZH_QUESTION, top_k=1)
        assert hits[0]["relevance"] >= 0.7, hits[0]
    main, sidecar = _vectors(db)
    assert sidecar == main and len(main) == 4


async def test_turning_it_on_embeds_every_chunk_once_then_only_new_ones(notes: Path, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with _memory(notes, db, on=False) as ms:
        assert (await ms.index_with_report()).indexed_chunks == 4
    async with _memory(notes, db, on=True) as ms:
        first = await ms.index_with_report()  # the unchanged folder is not a no-op: the leg is new
        assert (first.indexed_chunks, first.multilingual_embedded) == (0, 4)
        again = await ms.index_with_report()
        assert again.unchanged and again.multilingual_embedded == 0
        (notes / "more.md").write_text("# More\n\nA note about the staging deploy window.\n")
        more = await ms.index_with_report()
        assert (more.indexed_chunks, more.multilingual_embedded) == (1, 1)
    main, sidecar = _vectors(db)
    assert sidecar == main


async def test_writes_with_the_leg_off_never_give_wrong_hits(notes: Path, tmp_path: Path) -> None:
    """Another process with the leg off (or the original memsearch) rewrites a note: the sidecar
    keeps the old chunk's vector for a while; a search with the leg on never returns the chunk
    that is gone, and the next index with the leg on brings the sidecar level."""
    db = tmp_path / "m.db"
    async with _memory(notes, db, on=True) as ms:
        await ms.index()
    gone, _ = _vectors(db)
    (notes / "导出.md").write_text("# 导出\n\n## 订单导出\n\n订单导出改成了每天凌晨两点运行一次。\n", "utf-8")
    async with _memory(notes, db, on=False) as off:
        assert (await off.index_with_report()).indexed_chunks == 1
    main, sidecar = _vectors(db)
    assert main != gone and main - sidecar  # the new chunk has no second vector yet
    async with _memory(notes, db, on=True) as ms:
        hits = await ms.search("why did the order export fail?", top_k=4)
        assert {h["chunk_hash"] for h in hits} <= main  # nothing that is gone
        report = await ms.index_with_report()
        assert report.multilingual_embedded == 1
    main, sidecar = _vectors(db)
    assert sidecar == main


async def test_on_without_vectors_searches_two_legs_and_says_so(
    notes: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "m.db"
    async with _memory(notes, db, on=False) as ms:
        await ms.index()
        plain = await ms.search("why did the order export fail?", top_k=4)
    with caplog.at_level(logging.WARNING, logger="memsearch"):
        async with _memory(notes, db, on=True) as ms:
            assert await ms.search("why did the order export fail?", top_k=4) == plain
            await ms.search(ZH_QUESTION, top_k=4)
    said = [r.getMessage() for r in caplog.records if "no multilingual vectors" in r.getMessage()]
    assert len(said) == 1 and "memsearch index" in said[0]


def test_one_config_line_through_the_cli_a_service_and_mcp(notes: Path, tmp_path: Path) -> None:
    """``config set`` turns it on; ``index`` says what it embedded; a service owning the store
    answers a CLI search across languages (and a CLI with the leg off gets its two-leg answer
    from the same service); the MCP server's search tool does the same."""
    uri = str(tmp_path / "cli.db")
    assert memsearch("config", "set", "embedding.multilingual", "true").returncode == 0
    indexed = memsearch("index", str(notes), "--milvus-uri", uri)
    assert indexed.returncode == 0, indexed.stderr
    assert "Multilingual leg: second vectors for 4 chunks." in indexed.stdout
    service = start_service(uri)
    try:
        found = memsearch("search", ZH_QUESTION, "-j", "-k", "1", "--milvus-uri", uri)
        assert found.returncode == 0, found.stderr
        assert _names(json.loads(found.stdout)) == ["checkout.md"]
        off = memsearch("search", ZH_QUESTION, "-j", "-k", "1", "--milvus-uri", uri, "--no-multilingual")
        assert off.returncode == 0, off.stderr
        assert _names(json.loads(off.stdout)) != ["checkout.md"]  # two legs: BM25 knows no English
    finally:
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=30) == 0

    async def mcp_search() -> str:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "memsearch", "mcp", "--milvus-uri", uri, "--collection", "memsearch_chunks"],
            env=dict(os.environ),
            cwd=notes,
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            result = await client.call_tool("search", {"query": ZH_QUESTION, "top_k": 1})
            return "\n".join(c.text for c in result.content if c.type == "text")

    assert "checkout.md" in asyncio.run(mcp_search())
