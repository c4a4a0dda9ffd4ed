"""A hit's ``relevance``: how likely it answers the query, in [0, 1], comparable across queries
and stores.

Why not the fused ``score``: it is a function of rank positions only (rank 1 in both legs is 1.0
whatever the query), so the best hit of a nonsense query scores like the best hit of a perfect
one. ``relevance`` is computed from the hit itself, never from its rank or from the store's
statistics (so a hit means the same in a store of ten notes and of ten thousand):

- ``similarity``: the cosine similarity of the query's and the chunk's vectors (the dense leg's own
  measure; a hit the dense leg did not return is looked up, ``hybrid_search.Ranked``);
- ``match``: the share of the query's words found in the chunk, each word weighted by how much
  it says: function words ("how", "the", 的, 怎么) count nothing, and a Chinese word by its inverse
  frequency in jieba's dictionary (a fixed table, not the store's BM25 statistics).

A logistic curve per script turns the two into a probability (:data:`CURVES`): the default English
model reads English well and Chinese poorly, so a query with CJK characters leans on ``match``
and an English one on ``similarity``. The curves were fitted on the evaluation sets plus
questions no note answers, and checked on a held-out half (evaluation/README.md#relevance,
``python -m evaluation.relevance``). The similarity term is calibrated for the default embedding
model; with another model only ``match`` is used (:func:`relevance`'s ``model`` argument).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from functools import lru_cache

from memsearch.store.weights import text_script

__all__ = ["CURVES", "QueryTerms", "features", "lexical_match", "relevance"]

#: Han, kana and hangul (as ``store.fusion``'s CJK test).
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_HAN = re.compile(r"[\u4e00-\u9fd5]")
_WORD = re.compile(r"\w+")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "s", "e")

#: English words that carry no topic: articles, pronouns, auxiliaries, question words, prepositions.
STOP_EN: frozenset[str] = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can cannot could did do does doing done down during each either
    else ever every few for from further get gets getting got had has have having he her here hers
    him his how however i if in into is it its itself just let like make makes many may me might
    more most much must my no nor not now of off on once one only or other our ours out over own
    please same she should so some such than that the their theirs them then there these they this
    those though through to too under until up upon us use used using very was we were what when
    where whether which while who whom whose why will with within without would yes yet you your
    yours""".split()  # noqa: SIM905
)
#: Chinese words that carry no topic (jieba's dictionary gives the rest their weight).
STOP_ZH: frozenset[str] = frozenset(
    """的 了 是 在 和 与 及 或 也 都 就 又 还 而 把 被 让 给 对 向 从 到 为 为了 以 于 之 其 这 那 这个 那个
    这些 那些 哪 哪个 哪些 什么 怎么 怎样 怎么样 如何 为什么 吗 呢 吧 啊 呀 么 我 我们 你 你们 他 她 它 他们
    有 没有 没 不 要 会 能 可以 应该 一个 一下 一些 有些 所有 每个 关于 以及 如果 那么 因为 所以 但是
    可是 时候 上 下 中 里 请 问 想 需要 做 用 使用 该 个 些 谁 几 多少""".split()  # noqa: SIM905
)
#: Weight of a Chinese word not in jieba's dictionary (rare: a name, a code).
_UNKNOWN_ZH = 1.0
#: Inverse log-frequency at which a Chinese word weighs fully (1.0); more common words weigh less.
_ZH_FULL_IDF = 12.0


@dataclass(frozen=True)
class Curve:
    """``1 / (1 + exp(-(bias + sim * similarity + match * match)))``."""

    bias: float
    sim: float
    match: float

    def __call__(self, similarity: float, match: float, *, use_similarity: bool = True) -> float:
        z = self.bias + (self.sim * similarity if use_similarity else 0.0) + self.match * match
        return 1.0 / (1.0 + math.exp(-z))


#: Fitted curves (``python -m evaluation.relevance``): per script, and the lexical-only curves
#: used with a model they were not fitted for.
CURVES: dict[str, Curve] = {
    "en": Curve(-4.840, 9.595, 3.128),
    "zh": Curve(-3.869, 3.422, 7.505),
    "en-lexical": Curve(-2.457, 0.0, 6.979),
    "zh-lexical": Curve(-2.851, 0.0, 8.280),
}
#: A chunk in another script than the query's, found by the multilingual leg: a curve of the
#: multilingual model's similarity alone (the default model and the word match know nothing across
#: languages), fitted on the cross-lingual sets (``python -m evaluation.relevance``).
CROSSING = Curve(-4.543, 14.889, 0.0)
#: The model the similarity terms of :data:`CURVES` were fitted for.
CALIBRATED_MODELS: frozenset[str] = frozenset({"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"})


@dataclass(frozen=True)
class QueryTerms:
    """The words of a query that carry its topic, with their weights, and its script."""

    terms: tuple[tuple[str, float], ...]
    cjk: bool

    @classmethod
    def of(cls, query: str) -> QueryTerms:
        return _terms(query)

    @property
    def weight(self) -> float:
        return sum(w for _, w in self.terms)


@lru_cache(maxsize=256)
def _terms(query: str) -> QueryTerms:
    weights: dict[str, float] = {}
    for word in _words(query):
        if _HAN.search(word):
            weight = 0.0 if word in STOP_ZH else _zh_weight(word)
        elif word in STOP_EN or len(word) < 2:
            weight = 0.0
        else:
            weight = 1.0
        if weight > 0:
            weights[word] = max(weights.get(word, 0.0), weight)
    return QueryTerms(tuple(weights.items()), bool(_CJK.search(query)))


def _words(text: str) -> list[str]:
    """Lower-case words: runs of Han characters segmented by jieba, other runs of word characters."""
    out: list[str] = []
    for run in _WORD.findall(text.lower()):
        if _HAN.search(run):
            out += [w for w in _jieba_cut(run) if _WORD.fullmatch(w)]
        else:
            out.append(run)
    return out


def _jieba_cut(text: str) -> list[str]:
    try:
        import jieba
    except ImportError:  # no jieba: every Han character is a word
        return list(text)
    from memsearch.store.jieba_loader import prepare

    prepare()
    words: list[str] = jieba.lcut(text)
    return words


def _zh_weight(word: str) -> float:
    """A Chinese word's weight: its inverse log-frequency in jieba's dictionary, up to 1."""
    try:
        import jieba
    except ImportError:
        return _UNKNOWN_ZH
    tokenizer = jieba.dt
    freq = tokenizer.FREQ.get(word) or 0
    if freq <= 0:
        return _UNKNOWN_ZH
    return max(0.0, min(1.0, math.log(tokenizer.total / freq) / _ZH_FULL_IDF))


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _words_of(text: str) -> list[str]:
    """The words of a lower-cased text, sorted, for prefix look-ups: each run of word characters,
    and each of its tails after an underscore (``err_pdf_1042`` also as ``pdf_1042`` and ``1042``)."""
    found: set[str] = set()
    for run in _WORD.findall(text):
        found.add(run)
        start = run.find("_")
        while start >= 0:
            found.add(run[start + 1 :])
            start = run.find("_", start + 1)
    return sorted(found)


def _present(term: str, text: str, words: list[str]) -> bool:
    """Whether ``term`` is in the lower-cased ``text`` (``words``: :func:`_words_of` it): a Chinese
    word anywhere, another word at the start of a word, by its stem ("configure" is found in
    "configuration", "packages" in "package")."""
    if _HAN.search(term):
        return term in text
    stem = _stem(term)
    i = bisect.bisect_left(words, stem)
    return i < len(words) and words[i].startswith(stem)


def lexical_match(terms: QueryTerms, content: str) -> float:
    """The weighted share of ``terms`` found in ``content`` (0 when the query has no such word)."""
    total = terms.weight
    if total <= 0:
        return 0.0
    text = content.lower()
    words = _words_of(text)
    return sum(w for term, w in terms.terms if _present(term, text, words)) / total


def features(terms: QueryTerms, content: str, similarity: float | None) -> tuple[float, float]:
    """(similarity, match) of one hit; an unknown similarity counts as none (0)."""
    return (similarity if similarity is not None else 0.0), lexical_match(terms, content)


def relevance(
    terms: QueryTerms, content: str, similarity: float | None, model: str = "", crossing: float | None = None
) -> float:
    """The hit's relevance in [0, 1] (see the module docstring), rounded to 4 places. ``model``
    is the embedding model; one the curves were not fitted for gets the lexical-only curve.
    ``crossing``: the multilingual model's similarity (the multilingual leg); for a chunk in another
    script than the query's, the larger of the two curves' answers (:data:`CROSSING`)."""
    sim, match = features(terms, content, similarity)
    script = "zh" if terms.cjk else "en"
    if model and model not in CALIBRATED_MODELS:
        found = CURVES[f"{script}-lexical"](sim, match, use_similarity=False)
    else:
        found = CURVES[script](sim, match)
    if crossing is not None and text_script(content) != ("cjk" if terms.cjk else "other"):
        found = max(found, CROSSING(crossing, 0.0))
    return round(found, 4)
