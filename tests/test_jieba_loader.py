"""jieba's dictionary is loaded only when a Han text is segmented, in compact form, and the tokens
do not change.

Each check runs in a fresh process: jieba's tokenizer is process-wide, and what is measured is
what a process that never sees Chinese loads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from memsearch.store.jieba_loader import KNOWN_JIEBA, KNOWN_TOTAL, NON_HAN_ENTRIES

pytestmark = pytest.mark.fresh_caches  # these build the jieba table themselves

ROOT = Path(__file__).resolve().parents[1]

#: Strings where the few non-Han dictionary words (C++, AT&T, c#) and jieba's handling of digits,
#: decimals, percentages and punctuation decide the tokens.
AWKWARD = [
    "C++ and c++ with AT&T, c# and C# code; VISA QQ RSS 4S PC IP SIM",
    "CALL the API at 3.5% load: foo-bar_baz x.y.z #tag & more 100% done",
    "AT&TC++c#VISAQQ 4s4S RSSI SIMCARD IPC",
    "café naïve ünïcode — “quotes” and emoji 🎉 ひらがな 한국어 Ａｂ１ fullwidth",
    "",
]


def run(code: str, tmp_path: Path) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_the_non_han_table_is_exactly_that_part_of_jiebas_dictionary(tmp_path: Path) -> None:
    code = """
        import json, re, jieba
        from pathlib import Path
        t = jieba.Tokenizer()
        t.initialize()
        han = re.compile("[\\u4e00-\\u9fd5]")
        size = (Path(jieba.__file__).parent / "dict.txt").stat().st_size
        subset = {w: f for w, f in t.FREQ.items() if not han.search(w)}
        print(json.dumps([jieba.__version__, size, t.total, subset]))
    """
    version, size, total, subset = run(code, tmp_path)
    assert (version, size) == KNOWN_JIEBA
    assert total == KNOWN_TOTAL
    assert subset == NON_HAN_ENTRIES


def test_tokens_are_the_same_and_chinese_loads_the_dictionary(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from evaluation import gen_corpus

    assert gen_corpus.main([str(tmp_path / "c"), "--chunks", "300"]) == 0
    english = AWKWARD + [
        line
        for path in sorted((tmp_path / "c" / "memory").glob("*.md"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not any("\u4e00" <= ch <= "\u9fd5" for ch in line)
    ]
    chinese = ["数据库连接超时，重启 Milvus 之后 C++ 服务恢复了", "我们决定用 jieba 分词 AT&T"] + [
        line
        for path in sorted((tmp_path / "c" / "memory").glob("*.md"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if any("\u4e00" <= ch <= "\u9fd5" for ch in line)
    ]
    (tmp_path / "texts.json").write_text(json.dumps([english, chinese]), encoding="utf-8")
    code = """
        import json, jieba
        from milvus_lite.analyzer.jieba_analyzer import JiebaAnalyzer
        from memsearch.store import jieba_loader
        english, chinese = json.load(open("texts.json", encoding="utf-8"))
        jieba_loader.prepare()
        analyzer = JiebaAnalyzer()
        lazy = [analyzer.tokenize(t) for t in english]
        still_deferred, entries = jieba_loader.deferred(), len(jieba.dt.FREQ)
        lazy_zh = [analyzer.tokenize(t) for t in chinese]
        loaded = not jieba_loader.deferred() and len(jieba.dt.FREQ) > 100_000
        compact = type(jieba.dt.FREQ).__name__ == "CompactFreq"
        full = jieba.Tokenizer()
        full.initialize()
        def tokens(text):
            return [w.strip().lower() for w in full.cut_for_search(text) if w.strip()]
        same = lazy == [tokens(t) for t in english] and lazy_zh == [tokens(t) for t in chinese]
        print(json.dumps([len(english), len(chinese), still_deferred, entries, loaded, compact, same]))
    """
    count, count_zh, still_deferred, entries, loaded, compact, same = run(code, tmp_path)
    assert count > 300 and count_zh > 20
    assert still_deferred and entries == len(NON_HAN_ENTRIES)
    assert loaded and compact  # the dictionary as memsearch.store.jieba_dict keeps it
    assert same


def test_a_store_that_sees_no_chinese_never_loads_the_dictionary(tmp_path: Path) -> None:
    code = f"""
        import json, sys
        from memsearch.store import MilvusStore
        from memsearch.store import jieba_loader
        rows = [
            {{"chunk_hash": "en", "embedding": [1.0, 0.0], "content": "the database connection timed out",
             "source": "/a.md", "heading": "", "heading_level": 0, "start_line": 1, "end_line": 1}},
            {{"chunk_hash": "zh", "embedding": [0.0, 1.0], "content": "数据库连接超时了",
             "source": "/b.md", "heading": "", "heading_level": 0, "start_line": 1, "end_line": 1}},
        ]
        with MilvusStore({str(tmp_path / "m.db")!r}, dimension=2, analyzer="jieba") as store:
            store.upsert(rows[:1])
            store.flush()
            hits = store.search([1.0, 0.0], query_text="database timeout", top_k=1)
            english_only = jieba_loader.deferred()
            store.upsert(rows[1:])
            store.flush()
            zh = store.search([0.5, 0.5], query_text="连接超时", top_k=2)
            print(json.dumps([hits[0]["chunk_hash"], english_only, jieba_loader.deferred(),
                              [h["chunk_hash"] for h in zh]]))
    """
    first, english_only, after_chinese, zh = run(code, tmp_path)
    assert first == "en"
    assert english_only is True
    assert after_chinese is False
    assert zh[0] == "zh"
