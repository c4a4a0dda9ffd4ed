"""The BM25 leg's query text: Chinese function words and punctuation out, everything else as it was."""

from __future__ import annotations

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
