"""The same first hits at every ``-k``, through every face of one store (issue 36): ``MemSearch`` in a
program, the memory service (``Memory`` routed to ``memsearch serve``), the CLI and MCP ``search``.

The store holds evaluation-style memory made here (nothing installed): the ``dated-journals`` set
(100 days of a team's journals, English and Chinese, ``evaluation/dated.py``) and the bench corpus's
journals (``evaluation/gen_corpus.py``), indexed with the real ONNX model. The questions are the
dated set's, the bench corpus's and the written unanswerable ones (``evaluation/unanswerable.py``):
264, in English and Chinese. For each, the hits at ``top_k`` 1, 3, 5, 10 and 20 are the first hits
of the list at 20, with the same scores and relevance.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from evaluation import gen_corpus
from evaluation.dated import build_dated
from evaluation.unanswerable import EVERYDAY_EN, EVERYDAY_ZH, NEAR_EN, NEAR_ZH

from cli_process import memsearch
from memsearch import MemSearch
from memsearch.config.schema import DEFAULT_MIN_RELEVANCE
from memsearch.engine.interface import Memory
from test_mcp import call, session
from test_service import start_service

pytestmark = pytest.mark.model

KS = (1, 3, 5, 10, 20)


def _corpus(root: Path) -> list[str]:
    """The memory folders, and the questions (the dated set's, the bench corpus's, unanswerable)."""
    built = build_dated(dt.date.today())[0]
    for rel, text in built.files.items():
        path = root / "dated" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    gen_corpus.generate(root / "gen", files=20, chunks=120)
    queries = [q.query for q in built.queries] + gen_corpus.QUERIES
    return [*queries, *EVERYDAY_EN, *NEAR_EN, *EVERYDAY_ZH, *NEAR_ZH]


def _view(hits: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    return [(h["chunk_hash"], round(h["score"], 9), h["relevance"]) for h in hits]


async def test_first_hits_are_the_same_at_every_k_through_every_face(isolated_env: Path) -> None:
    root = isolated_env / "mem"
    queries = _corpus(root)
    assert len(queries) >= 200 and any(re.search(r"[\u4e00-\u9fff]", q) for q in queries)
    uri = str(isolated_env / "faces.db")
    indexed = memsearch(
        "index", str(root / "dated" / "memory"), str(root / "gen" / "memory"), "--milvus-uri", uri
    )
    assert indexed.returncode == 0, indexed.stderr

    # MemSearch in this program, which owns the store: every question at every k
    lists: dict[str, list[dict[str, Any]]] = {}
    with MemSearch(milvus_uri=uri) as ms:
        for query in queries:
            longest = await ms.search(query, top_k=max(KS))
            lists[query] = longest
            for k in KS[:-1]:
                assert _view(await ms.search(query, top_k=k)) == _view(longest[:k]), (query, k)

    full = sum(len(hits) == max(KS) for hits in lists.values())
    assert full > 0.7 * len(queries)  # a question with a time phrase searches its days alone
    service = start_service(uri)
    try:
        # the memory service: every question at 20, and at one of the other ks in turn
        with Memory(MemSearch(milvus_uri=uri)) as routed:
            for i, query in enumerate(queries):
                assert _view(routed.search(query, top_k=max(KS))) == _view(lists[query]), query
                k = KS[i % (len(KS) - 1)]
                assert _view(routed.search(query, top_k=k)) == _view(lists[query][:k]), (query, k)

        # the CLI (every hit: --min-relevance 0, whoever reads it; the JSON adds relevance)
        for query in queries[::66]:
            for k in KS:
                args = ("search", query, "-k", str(k), "--json-output", "--min-relevance", "0")
                proc = memsearch(*args, "--milvus-uri", uri)
                assert proc.returncode == 0, proc.stderr
                assert _view(json.loads(proc.stdout)) == _view(lists[query][:k]), (query, k)

        # MCP search: the strong hits only, the start of the same list
        async with session(isolated_env, "--milvus-uri", uri, "--collection", "memsearch_chunks") as client:
            for query in queries[::33]:
                strong = [h["chunk_hash"] for h in lists[query] if h["relevance"] >= DEFAULT_MIN_RELEVANCE]
                for k in KS:
                    error, text = await call(client, "search", {"query": query, "top_k": k})
                    assert not error, text
                    shown = re.findall(r"chunk_hash ([0-9a-f]{16})", text)
                    first = {x["chunk_hash"] for x in lists[query][:k]}
                    expected = [h for h in strong if h in first]
                    if not expected:
                        assert "No strong match in memory" in text and not shown, (query, k, text)
                    elif "left out by the result budget" in text:
                        assert shown and shown == expected[: len(shown)], (query, k)
                    else:
                        assert shown == expected, (query, k)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)
