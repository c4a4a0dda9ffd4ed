"""Fusion of the two legs: rare exact words of the query come first (``memsearch.store.fusion``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memsearch import MemSearch
from memsearch.store.fusion import exact_words, fuse


def _hit(key: str, content: str, distance: float = 0.5) -> dict[str, Any]:
    return {"id": key, "distance": distance, "entity": {"chunk_hash": key, "content": content, "source": key}}


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("zq31337x", ["zq31337x"]),
        ("what was ERR_PAY_4012 about?", ["ERR_PAY_4012"]),
        ("TM-1234 and OPS-88123 again", ["TM-1234", "OPS-88123"]),
        ("retryBudgetMs in db-replica-07.eu2", ["retryBudgetMs", "db-replica-07.eu2"]),
        ("commit 9f3c2a7b1e broke it; error 50213", ["9f3c2a7b1e", "50213"]),
        ("how do we retry the database connection", []),  # plain words: untouched
        ("v2 of the api", []),  # too short to name one thing
        ("订单导出失败 2024", ["2024"]),
    ],
)
def test_exact_words_are_identifiers_codes_tickets_and_hashes(query: str, words: list[str]) -> None:
    assert exact_words(query) == words


DENSE = [_hit(f"d{i}", f"notes about the deploy pipeline, day {i}") for i in range(10)]


def test_a_rare_word_puts_the_bm25_hit_that_holds_it_first() -> None:
    """BM25's first hit, absent from the dense list, scored below the dense leg's top ~30 under the
    1.5 tilt: it fell out of the top 5. Holding the query's rare word, it now comes first."""
    sparse = [
        _hit("t", "the failing job id was zq31337x"),
        *(_hit(f"s{i}", "deploy pipeline") for i in range(4)),
    ]
    legs = {"dense": DENSE, "sparse": sparse}
    before = [r["chunk_hash"] for r in fuse(legs, (1.5, 1.0), 5)]
    assert "t" not in before  # the failure this fixes
    fused = fuse(legs, (1.5, 1.0), 5, "zq31337x")
    assert fused[0]["chunk_hash"] == "t"
    assert fused[0]["score"] >= fused[1]["score"]  # scores still fall down the list
    assert fuse(legs, None, 5, "zq31337x") == fuse(legs, None, 5)  # the original's plain RRF: as it was


def test_a_word_most_bm25_hits_hold_is_left_to_the_fusion() -> None:
    sparse = [_hit(f"s{i}", f"set the locale to utf-8, step {i}") for i in range(5)]
    legs = {"dense": DENSE, "sparse": sparse}
    assert fuse(legs, (1.5, 1.0), 5, "utf-8 locale") == fuse(legs, (1.5, 1.0), 5)


def test_the_word_must_be_whole_not_part_of_a_longer_one() -> None:
    sparse = [_hit("t", "job zq31337x2 failed"), *(_hit(f"s{i}", "deploy") for i in range(4))]
    legs = {"dense": DENSE, "sparse": sparse}
    assert fuse(legs, (1.5, 1.0), 5, "zq31337x") == fuse(legs, (1.5, 1.0), 5)


async def test_search_finds_the_one_note_with_the_token(isolated_env: Path) -> None:
    """Through ``MemSearch`` on a real Milvus Lite store (hash embeddings): the words around the
    token pull the dense leg to notes that share them; the note with the token comes first."""
    notes = isolated_env / "notes"
    notes.mkdir()
    for i in range(40):
        (notes / f"n{i:02d}.md").write_text(
            f"# Day {i}\n\nWhat did we find about the deploy pipeline? We found the cache warm-up slow.\n"
        )
    (notes / "job.md").write_text("# Job\n\nThe nightly export job zq31337x died at 02:00.\n")
    with MemSearch([str(notes)], milvus_uri=str(isolated_env / "m.db"), embedding_provider="hash") as ms:
        await ms.index()
        hits = await ms.search("what did we find about zq31337x", top_k=3)
    assert Path(hits[0]["source"]).name == "job.md"


async def test_an_identifier_the_analyzer_splits_into_common_parts_is_found(isolated_env: Path) -> None:
    """``TM-2026`` is ``tm`` and ``2026`` to BM25, and every note holds a ``TM-`` ticket and the year,
    so BM25's hits need not hold the whole identifier; the store's literal match finds the one note
    that does, and the exact-word slot puts it first."""
    notes = isolated_env / "notes"
    notes.mkdir()
    for i in range(40):
        (notes / f"n{i:02d}.md").write_text(
            f"# 2026-03-{i % 28 + 1:02d}\n\nWhat did we find about TM-{3000 + i}? In 2026 the TM-{4000 + i} "
            "follow-up (TM 2026 plan) is still open.\n"
        )
    (notes / "job.md").write_text("# Job\n\nThe export retry bug is tracked in TM-2026 now.\n")
    with MemSearch([str(notes)], milvus_uri=str(isolated_env / "m.db"), embedding_provider="hash") as ms:
        await ms.index()
        store = ms.store
        assert not any(
            "TM-2026" in h["entity"]["content"] for h in store.search_leg("sparse", "TM-2026", top_k=5)
        )
        hits = await ms.search("what did we find about TM-2026", top_k=5)
    assert Path(hits[0]["source"]).name == "job.md"


# --- weights by script (memsearch.store.weights) -------------------------------------------------


def test_each_leg_votes_where_it_reads_the_text() -> None:
    """A Chinese question: BM25 leads, the English model does not vote, and the multilingual leg
    votes for chunks in the other script only; an English question: the dense leg leads and the
    multilingual leg votes for Chinese chunks only."""
    from memsearch.store.weights import hybrid_weights, text_script

    zh_note = _hit("zh", "订单导出失败的原因是文件编码错误，改成了 UTF-8 编码")
    en_note = _hit("en", "the order export failed: the file encoding was wrong, now UTF-8")
    other = _hit("x", "用于在显示器上阅读被压缩的文本文件的过滤器")
    assert text_script(en_note["entity"]["content"]) == "other"
    assert text_script(zh_note["entity"]["content"]) == "cjk"
    assert (
        text_script("grep 的 --include 和 --exclude 选项有什么区别") == "cjk"
    )  # a Chinese note quoting flags
    legs = {"dense": [en_note], "sparse": [zh_note], "multilingual": [en_note, zh_note, other]}

    chinese = fuse(legs, hybrid_weights("订单导出为什么失败？"))
    # zh: BM25's first (1.5/61; the multilingual vote is same-script: 0); en: the multilingual
    # leg's first (1.5/61; the English model's vote: 0); x: a same-script multilingual vote only.
    assert [r["chunk_hash"] for r in chinese] == ["zh", "en", "x"]
    assert [r["score"] for r in chinese] == pytest.approx([0.5, 0.5, 0.0])

    english = fuse(legs, hybrid_weights("why did the order export fail?"))
    # en: the dense leg's first (1.5/61); zh: BM25's first (1/61) and the multilingual leg's second
    # (1.5/62): the two languages agreeing put the Chinese note first.
    assert [r["chunk_hash"] for r in english] == ["zh", "en", "x"]
    assert english[0]["score"] == pytest.approx((1 / 61 + 1.5 / 62) / (4 / 61))
    # Without the third leg the same weights rank as the two legs always did.
    two = {"dense": legs["dense"], "sparse": legs["sparse"]}
    assert [r["chunk_hash"] for r in fuse(two, hybrid_weights("why did the order export fail?"))] == [
        "en",
        "zh",
    ]
