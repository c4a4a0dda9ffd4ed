"""The BM25 leg's query text: Chinese function words left out, on the query side only.

Why: jieba gives every 的, 了, 我们, 什么 of a Chinese question its own BM25 term, and a memory
full of Chinese chatter holds those words everywhere, so they ranked unrelated turns next to the
one the question names (evaluation/README.md: the Chinese time-scoped questions). Their IDF is low
but not zero, and a short chunk that repeats them scores on them. Why the query side only: the
collection's analyzer is the original memsearch's schema (changing it would change what the
original reads and writes), and a word left out of the query simply adds nothing to any chunk's
score; the stored text and its BM25 vectors stay as they are.

The list is ours: particles, pronouns, question words and the commonest verbs of asking, the words
a question is built from rather than what it is about. Text without a Han character is returned
unchanged (English BM25 is left to its IDF).
"""

from __future__ import annotations

import re

#: Han characters: only text holding one is segmented here.
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
#: A word worth searching holds a letter, a digit or a Han character (not punctuation alone, which
#: the analyzer keeps as a token: a question mark would match every chunk that asks something).
_WORDY = re.compile(r"\w")

#: Chinese words a question is built from, not what it asks about.
STOP_WORDS = frozenset(
    """
    的 了 着 过 地 得 之 所 吗 呢 吧 啊 呀 嘛 么 哦 么样
    是 在 有 没有 没 不 也 都 就 还 又 再 才 很 太 更 最 已经 曾经
    和 与 及 以及 或 或者 而 并 并且 但 但是 而且 如果 因为 所以 然后 那么
    把 被 让 给 对 从 向 往 到 为 为了 以 于 跟 同 比 关于 对于
    这 那 这个 那个 这些 那些 这样 那样 这里 那里 这儿 那儿 此 其 该 每
    一个 一些 一下 一点 一种 个 些 种
    我 我们 你 你们 您 他 她 它 他们 她们 它们 咱们 大家 自己 别人
    什么 怎么 怎样 怎么样 如何 哪 哪里 哪儿 哪些 哪个 为什么 为何 多少 几 谁 是否 是不是
    能 能够 可以 可能 会 要 想 应该 应当 需要 得到
    请问 请 告诉 知道 一起 当时 时候 的话
    """.split()  # noqa: SIM905  (a list literal of 140 words is harder to read)
)


def bm25_query(text: str) -> str:
    """``text`` as the BM25 leg should search it: for text with Han characters, jieba's words (the
    segmenter Milvus' analyzer uses) without :data:`STOP_WORDS` and punctuation, joined by spaces;
    any other text as it is. A question of stop words only is searched as it is (better than
    nothing)."""
    if not _HAN.search(text):
        return text
    from memsearch.store.analyzer import prepare_jieba

    prepare_jieba()
    import jieba

    words = [w.strip() for w in jieba.cut(text)]
    kept = [w for w in words if _WORDY.search(w) and w.lower() not in STOP_WORDS]
    return " ".join(kept) if kept else text
