"""The evaluation harness: metrics computed by hand, the hit rule, the dataset builders on small
synthetic inputs shaped like the Debian files, the chunking variants, and one end-to-end run on a
tiny corpus (hash embedder, real Milvus Lite) that must store what ``MemSearch.index`` stores.
None of this needs the Debian packages or the real model.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root holds evaluation/

from evaluation import builders
from evaluation.dataset import DatasetError, Gold, Query, load_dataset, parse_query, write_queries
from evaluation.metrics import Hit, compare, overlaps, query_scores, sign_test, summarize
from evaluation.runner import Harness, IndexConfig, RunConfig, breadcrumb_trails, corpus_chunks, merge_tiny

from memsearch import MemSearch
from memsearch.chunker import Chunk, chunk_markdown, split_lines
from memsearch.errors import ConfigValueError
from memsearch.store import HYBRID_TILT, MilvusStore, hybrid_weights

# --- metrics -------------------------------------------------------------------------------------


def test_overlap_rule_needs_same_path_and_a_shared_line() -> None:
    gold = Gold("a.md", 10, 20)
    assert overlaps(Hit("a.md", 20, 25), gold)  # shares line 20
    assert overlaps(Hit("a.md", 1, 10), gold)  # shares line 10
    assert overlaps(Hit("a.md", 12, 14), gold)  # inside
    assert overlaps(Hit("a.md", 1, 99), gold)  # around
    assert not overlaps(Hit("a.md", 21, 30), gold)
    assert not overlaps(Hit("a.md", 1, 9), gold)
    assert not overlaps(Hit("b.md", 10, 20), gold)


def test_scores_of_one_query_by_hand() -> None:
    gold = [Gold("a.md", 10, 20), Gold("b.md", 1, 5)]
    hits = [
        Hit("c.md", 1, 100),  # 1: miss
        Hit("a.md", 15, 30),  # 2: answers gold 1
        Hit("a.md", 12, 14),  # 3: gold 1 again: no new credit
        Hit("b.md", 6, 9),  # 4: next to gold 2, no shared line
        Hit("b.md", 5, 9),  # 5: answers gold 2
    ]
    s = query_scores(hits, gold)
    assert s["recall@1"] == 0.0
    assert s["recall@5"] == 1.0 and s["recall@10"] == 1.0
    assert s["mrr"] == 0.5
    dcg = 1 / math.log2(3) + 1 / math.log2(6)
    idcg = 1 + 1 / math.log2(3)
    assert s["ndcg@10"] == pytest.approx(dcg / idcg)
    assert s["ndcg@10"] == pytest.approx(0.6241, abs=1e-4)


def test_partial_recall_and_depth_cut() -> None:
    gold = [Gold("a.md", 1, 1), Gold("b.md", 1, 1), Gold("c.md", 1, 1), Gold("d.md", 1, 1)]
    hits = [Hit("x.md", 1, 1)] * 5 + [Hit("a.md", 1, 1)] + [Hit("x.md", 1, 1)] * 4 + [Hit("b.md", 1, 1)]
    s = query_scores(hits, gold)  # b.md is at rank 11: beyond the depth of 10
    assert (s["recall@1"], s["recall@5"], s["recall@10"]) == (0.0, 0.0, 0.25)
    assert s["mrr"] == pytest.approx(1 / 6)
    idcg = sum(1 / math.log2(i + 1) for i in range(1, 5))
    assert s["ndcg@10"] == pytest.approx((1 / math.log2(7)) / idcg)
    assert query_scores([], gold) == {"recall@1": 0, "recall@5": 0, "recall@10": 0, "mrr": 0, "ndcg@10": 0}


def test_summary_per_category_and_paired_comparison() -> None:
    queries = [
        Query("q1", "a", "how", (Gold("a.md", 1, 1),)),
        Query("q2", "b", "how", (Gold("b.md", 1, 1),)),
        Query("q3", "c", "why", (Gold("c.md", 1, 1),)),
    ]
    run_a = {
        "q1": query_scores([Hit("a.md", 1, 1)], queries[0].gold),  # rank 1
        "q2": query_scores([Hit("x.md", 1, 1), Hit("b.md", 1, 1)], queries[1].gold),  # rank 2
        "q3": query_scores([], queries[2].gold),  # missed
    }
    run_b = {
        "q1": query_scores([Hit("x.md", 1, 1), Hit("a.md", 1, 1)], queries[0].gold),  # rank 2
        "q2": query_scores([Hit("x.md", 1, 1), Hit("b.md", 1, 1)], queries[1].gold),  # rank 2
        "q3": query_scores([Hit("c.md", 1, 1)], queries[2].gold),  # rank 1
    }
    summary = summarize(queries, run_a)
    assert summary["all"]["mrr"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert summary["how"]["mrr"] == pytest.approx(0.75) and summary["how"]["n"] == 2
    assert summary["why"]["recall@1"] == 0.0 and summary["why"]["n"] == 1
    c = compare(run_a, run_b, "mrr")
    assert (c.wins, c.losses, c.ties) == (1, 1, 1)
    assert c.delta == pytest.approx((1.5 - 2.0) / 3)
    assert c.p_value == 1.0


def test_sign_test_values() -> None:
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 0) == pytest.approx(2 / 32)
    assert sign_test(9, 1) == pytest.approx(2 * 11 / 1024)
    assert sign_test(3, 3) == 1.0


# --- dataset files -------------------------------------------------------------------------------


def test_queries_round_trip_and_errors(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    q = Query("x1", "数据库超时", "zh", (Gold("sub/a.md", 3, 9),))
    write_queries(tmp_path / "queries.jsonl", [q])
    assert "数据库超时" in (tmp_path / "queries.jsonl").read_text(encoding="utf-8")
    assert load_dataset(tmp_path, "t").queries == (q,)
    bad = {
        '{"qid": 1, "query": "q"}': "missing 'gold'",
        '{"qid": 1, "query": "q", "gold": []}': "non-empty list",
        '{"qid": 1, "query": "q", "gold": [{"path": "a", "start_line": 5, "end_line": 2}]}': "bad line span",
        '{"qid": 1, "query": "q", "gold": [{"path": "a", "start_line": 1}]}': "lacks 'end_line'",
        "not json": "not JSON",
    }
    for line, message in bad.items():
        with pytest.raises(DatasetError, match=message):
            parse_query(line, "f:1")
    (tmp_path / "queries.jsonl").write_text(json.dumps(q.to_dict()) + "\n" + json.dumps(q.to_dict()) + "\n")
    with pytest.raises(DatasetError, match="duplicate qid"):
        load_dataset(tmp_path)


# --- builders on synthetic inputs ----------------------------------------------------------------

NBSP = "\u00a0"
FAQ_TEXT = f"""
                      The Debian GNU/Linux FAQ

Table of Contents

1. Definitions and overview
    1.1. What is this FAQ?
    1.2. How does one pronounce
    Debian?

Chapter{NBSP}1.{NBSP}Definitions and overview

1.1.{NBSP}What is this FAQ?

    This document gives frequently asked questions with their answers
    about the Debian distribution and about the project.

      * a bullet that stays indented

1.2. How does one pronounce Debian and what
does this word mean?

    It is pronounced Deb'-ee-en. The name comes from the names of its
    creator and his wife.

Chapter 2. Getting Debian

2.1. Authors

    Written by many people over many years of Debian releases.

2.2. Is it short?

    Yes.
"""


def _lines(built: builders.BuiltSet, path: str) -> list[str]:
    return built.files[path].splitlines()


def test_debian_faq_questions_become_queries_and_leave_the_corpus() -> None:
    built = builders.build_debian_faq(FAQ_TEXT)
    assert sorted(built.files) == ["ch01.md", "ch02.md"]
    assert [q.query for q in built.queries] == [
        "What is this FAQ?",
        "How does one pronounce Debian and what does this word mean?",
    ]  # 2.1 is not a question; 2.2's answer is too short to retrieve
    assert [q.category for q in built.queries] == ["what", "how"]
    ch01 = _lines(built, "ch01.md")
    text = "\n".join(ch01)
    assert "What is this FAQ" not in text and "pronounce Debian" not in text
    for q in built.queries:
        (gold,) = q.gold
        assert ch01[gold.start_line - 1] == f"## {q.qid.removeprefix('faq-')}."
        assert ch01[gold.end_line - 1].strip()  # ends on the answer's last line
    first, second = (q.gold[0] for q in built.queries)
    assert ch01[first.end_line - 1] == "  * a bullet that stays indented"
    assert ch01[second.end_line - 1] == "creator and his wife."
    assert "## 2.1. Authors" in _lines(built, "ch02.md")


GITFAQ_TEXT = """gitfaq(7)
=========

NAME
----
gitfaq - Frequently asked questions about using Git

Configuration
-------------

[[user-name]]
What should I put in `user.name`?::
\tYou should put your personal name, generally a form using a given name
\tand family name.
+
See linkgit:git-config[1] for details.

[[editor]]
How do I configure a different editor?::
\tSet the `core.editor` value.
+
----
git config core.editor nano
----

Hooks
-----

[[restrict]]
How do I use hooks to prevent users from making certain changes?::
\tThe only safe place to make these changes is on the remote repository.
"""


def test_gitfaq_questions_are_replaced_by_neutral_headings() -> None:
    built = builders.build_gitfaq(
        GITFAQ_TEXT, {"gitcli.txt": "gitcli(7)\n=========\n\nUse `--` to separate paths.\n"}
    )
    assert sorted(built.files) == ["gitfaq.md", "guides/gitcli.md"]
    lines = _lines(built, "gitfaq.md")
    text = "\n".join(lines)
    assert "What should I put" not in text and "[[" not in text and "::" not in text
    assert "See git-config(1) for details." in lines and "```" in lines
    assert [(q.qid, q.category) for q in built.queries] == [
        ("gitfaq-1", "configuration"),
        ("gitfaq-2", "configuration"),
        ("gitfaq-3", "hooks"),
    ]
    spans = [q.gold[0] for q in built.queries]
    assert [lines[g.start_line - 1] for g in spans] == ["### Q1", "### Q2", "### Q3"]
    assert lines[spans[0].end_line - 1] == "See git-config(1) for details."
    assert lines[spans[1].end_line - 1] == "```"
    assert lines[spans[2].end_line - 1].startswith("The only safe place")
    assert built.files["guides/gitcli.md"].startswith("# gitcli(7)\n")


MAN_PAGE = r""".\" 中文版 Copyright (c) 2000
.TH FOO 1 "2022" "foo 1.0" 用户命令
.SH 名称
foo \- 复制文件和目录
.SH 概述
\fBfoo\fP [\fI\,选项\/\fP]... \fI来源\fP
.SH 描述
.PP
从指定的来源文件复制到目标处。
.TP
\fB\-a\fP, \fB\-\-all\fP
显示\(lq全部\(rq条目
.BR bar (1)
.IP \(bu 2
# 不是标题
"""


def test_man_page_conversion_and_description() -> None:
    page = builders.parse_man_page(MAN_PAGE)
    assert page is not None
    assert page.title == "FOO(1)" and page.description == "复制文件和目录"
    text = "\n".join(page.lines)
    assert "复制文件和目录" not in text  # the NAME line is not indexed
    assert page.lines[0] == "# FOO(1)"
    assert "## 名称" in page.lines and "## 描述" in page.lines
    assert "foo [选项]... 来源" in page.lines
    assert "-a, --all" in page.lines and "显示“全部”条目" in page.lines
    assert "bar(1)" in page.lines and "\\# 不是标题" in page.lines
    assert builders.parse_man_page(".so man1/other.1\n") is None
    assert builders.parse_man_page(".Dd $Mdocdate$\n.Dt LS 1\n.Sh NAME\n.Nm ls\n.Nd list\n") is None


def test_manpages_set_shares_gold_for_equal_descriptions() -> None:
    pages = {
        "man1/foo.1.gz": MAN_PAGE,
        "man8/bar.8.gz": MAN_PAGE.replace("FOO 1", "BAR 8"),
        "man1/eng.1.gz": ".TH ENG 1\n.SH NAME\neng \\- English only\n.SH DESCRIPTION\nText.\n",
    }
    built = builders.build_manpages_zh(pages)
    assert sorted(built.files) == ["man1/eng.1.md", "man1/foo.1.md", "man8/bar.8.md"]
    (query,) = built.queries  # the English description is not a query; the Chinese one is shared
    assert query.query == "复制文件和目录" and query.category == "man1"  # the first page's section
    n_lines = len(built.files["man1/foo.1.md"].splitlines())
    assert Gold("man1/foo.1.md", 1, n_lines) in query.gold and len(query.gold) == 2


EN_PAGE = """.TH FOO 1
.SH NAME
foo \\- copy files and directories
.SH DESCRIPTION
Copy SOURCE to DEST, or user\\'s files.
"""


def test_crosslingual_sets_ask_in_one_language_and_answer_in_the_other() -> None:
    from evaluation.crosslingual import build_crosslingual

    untranslated = MAN_PAGE.replace("复制文件和目录", "copy files and directories")
    pairs = {
        "man1/foo.1.gz": {"en": EN_PAGE, "zh": MAN_PAGE},
        "man1/raw.1.gz": {"en": EN_PAGE.replace("FOO", "RAW"), "zh": untranslated},
        "man1/gone.1.gz": {"en": ".so man1/foo.1\n", "zh": MAN_PAGE},  # no English page to use
    }
    en2zh = build_crosslingual(pairs, "man-en2zh")
    # The Chinese pages are the corpus; each English NAME line asks for its page (both pages have
    # the same one, so both are gold); the NAME line is not in the indexed text.
    assert sorted(en2zh.files) == ["man1/foo.1.md", "man1/raw.1.md"]
    assert "复制文件和目录" not in en2zh.files["man1/foo.1.md"]
    (query,) = en2zh.queries
    assert query.qid == "man-en2zh-1" and query.query == "copy files and directories"
    assert query.category == "man1" and {g.path for g in query.gold} == {"man1/foo.1.md", "man1/raw.1.md"}

    zh2en = build_crosslingual(pairs, "man-zh2en")
    # The English pages are the corpus; only a translated (Chinese) NAME line asks.
    assert sorted(zh2en.files) == ["man1/foo.1.md", "man1/raw.1.md"]
    assert "Copy SOURCE to DEST, or user's files." in zh2en.files["man1/foo.1.md"]  # \\' is '
    (query,) = zh2en.queries
    assert query.query == "复制文件和目录"
    assert query.gold == (Gold("man1/foo.1.md", 1, len(zh2en.files["man1/foo.1.md"].splitlines())),)


def test_cri_journal_lines_are_the_gold_messages() -> None:
    messages = [
        {
            "message_id": 1,
            "role": "user",
            "content": "I'm Marcus.",
            "timestamp": "2025-05-15T09:12:00",
            "session_id": "s1",
        },
        {
            "message_id": 2,
            "role": "assistant",
            "content": "Hi\nMarcus.",
            "timestamp": "2025-05-15T09:12:10",
            "session_id": "s1",
        },
        {
            "message_id": 3,
            "role": "user",
            "content": "I moved to Austin. Big change.",
            "timestamp": "2025-05-15T18:00:00",
            "session_id": "s2",
        },
        {
            "message_id": 4,
            "role": "user",
            "content": "Went vegan today.",
            "timestamp": "2025-05-16T08:00:00",
            "session_id": "s3",
        },
    ]
    truth = {
        "changes": [
            {"query_topic": "city", "old_value": "NYC", "new_value": "Austin", "key_messages": [3, 99]}
        ],
        "conflicts": [{"correct_resolution": "Marcus is vegan now.", "introduced_at_messages": [4]}],
        "signal_examples": [
            {"text": "I moved to Austin.", "target_fact": "city: Austin"},
            {"text": "absent", "target_fact": "x"},
        ],
    }
    built = builders.build_cri_journals(messages, truth)
    day1 = _lines(built, "memory/2025-05-15.md")
    assert day1[:6] == [
        "# 2025-05-15",
        "",
        "## Session 09:12",
        "",
        "### 09:12",
        "<!-- session:s1 turn:m1 -->",
    ]
    assert day1[6:8] == ["- User: I'm Marcus.", "- Assistant: Hi Marcus."]
    assert [(q.qid, q.category) for q in built.queries] == [
        ("cri-change-1", "change"),
        ("cri-conflict-1", "conflict"),
        ("cri-signal-1", "signal"),
    ]  # unknown message 99 is dropped; a signal with no message is not a query
    (change_gold,) = built.queries[0].gold
    assert day1[change_gold.start_line - 1] == "- User: I moved to Austin. Big change."
    assert built.queries[2].gold == built.queries[0].gold
    day2 = _lines(built, "memory/2025-05-16.md")
    assert day2[built.queries[1].gold[0].start_line - 1] == "- User: Went vegan today."


def test_write_and_ensure_set_rebuild_only_when_sources_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "faq.txt.gz"
    import gzip

    source.write_bytes(gzip.compress(FAQ_TEXT.encode()))
    monkeypatch.setattr(builders, "DEBIAN_FAQ_FILE", source)
    ds = builders.ensure_set("debian-faq", tmp_path / "cache")
    assert len(ds.queries) == 2 and (ds.corpus / "ch01.md").is_file()
    marker = ds.root / "corpus" / "marker.md"
    marker.write_text("x")
    builders.ensure_set("debian-faq", tmp_path / "cache")
    assert marker.exists()  # cache current: nothing rebuilt
    source.write_bytes(gzip.compress(FAQ_TEXT.replace("Yes.", "Yes, it is short.").encode()))
    builders.ensure_set("debian-faq", tmp_path / "cache")
    assert not marker.exists()  # source changed: rebuilt from scratch
    monkeypatch.setattr(builders, "DEBIAN_FAQ_FILE", tmp_path / "absent.gz")
    with pytest.raises(builders.SourceMissingError) as info:
        builders.ensure_set("debian-faq", tmp_path / "cache")
    assert info.value.hint == "apt-get install -y debian-faq"


# --- chunking variants ---------------------------------------------------------------------------

DOC = """# Guide

Intro text that is long enough to stand on its own as a chunk of text.

## Install

Tiny.

## Configure

### Editor

Set the editor with a configuration value and restart the program.
"""


def test_breadcrumbs_name_parent_headings() -> None:
    lines = split_lines(DOC)
    _, trails = breadcrumb_trails(lines)
    assert trails[-1] == ["Guide", "Configure", "Editor"]
    pairs = corpus_chunks(Path("/m/doc.md"), DOC, IndexConfig(breadcrumbs=True))
    embedded = {c.heading: text for c, text in pairs}
    assert embedded["Editor"].startswith("Guide > Configure\n### Editor\n")
    assert embedded["Guide"].startswith("# Guide")  # a top-level section has no parents
    plain = corpus_chunks(Path("/m/doc.md"), DOC, IndexConfig())
    assert [c for c, _ in plain] == [c for c, _ in pairs]  # stored chunks are unchanged


def test_breadcrumbs_of_a_split_section_include_its_own_heading() -> None:
    doc = (
        "# Top\n\n## Long\n\n"
        + "\n\n".join(f"Sentence number {i} of a long section." for i in range(40))
        + "\n"
    )
    pairs = corpus_chunks(Path("/m/long.md"), doc, IndexConfig(breadcrumbs=True, max_chunk_size=300))
    tails = [text for c, text in pairs if c.heading == "Long"][1:]
    assert tails and all(t.startswith("Top > Long\n") for t in tails)


def test_merge_tiny_joins_adjacent_small_sections() -> None:
    lines = split_lines(DOC)
    chunks = chunk_markdown(DOC, "/m/doc.md")
    assert [c.heading for c in chunks] == ["Guide", "Install", "Editor"]
    merged = merge_tiny(chunks, lines, below=30, max_size=1500)
    assert [c.heading for c in merged] == ["Guide", "Install"]
    install = merged[1]
    assert (install.start_line, install.end_line) == (chunks[1].start_line, chunks[2].end_line)
    assert install.content.startswith("## Install\n\nTiny.\n\n## Configure\n\n### Editor")
    assert merge_tiny(chunks, lines, below=30, max_size=40) == chunks  # would not fit
    last_tiny = [
        Chunk("long enough text here", "/m/x.md", "A", 1, 1, 1),
        Chunk("x!", "/m/x.md", "B", 1, 2, 2),
    ]
    assert len(merge_tiny(last_tiny, ["long enough text here", "x!"], below=5, max_size=100)) == 1


# --- the store options the harness relies on ------------------------------------------------------


def _row(key: str, vector: list[float], content: str) -> dict[str, object]:
    return {
        "chunk_hash": key,
        "embedding": vector,
        "content": content,
        "source": f"/m/{key}.md",
        "heading": "",
        "heading_level": 0,
        "start_line": 1,
        "end_line": 1,
    }


def test_store_analyzer_choice_and_search_modes(tmp_path: Path) -> None:
    rows = [
        _row("zh", [1.0, 0.0], "数据库连接超时的问题"),
        _row("en", [0.0, 1.0], "The database timed out; the database was restarted"),
        _row("other", [0.6, 0.8], "An unrelated note about cooking"),
    ]
    found = {}
    for analyzer in ("standard", "jieba"):
        with MilvusStore(
            str(tmp_path / "m.db"), collection=f"c_{analyzer}", dimension=2, analyzer=analyzer
        ) as s:
            assert s.analyzer == analyzer
            s.upsert(rows)
            found[analyzer] = [
                r["chunk_hash"] for r in s.search([0.0, 1.0], query_text="数据库", mode="sparse")
            ]
            dense = s.search([0.0, 1.0], query_text="数据库", mode="dense")
            assert [r["chunk_hash"] for r in dense] == ["en", "other", "zh"]
            assert dense[0]["score"] == pytest.approx(1.0) and dense[1]["score"] == pytest.approx(0.8)
            sparse = s.search([0.0, 1.0], query_text="database", mode="sparse")
            assert [r["chunk_hash"] for r in sparse] == ["en"] and sparse[0]["score"] > 0
            hybrid = s.search([0.0, 1.0], query_text="database", top_k=2)
            assert hybrid[0]["chunk_hash"] == "en" and hybrid[0]["score"] == pytest.approx(1.0)
            with pytest.raises(ConfigValueError, match="Unknown search mode"):
                s.search([0.0, 1.0], query_text="x", mode="bm25")
    assert found == {"standard": [], "jieba": ["zh"]}
    with pytest.raises(ConfigValueError, match="Unknown BM25 analyzer 'ik'"):
        MilvusStore(str(tmp_path / "m.db"), collection="c_x", dimension=2, analyzer="ik")


def test_weighted_fusion_leans_on_the_favoured_leg(tmp_path: Path) -> None:
    rows = [
        _row("near", [1.0, 0.0], "unrelated words only"),  # the dense leg's best
        _row("word", [0.0, 1.0], "milvus milvus milvus"),  # the BM25 leg's best
        _row("both", [0.8, 0.6], "milvus once"),
    ]
    # Chinese questions: BM25 leads, the English model does not vote; English ones: the dense leg
    # leads; the multilingual leg votes only for chunks in the other script (store/weights.py).
    chinese, english = hybrid_weights("数据库 timeout"), hybrid_weights("database timeout")
    assert chinese.of("dense", "数据库连接超时") == 0.0 and chinese.of("sparse", "数据库连接超时") == 1.5
    assert chinese.of("multilingual", "数据库连接超时") == 0.0
    assert chinese.of("multilingual", "the database connection timed out") == 1.5
    assert english.of("dense", "anything") == HYBRID_TILT and english.of("sparse", "anything") == 1.0
    assert english.of("multilingual", "the database") == 0.0 and english.of("multilingual", "数据库") == 1.5
    with MilvusStore(str(tmp_path / "m.db"), collection="c", dimension=2, analyzer="jieba") as s:
        s.upsert(rows)
        two = {"top_k": 2, "candidates": 2}  # the arithmetic below: two hits per leg
        dense_first = s.search([1.0, 0.0], query_text="milvus", weights=(1.5, 1.0), **two)
        sparse_first = s.search([1.0, 0.0], query_text="milvus", weights=(1.0, 1.5), **two)
        plain = s.search([1.0, 0.0], query_text="milvus", top_k=3)
        top = s.search([0.8, 0.6], query_text="once", top_k=1, weights=(1.5, 1.0))
        # every candidate (the default depth): "word" is also the dense leg's third, so it is in
        # both lists, and passes "near", which is in one
        deep = s.search([1.0, 0.0], query_text="milvus", top_k=3, weights=(1.5, 1.0))
    # Each leg fetches 2: dense near, both; BM25 word, both. Weighted RRF (k=60), normalised:
    best = 2.5 / 61
    assert [r["chunk_hash"] for r in dense_first] == ["both", "near"]
    assert dense_first[0]["score"] == pytest.approx((1.5 / 62 + 1 / 62) / best)
    assert dense_first[1]["score"] == pytest.approx((1.5 / 61) / best)
    assert [r["chunk_hash"] for r in sparse_first] == ["both", "word"]
    assert sparse_first[0]["score"] == pytest.approx((1 / 62 + 1.5 / 62) / best)
    assert sparse_first[1]["score"] == pytest.approx((1.5 / 61) / best)  # 0.6, ahead of near's 0.4
    assert top[0]["chunk_hash"] == "both" and top[0]["score"] == pytest.approx(1.0)
    assert {r["chunk_hash"] for r in plain} == {"near", "word", "both"}  # weights=None: Milvus' RRF
    assert [r["chunk_hash"] for r in deep] == ["both", "word", "near"]


# --- end to end: the harness indexes like the product ---------------------------------------------


def _tiny_dataset(root: Path) -> None:
    corpus = root / "corpus"
    (corpus / "notes").mkdir(parents=True)
    (corpus / "notes" / "db.md").write_text(
        "# Database\n\n## Timeouts\n\nThe milvus connection timeout was raised to thirty seconds.\n\n"
        "## Backups\n\nNightly backups go to the storage bucket.\n"
    )
    (corpus / "cooking.md").write_text("# Cooking\n\nA pasta recipe with tomatoes and basil.\n")
    write_queries(
        root / "queries.jsonl",
        [
            Query("q1", "milvus connection timeout", "ops", (Gold("notes/db.md", 3, 6),)),
            Query("q2", "pasta recipe tomatoes", "food", (Gold("cooking.md", 1, 3),)),
        ],
    )


async def test_harness_stores_what_memsearch_stores_and_scores_a_run(tmp_path: Path) -> None:
    from memsearch.embeddings import get_provider

    _tiny_dataset(tmp_path / "set")
    dataset = load_dataset(tmp_path / "set", "tiny")
    provider = get_provider("hash")
    (tmp_path / "stores").mkdir()
    harness = Harness(provider, provider, tmp_path / "stores")
    try:
        result = await harness.run(dataset, RunConfig("default", IndexConfig(analyzer="auto")))
        store = await harness.store_for(dataset, IndexConfig(analyzer="auto"))
        harness_rows = sorted(store.query(), key=lambda r: r["chunk_hash"])
    finally:
        harness.close()
    with MemSearch(
        [dataset.corpus], embedding_provider="hash", milvus_uri=str(tmp_path / "ms.db"), embedding_cache=False
    ) as ms:
        await ms.index()
        product_rows = sorted(ms.store.query(), key=lambda r: r["chunk_hash"])
    assert harness_rows == product_rows and len(product_rows) == 3
    assert result.chunks == 3 and len(result.latencies_ms) == 2
    assert result.per_query["q1"]["recall@1"] == 1.0 and result.per_query["q2"]["recall@1"] == 1.0
    assert result.summary["all"]["mrr"] == 1.0 and set(result.summary) == {"all", "ops", "food"}
    assert result.hits["q1"][0] == Hit("notes/db.md", 3, 6)


async def test_exact_token_eval_runs_and_its_table_has_every_row(tmp_path: Path) -> None:
    """``python -m evaluation.exact_tokens`` on a small corpus (hash embedder): every query's token is
    in exactly one turn, the run scores the four fusions, and the exact-word slot puts that turn first
    (the hash vectors know nothing of the token, so only BM25 and the slot can find it)."""
    from evaluation import exact_tokens

    from memsearch.embeddings import get_provider

    dataset = exact_tokens.build(tmp_path / "set", 300, 12)
    assert len(dataset.queries) >= 6 and all(len(q.gold) == 1 for q in dataset.queries)
    provider = get_provider("hash")
    (tmp_path / "stores").mkdir()
    harness = Harness(provider, provider, tmp_path / "stores")
    try:
        table = await exact_tokens.run(dataset, harness)
    finally:
        harness.close()
    assert set(table) == {
        "BM25 alone",
        "hybrid RRF (original)",
        "weighted fusion, no exact-word slot",
        "weighted fusion + exact-word slot (default)",
    }
    assert table["weighted fusion + exact-word slot (default)"]["recall@1"] == 1.0
    assert all("recall@1" in row and "mrr" in row for row in table.values())
