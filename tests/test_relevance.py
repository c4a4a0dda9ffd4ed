"""A hit's ``relevance`` (``memsearch.engine.relevance``) on a real store with the real ONNX model:
a nonsense query's best hit is under the strong-match floor, a real answer's over it, in English
and in Chinese; shown by every face (``MemSearch``, the CLI's plain and JSON output, MCP), and
"nothing in memory" said where the floor applies (``--min-relevance``, MCP ``search``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_process import memsearch
from memsearch import MemSearch
from memsearch.config.schema import DEFAULT_MIN_RELEVANCE
from memsearch.engine.relevance import QueryTerms, lexical_match, relevance
from test_mcp import call, session

pytestmark = pytest.mark.model

FLOOR = DEFAULT_MIN_RELEVANCE
NOTES = {
    "2026-11-30.md": "# 2026-11-30\n\n## Session 10:00\n\n### 10:00\n"
    "- Checkout timed out because the Redis connection pool had only two connections.\n"
    "- We raised the pool to twenty and set a five second timeout.\n",
    "2026-12-01.md": "# 2026-12-01\n\n## Session 09:00\n\n### 09:00\n"
    "- 订单导出失败是因为导出任务超时，已经改为分批导出，每批五千行。\n",
    "pdf.md": "# Invoices\n\nThe PDF renderer is WeasyPrint; we pinned version 61: 62 broke page breaks.\n",
    "deploy.md": "# Deploys\n\nProduction deploys run from the release branch every Tuesday after the "
    "smoke tests pass.\n",
    "团队.md": "# 值班\n\n每周一早会之后轮换值班，值班同学负责处理告警和回复工单。\n",
}
NONSENSE = ("zzzqqq", "qwfpgj zxcvb plokm", "啊呜咕噜叽里呱啦", "嘿哈嘿哈呜啦啦")
ANSWERS = {
    "why did checkout time out?": "2026-11-30.md",
    "which PDF renderer version did we pin?": "pdf.md",
    "订单导出为什么失败？": "2026-12-01.md",
    "值班是怎么轮换的？": "团队.md",
}


@pytest.fixture
def uri(isolated_env: Path) -> str:
    notes = isolated_env / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    uri = str(isolated_env / "rel.db")
    proc = memsearch("index", str(notes), "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    return uri


async def test_nonsense_is_under_the_floor_and_a_real_answer_over_it(uri: str) -> None:
    with MemSearch(milvus_uri=uri) as ms:
        for query in NONSENSE:
            hits = await ms.search(query, top_k=3)
            assert hits and all(0.0 <= h["relevance"] < FLOOR for h in hits), (query, hits[0]["relevance"])
            assert await ms.search(query, top_k=3, min_relevance=FLOOR) == []
        for query, source in ANSWERS.items():
            best = (await ms.search(query, top_k=3))[0]
            assert Path(best["source"]).name == source
            assert FLOOR <= best["relevance"] <= 1.0, (query, best["relevance"])
            kept = await ms.search(query, top_k=3, min_relevance=FLOOR)
            assert kept and kept[0]["chunk_hash"] == best["chunk_hash"]
            assert all(h["relevance"] >= FLOOR for h in kept)


def test_the_cli_shows_relevance_and_says_when_nothing_is_strong(uri: str) -> None:
    plain = memsearch("search", "why did checkout time out?", "-k", "2", "--milvus-uri", uri)
    assert plain.returncode == 0, plain.stderr
    shown = re.findall(r"--- Result \d \(score: (\d\.\d{4}), relevance: (\d\.\d\d)\) ---", plain.stdout)
    assert len(shown) == 2 and float(shown[0][1]) >= FLOOR

    hits = json.loads(memsearch("search", "zzzqqq", "-j", "--milvus-uri", uri).stdout)
    assert hits and all(set(h) == {*ORIGINAL_KEYS, "relevance"} for h in hits)  # a person sees every hit

    for args in (("--min-relevance", "floor"), ("--min-relevance", str(FLOOR))):
        weak = memsearch("search", "zzzqqq", *args, "--milvus-uri", uri)
        assert weak.returncode == 0, weak.stderr
        (line,) = weak.stdout.splitlines()
        assert line.startswith("No strong match in memory: the best hit has relevance 0.")
        assert f"under the floor of {FLOOR:.2f}" in line and "holds nothing on this" in line
        as_json = memsearch("search", "zzzqqq", *args, "-j", "--milvus-uri", uri)
        assert json.loads(as_json.stdout) == [] and "No strong match in memory" in as_json.stderr

    strong = memsearch(
        "search", "订单导出为什么失败？", "--min-relevance", "floor", "-j", "--milvus-uri", uri
    )
    kept = json.loads(strong.stdout)
    assert kept and all(h["relevance"] >= FLOOR for h in kept)
    # an agent's shell (Claude Code sets CLAUDECODE=1): the floor applies without the flag
    agent = memsearch("search", "zzzqqq", "-j", "--milvus-uri", uri, env={"CLAUDECODE": "1"})
    assert json.loads(agent.stdout) == [] and "No strong match in memory" in agent.stderr

    bad = memsearch("search", "zzzqqq", "--min-relevance", "1.5", "--milvus-uri", uri)
    assert bad.returncode == 2 and "not a relevance from 0 to 1, nor 'floor'" in bad.stderr


ORIGINAL_KEYS = {
    "content",
    "source",
    "heading",
    "chunk_hash",
    "heading_level",
    "start_line",
    "end_line",
    "score",
}


async def test_mcp_search_returns_only_strong_hits_and_says_when_there_is_none(
    uri: str, isolated_env: Path
) -> None:
    async with session(isolated_env, "--milvus-uri", uri, "--collection", "memsearch_chunks") as client:
        for query in NONSENSE:
            error, text = await call(client, "search", {"query": query})
            assert not error, text
            assert text.startswith("No strong match in memory: the best hit has relevance 0."), text
            assert "answer without memory" in text and "chunk_hash" not in text
        error, text = await call(client, "search", {"query": "which PDF renderer version did we pin?"})
        assert not error and "pdf.md" in text, text
        shown = [float(x) for x in re.findall(r"\| relevance (\d\.\d\d) \|", text)]
        assert shown and all(r >= FLOOR for r in shown)


def test_the_word_match_counts_words_that_carry_the_topic() -> None:
    """Function words count nothing; a stem finds its other forms; a Chinese word is weighed by
    how rare jieba's dictionary says it is; an identifier is found inside a longer one."""
    terms = QueryTerms.of("How do we configure the packages?")
    assert [t for t, _ in terms.terms] == ["configure", "packages"]
    assert lexical_match(terms, "Configuration of a package.") == 1.0
    assert lexical_match(terms, "We do it how they do.") == 0.0
    assert lexical_match(QueryTerms.of("the of and"), "the of and") == 0.0  # nothing to match
    zh = QueryTerms.of("我们怎么处理订单导出失败")
    weights = dict(zh.terms)
    assert "我们" not in weights and "怎么" not in weights
    assert weights["导出"] > 0 and lexical_match(zh, "订单导出失败怎么处理") == 1.0
    assert lexical_match(QueryTerms.of("pdf 1042"), "error err_pdf_1042 again") == 1.0
    assert relevance(terms, "anything", None) < relevance(terms, "package configuration", 0.6)
    assert 0.0 <= relevance(zh, "", 0.99) <= 1.0
