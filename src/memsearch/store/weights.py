"""How much each leg's vote counts in the fusion: by the query's script and by the chunk's.

Why by script: each retriever is strong on some text and near chance on other text, and under RRF
a vote of the weak one outweighs the strong one's own order (a chunk in two lists beats the first
hit of one). Measured on the evaluation sets (evaluation/README.md, "What the numbers decided"):

- the default dense model (all-MiniLM-L6-v2) reads English well, Chinese near chance;
- BM25 with jieba reads Chinese far better than that model, English less well than it;
- the multilingual model (``embedding.multilingual``) maps Chinese and English into one space, so
  it finds a chunk in the other language of the query, which nothing else can; on a chunk in the
  query's own language it is weaker than the leg that leads there, and its votes only cost.

So a leg votes where it is strong (:data:`LEG_WEIGHTS`), and the chunk's script decides which of
its two weights applies. A query is CJK when it holds a Han, kana or hangul character; a chunk
when such characters make up at least :data:`CJK_SHARE` of its Han characters and Latin words
(Chinese notes quote commands and English terms; an English note may quote a Chinese name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Han, kana and hangul: scripts that general-purpose English embedding models read poorly and that
#: the jieba BM25 analyzer segments.
CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
#: A chunk is CJK when its CJK characters are at least this share of CJK characters plus Latin
#: words (a Chinese man page full of option names is still Chinese; 0.05-0.5 measured alike).
CJK_SHARE = 0.3

#: Weight of the dense leg for a query not in a CJK script (BM25 has 1.0). Any value above ~1.15
#: makes the dense leg win every tie and near-tie; on the evaluation sets 1.05-3 gave the same
#: Recall@5 and 1.5 was within 0.01 MRR of the best everywhere (evaluation/README.md).
HYBRID_TILT = 1.5
#: The multilingual leg's name (``MilvusStore.ranked``: its vectors are in the store's sidecar).
MULTILINGUAL = "multilingual"

#: Query script -> leg -> (weight for a chunk in the query's script, weight for one in another).
LEG_WEIGHTS: dict[str, dict[str, tuple[float, float]]] = {
    # English (and any other non-CJK) questions: the dense leg leads, BM25 votes too; the
    # multilingual leg only for chunks in another script (EN->ZH R@5 0.599 -> 0.702).
    "other": {"dense": (HYBRID_TILT, HYBRID_TILT), "sparse": (1.0, 1.0), MULTILINGUAL: (0.0, 1.5)},
    # Chinese, Japanese, Korean: BM25 with jieba leads; the English model does not vote (at 1 : 1.5
    # hybrid MRR on manpages-zh was 0.708 against BM25's 0.796, and Chinese time-scoped questions
    # found their day's turn first in 58 % of cases, 90 % without it); the multilingual leg votes
    # for chunks in another script (ZH->EN R@5 0.156 -> 0.604).
    "cjk": {"dense": (0.0, 0.0), "sparse": (1.5, 1.5), MULTILINGUAL: (0.0, 1.5)},
}


def query_script(query: str) -> str:
    """``"cjk"`` when ``query`` holds a Han, kana or hangul character, else ``"other"``."""
    return "cjk" if CJK_RE.search(query) else "other"


def text_script(text: str) -> str:
    """``"cjk"`` when CJK characters are at least :data:`CJK_SHARE` of ``text``'s CJK characters
    and Latin words, else ``"other"``."""
    cjk = len(CJK_RE.findall(text))
    if not cjk:
        return "other"
    return "cjk" if cjk / (cjk + len(_LATIN_WORD.findall(text))) >= CJK_SHARE else "other"


@dataclass(frozen=True)
class Weights:
    """One query's fusion weights: per leg, for a chunk in the query's script and for one in
    another (:data:`LEG_WEIGHTS`). A leg not named does not vote."""

    script: str
    legs: Mapping[str, tuple[float, float]]

    def of(self, leg: str, content: str) -> float:
        """The weight of ``leg``'s vote for a chunk with this text."""
        same, other = self.legs.get(leg, (0.0, 0.0))
        if same == other:
            return same
        return same if text_script(content) == self.script else other

    def heaviest(self, leg: str) -> float:
        return max(self.legs.get(leg, (0.0, 0.0)))

    def best(self, legs: Iterable[str]) -> float:
        """The most one chunk's votes can weigh together (rank 1 in every leg that votes for it)."""
        names = list(legs)
        return max(sum(self.legs.get(leg, (0.0, 0.0))[side] for leg in names) for side in (0, 1))


def hybrid_weights(query: str) -> Weights:
    """The fusion weights of ``query``: its script's row of :data:`LEG_WEIGHTS`."""
    script = query_script(query)
    return Weights(script, LEG_WEIGHTS[script])


def as_weights(weights: Weights | tuple[float, float] | None) -> Weights | None:
    """``weights`` as :class:`Weights`: a (dense, BM25) pair weighs every chunk alike (the form
    ``MilvusStore.search`` took before the weights knew scripts); None stays None (plain RRF)."""
    if weights is None or isinstance(weights, Weights):
        return weights
    dense, sparse = weights
    return Weights("", {"dense": (dense, dense), "sparse": (sparse, sparse)})


def hit_content(hit: Any) -> str:
    return str((hit.get("entity") or {}).get("content") or "")
