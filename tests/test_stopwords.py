"""The BM25 leg's query text: Chinese function words and punctuation out, everything else as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsearch import MemSearch
from memsearch.store.stopwords import STOP_WORDS, bm25_query


def test_a_chinese_question_keeps_what_it_asks_about() -> None:
    assert bm25_query("上周我们怎么处理的导出失败？") == "上周 处理 导出 失败"
    assert bm25_query("十月关于告警我们做了什么决定？") == "十月 告警 做 决定"
    # Words that hold a stop word inside them are whole words to jieba and stay.
    assert bm25_query("这个目的是什么") == "目的"


def test_text_without_han_is_left_alone() -> None:
    for text in ("what did we decide about the retry policy?", "ERR_PAY_4012", "", "  "):
        assert bm25_query(text) == text


def test_a_question_of_stop_words_only_is_searched_as_it_is() -> None:
    assert bm25_query("我们的是什么？") == "我们的是什么？"


def test_mixed_text_keeps_its_english_words() -> None:
    assert bm25_query("如何配置 PostgreSQL 的连接池") == "配置 PostgreSQL 连接池"
    assert {"的", "了", "我们", "什么", "怎么"} <= STOP_WORDS


@pytest.mark.model
async def test_chinese_chatter_no_longer_outranks_the_turn_a_question_names(tmp_path: Path) -> None:
    """Journals full of chatter that shares a question's function words (我们, 怎么, 的, ？): the
    turn about what the question names comes first (before: a chatter line that holds 我们怎么
    and 处理 ranked first)."""
    memory = tmp_path / "memory"
    memory.mkdir()
    turns = {
        "2026-01-05": "导出失败：我们决定改为分批导出，每批一千行，超时从三十秒调到两分钟。",
        "2026-01-10": "我们聊了一下周末去哪里玩的事情，大家的意见不太一样。",
        "2026-01-11": "今天的午饭是什么？我们都觉得食堂的菜有点咸了。",
        "2026-01-12": "他说下午的会议改到明天了，我们怎么安排都可以。",
        "2026-01-13": "我们讨论了新同事的座位，最后决定坐在窗边。",
        "2026-01-14": "大家都在问怎么报销打车费，流程是什么样的。",
        "2026-01-15": "我们怎么处理快递的问题？前台说可以代收。",
    }
    for day, line in turns.items():
        text = f"# {day}\n\n## Session 10:00\n\n### 10:05\n<!-- session:s{day} turn:t1 -->\n- {line}\n"
        (memory / f"{day}.md").write_text(text, encoding="utf-8")
    ms = MemSearch([str(memory)], milvus_uri=str(tmp_path / "m.db"))
    try:
        await ms.index()
        hits = await ms.search("我们怎么处理的导出失败？", top_k=3)
    finally:
        await ms.aclose()
    assert Path(str(hits[0]["source"])).name == "2026-01-05.md", [h["source"] for h in hits]
