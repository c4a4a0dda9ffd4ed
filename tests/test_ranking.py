"""Rank once, cut late (``memsearch.store.fusion``, ``MilvusStore.ranked``): the legs fetch a depth
that does not depend on ``top_k``, so the first hits are the same at every ``top_k``; ties break by
chunk hash; a window of days of any size is searched exactly, in parts merged by score.

The stores here are real Milvus Lite databases indexed with the hash embedder (instant, lexical):
the ranking is the store's and the fusion's, whatever model made the vectors. The property over
evaluation-style data with the real model, through every face, is ``test_ranking_faces.py``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from memsearch import MemSearch
from memsearch.engine.time_search import MAX_IN_FILTER
from memsearch.store import MilvusStore, hybrid_weights
from memsearch.store.fusion import VOTING_RANKS, fuse, leg_order, merge_legs

TODAY = dt.date(2026, 12, 1)


def _hit(key: str, distance: float, content: str = "") -> dict[str, Any]:
    return {"id": key, "distance": distance, "entity": {"chunk_hash": key, "content": content, "source": key}}


def test_equal_scores_are_ordered_by_chunk_hash_whatever_order_the_store_gave() -> None:
    hits = [_hit("c", 0.5), _hit("a", 0.5), _hit("b", 0.9), _hit("d", 0.5)]
    assert [h["id"] for h in leg_order(hits, "dense")] == ["b", "a", "c", "d"]
    assert [h["id"] for h in leg_order(list(reversed(hits)), "dense")] == ["b", "a", "c", "d"]
    # BM25 distances are negated on Lite: the score is the magnitude
    bm25 = [_hit("y", -2.0), _hit("x", -2.0), _hit("z", -7.0)]
    assert [h["id"] for h in leg_order(bm25, "sparse")] == ["z", "x", "y"]
    parts = [[_hit("c", 0.5), _hit("b", 0.9)], [_hit("a", 0.5), _hit("b", 0.9)]]
    assert [h["id"] for h in merge_legs(parts, "dense", 2)] == ["b", "a"]


def test_deep_candidates_do_not_outvote_the_top_of_a_leg() -> None:
    """With RRF's k of 60, a chunk ranked 40th by both legs sums more than the first hit of one leg
    alone; only the first ranks vote, so the leg's first hit keeps its place at any depth."""
    dense = [_hit(f"d{i}", 1 - i / 100) for i in range(39)] + [_hit("both", 0.5)]
    sparse = [_hit("top", -9.0)] + [_hit(f"s{i}", -8 + i / 100) for i in range(38)] + [_hit("both", -1.0)]
    fused = fuse({"dense": dense, "sparse": sparse}, (1.0, 1.5))  # a Chinese query: BM25 leads
    keys = [h["chunk_hash"] for h in fused]
    assert keys[0] == "top"
    assert keys.index("both") > 2 * VOTING_RANKS - 1  # no voting rank: after every voted hit
    assert fused[keys.index("both")]["score"] == 0.0
    shallow = fuse({"dense": dense[:VOTING_RANKS], "sparse": sparse[:VOTING_RANKS]}, (1.0, 1.5))
    assert fused[: len(shallow)] == shallow  # the votes rank as the fusion of the voting ranks alone
    # the original's plain RRF (no weights) keeps every rank's vote, as the original computes it
    assert fuse({"dense": dense, "sparse": sparse}, None)[0]["chunk_hash"] == "both"


def _notes(folder: Path, count: int) -> None:
    folder.mkdir()
    topics = ["deploy pipeline", "billing export", "cache warm up", "login timeout", "订单导出", "测试环境"]
    for i in range(count):
        topic = topics[i % len(topics)]
        (folder / f"n{i:03d}.md").write_text(
            f"# Note {i}\n\nWe looked at the {topic} again, pass {i % 7}: {topic} {i % 5} {topic}.\n",
            encoding="utf-8",
        )


QUERIES = [
    "deploy pipeline",
    "why is the billing export slow",
    "cache warm up after login",
    "login timeout pass 3",
    "订单导出失败",
    "测试环境 重置",
    "zzzqqq",
]


async def test_the_first_hits_are_the_same_at_every_top_k(isolated_env: Path) -> None:
    """The issue's case: with each leg fetching ``top_k``, ``-k 1`` and ``-k 5`` put different hits
    first. Now every list is the start of the longest one, ties included."""
    notes = isolated_env / "notes"
    _notes(notes, 120)
    with MemSearch([str(notes)], milvus_uri=str(isolated_env / "m.db"), embedding_provider="hash") as ms:
        await ms.index()
        for query in QUERIES:
            longest = await ms.search(query, top_k=30)
            assert len(longest) == 30
            keys = [h["chunk_hash"] for h in longest]
            for k in (1, 2, 3, 5, 10, 20):
                got = await ms.search(query, top_k=k)
                assert [h["chunk_hash"] for h in got] == keys[:k], (query, k)
                assert [h["score"] for h in got] == [h["score"] for h in longest[:k]]
            scores = [h["score"] for h in longest]
            assert scores == sorted(scores, reverse=True)


def test_filtered_parts_merge_into_the_ranking_of_one_filter(tmp_path: Path) -> None:
    """The legs of a window searched in parts (one ``source in [...]`` per part) merge into what one
    filter over all of them gives: BM25 and cosine scores do not depend on the filter."""
    import asyncio

    notes = tmp_path / "notes"
    _notes(notes, 90)
    uri = str(tmp_path / "parts.db")
    with MemSearch([str(notes)], milvus_uri=uri, embedding_provider="hash") as ms:
        asyncio.run(ms.index())
        vectors = asyncio.run(ms.embedder.embed_query(QUERIES))
    sources = sorted(str(p) for p in notes.glob("*.md"))[:70]

    def where(part: list[str]) -> str:
        return "source in [" + ", ".join(f'"{s}"' for s in part) + "]"

    with MilvusStore(uri, dimension=None) as store:
        for query, vector in zip(QUERIES, vectors, strict=True):
            one = store.ranked(vector, query_text=query, depth=25, filters=(where(sources),), weights=None)
            parts = [where(sources[i : i + 9]) for i in range(0, len(sources), 9)]
            split = store.ranked(vector, query_text=query, depth=25, filters=parts, weights=None)
            assert split.hits == one.hits, query
            assert split.similarity == one.similarity
            weights = hybrid_weights(query)
            whole = store.ranked(
                vector, query_text=query, depth=25, filters=(where(sources),), weights=weights
            )
            assert store.ranked(vector, query_text=query, depth=25, filters=parts, weights=weights).hits == (
                whole.hits
            )


def _journals(folder: Path, count: int, needle_back: int, old_after: int) -> None:
    """``count`` daily journals up to TODAY: the one ``needle_back`` days back holds the entry to find;
    those older than ``old_after`` days are all about the same subject, in more words."""
    folder.mkdir()
    for back in range(count):
        day = TODAY - dt.timedelta(days=back)
        if back == needle_back:
            bullet = "The nightly export job moved to the reporting replica."
        elif back >= old_after:
            bullet = "The nightly export job failed again; the nightly export job needs a nightly export fix."
        else:
            bullet = f"Reviewed pull request {back} about the billing page layout."
        (folder / f"{day.isoformat()}.md").write_text(
            f"# {day}\n\n## Session 10:00\n\n### 10:00\n- {bullet}\n", encoding="utf-8"
        )


async def test_a_window_of_more_than_a_thousand_files_keeps_its_hits(isolated_env: Path) -> None:
    """Issue 38: widening ``since`` from 991 to 1,010 journals in the window turned a found entry
    into no hits (the window was applied after a search of the whole store, whose best hundred
    were all older). The window is now searched in parts of at most 1,000 files."""
    memory = isolated_env / "memory"
    _journals(memory, 1210, needle_back=5, old_after=1010)
    with MemSearch([str(memory)], milvus_uri=str(isolated_env / "w.db"), embedding_provider="hash") as ms:
        await ms.index()
        found = {}
        for files in (991, 1000, 1001, 1010):
            since = TODAY - dt.timedelta(days=files - 1)
            hits = await ms.search("nightly export job", top_k=5, since=since, today=TODAY)
            assert hits, f"{files} files in the window (parts of {MAX_IN_FILTER}): no hits"
            found[files] = [h["chunk_hash"] for h in hits]
            assert all(h["in_window"] for h in hits)
        assert found[991] == found[1000] == found[1001] == found[1010]
        needle = f"{(TODAY - dt.timedelta(days=5)).isoformat()}.md"
        assert Path(ms.get_chunk(found[1010][0])["source"]).name == needle
        # a file indexed since: the window's filters are evaluated again on the new rows
        newer = memory / f"{(TODAY - dt.timedelta(days=3)).isoformat()}.md"
        newer.write_text(
            "### 09:00\n- The nightly export job nightly export job: moved back.\n", encoding="utf-8"
        )
        await ms.index()
        since = TODAY - dt.timedelta(days=1009)
        again = await ms.search("nightly export job", top_k=5, since=since, today=TODAY)
        assert newer.name in {Path(h["source"]).name for h in again}
        # every indexed file in the window: no filter at all, the same hits as no window
        since = TODAY - dt.timedelta(days=5000)
        everything = await ms.search("nightly export job", top_k=5, since=since, today=TODAY)
        plain = await ms.search("nightly export job", top_k=5)
        assert [h["chunk_hash"] for h in everything] == [h["chunk_hash"] for h in plain]


def test_search_candidates_is_checked_where_it_enters() -> None:
    from memsearch.errors import InvalidArgumentError

    for bad in (0, 1001, True, 2.5):
        with pytest.raises(InvalidArgumentError, match="search_candidates"):
            MemSearch(search_candidates=bad)  # type: ignore[arg-type]
