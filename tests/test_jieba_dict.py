"""memsearch.store.jieba_dict: jieba's frequency table in compact form answers exactly as jieba's dict."""

from __future__ import annotations

import os
import random
from pathlib import Path

import jieba
import pytest

from memsearch.store import jieba_dict
from memsearch.store.jieba_dict import CompactFreq

pytestmark = pytest.mark.fresh_caches  # these build the jieba table themselves

DICT = Path(jieba.__file__).parent / jieba.DEFAULT_DICT_NAME


@pytest.fixture(scope="module")
def jiebas() -> tuple[dict[str, int], int]:
    with DICT.open("rb") as fh:
        freq, total = jieba.Tokenizer.gen_pfdict(fh)
    return freq, total


@pytest.fixture(scope="module")
def table() -> CompactFreq:
    return CompactFreq.from_dict_file(DICT)


def test_every_key_value_and_the_total_are_jiebas(
    jiebas: tuple[dict[str, int], int], table: CompactFreq
) -> None:
    freq, total = jiebas
    assert table.total == total
    assert len(table) == len(freq)
    assert [k for k, v in freq.items() if table.get(k) != v or k not in table or table[k] != v] == []


def test_remembered_answers_stay_right_past_the_memory_bound(table: CompactFreq) -> None:
    fresh = CompactFreq.from_bytes(table.to_bytes())
    words = [f"x{i}" for i in range(jieba_dict.RECENT_MAX + 10)]
    assert [fresh.get(w) for w in words] == [None] * len(words)  # the memory filled and was cleared
    assert fresh.get("数据库") == table.get("数据库") and "数据" in fresh and fresh.get("不是词吧吧") is None


def test_strings_that_are_not_keys_are_not_found(
    jiebas: tuple[dict[str, int], int], table: CompactFreq
) -> None:
    freq, _ = jiebas
    rnd = random.Random(7)
    keys = list(freq)
    # Glued halves of real words: many share a CRC bucket with real keys' neighbours, few are keys.
    probes = [rnd.choice(keys)[:2] + rnd.choice(keys)[-2:] for _ in range(20_000)]
    probes += ["", "C++ ", "x" * 40, "\ud800", "数据库连接池耗尽了吗"]
    wrong = [p for p in probes if (p in freq) != (p in table) or freq.get(p) != table.get(p)]
    assert wrong == []
    assert sum(p not in freq for p in probes) > 10_000  # the probes did test misses
    with pytest.raises(KeyError):
        table["不是一个词语的字符串"]


def test_it_round_trips_through_bytes_and_rejects_damage(table: CompactFreq) -> None:
    data = table.to_bytes()
    again = CompactFreq.from_bytes(data)
    assert again.total == table.total and again.get("数据库") == table.get("数据库") and "数据" in again
    with pytest.raises(ValueError):
        CompactFreq.from_bytes(data[:-5])
    with pytest.raises(ValueError):
        CompactFreq.from_bytes(b"not a table" + data)


def test_the_cache_file_is_rebuilt_when_damaged_or_not_ours(tmp_path: Path) -> None:
    dict_file = tmp_path / "dict.txt"
    dict_file.write_text("数据库 100 n\n数据 50 n\nC++ 3 nz\n数据库 120 n\n", encoding="utf-8")
    cached = jieba_dict.cache_path(dict_file)
    cached.unlink(missing_ok=True)
    try:
        first = jieba_dict.load(dict_file)
        assert (first.get("数据库"), first.get("数"), first.get("C+"), first.total) == (120, 0, 0, 273)
        cached.write_bytes(cached.read_bytes()[:-3])  # torn
        assert jieba_dict.load(dict_file).get("数据库") == 120
        assert CompactFreq.from_bytes(cached.read_bytes()).get("数据库") == 120  # and rewritten
        if os.getuid() == 0:  # root can hand the file to someone else: it is not trusted then
            other = tmp_path / "other.txt"
            other.write_text("数据库 1 n\n", encoding="utf-8")
            cached.write_bytes(CompactFreq.from_dict_file(other).to_bytes())
            os.chown(cached, 12345, 12345)
            assert jieba_dict.load(dict_file).get("数据库") == 120
    finally:
        cached.unlink(missing_ok=True)


def test_jieba_segments_the_same_with_the_compact_table_and_takes_added_words(table: CompactFreq) -> None:
    plain = jieba.Tokenizer()
    plain.initialize()
    compact = jieba.Tokenizer()
    compact.FREQ, compact.total, compact.initialized = (
        CompactFreq.from_bytes(table.to_bytes()),
        table.total,
        True,
    )
    texts = [
        "数据库连接池耗尽，重启 Milvus 之后 C++ 服务恢复了",
        "为什么选择 React Query 做状态管理",
        "退款测试为什么不稳定",
    ]
    for text in texts:
        assert list(compact.cut_for_search(text)) == list(plain.cut_for_search(text))
        assert list(compact.cut(text)) == list(plain.cut(text))
    assert "状态管理器件" not in compact.FREQ  # looked up (and remembered as absent) before it is added
    for t in (plain, compact):
        t.add_word("状态管理器件", 50)
    assert compact.FREQ.get("状态管理器件") == 50 and compact.FREQ.get("状态管理器") == 0
    text = "我们的状态管理器件很好"
    assert list(compact.cut(text)) == list(plain.cut(text)) and "状态管理器件" in list(compact.cut(text))
