"""``python -m evaluation.relevance``: calibrate a hit's ``relevance`` and measure the strong-match floor.

Every set is indexed with ``MemSearch`` (the product path, the default ONNX model) and searched
with its own questions (answerable: the gold says where the answer is) and with questions no note
of it answers (:mod:`evaluation.unanswerable`'s written ones, and the other sets' questions, less
those the set does answer). For each of the top 5 hits the two signals of
``memsearch.engine.relevance`` are recomputed (the cosine similarity, the weighted word match) and
labelled 1 when the hit overlaps a gold span.

Questions are split in two halves by a hash of their id: the curves (``--fit``) are fitted on one
half, and the report (precision and recall of "the top hit's relevance is at least the floor" at
telling answerable from unanswerable questions) is given on the other. ``--review`` lists, per
set, the negatives whose top hit matches best, to be read and listed in ``ANSWERED_IN`` /
:data:`CROSS_ANSWERED` when a note does answer them.

    python -m evaluation.relevance                  # search, then report with the shipped curves
    python -m evaluation.relevance --fit            # also fit the curves on the fitting half
    python -m evaluation.relevance --cached --fit   # refit from the last run's hits (word match recomputed)
    python -m evaluation.relevance --review         # the negatives to read
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evaluation.builders import SETS, ensure_set
from evaluation.dataset import Dataset, Gold
from evaluation.metrics import Hit, overlaps
from evaluation.runner import _to_hit
from evaluation.unanswerable import ANSWERED_IN, EVERYDAY_EN, EVERYDAY_ZH, NEAR_EN, NEAR_ZH

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
FEATURES = CACHE_DIR / "relevance-features.json"
#: The sets calibrated on (the dated journals are generated: no package needed).
CALIBRATION_SETS = ("debian-faq", "gitfaq", "manpages-zh", "cri-persona", "dated-journals")
#: The cross-lingual sets, searched with the multilingual leg on: they calibrate :data:`CROSSING`
#: (``memsearch.engine.relevance``), the curve of a hit in another script than the question's.
CROSSING_SETS = ("man-en2zh", "man-zh2en")
#: Sets built from the same man pages: one's questions are answered by the others' notes.
MAN_PAGE_SETS = frozenset({"manpages-zh", *CROSSING_SETS})
#: Hits per question whose signals are recorded.
TOP = 5
#: Cross-set questions a set does answer, or nearly (read in ``--review``): (set, question id).
CROSS_ANSWERED: frozenset[tuple[str, str]] = frozenset(
    {
        ("manpages-zh", "dated-journals:search-plain"),  # 搜索索引是怎么更新的: mandb updates an index
    }
)


@dataclass
class Row:
    """One hit of one question."""

    set: str
    qid: str
    query: str
    answerable: bool
    cjk: bool
    rank: int
    similarity: float
    match: float
    label: int
    source: str
    heading: str
    preview: str
    text: str = ""  # the searched text (a time phrase taken out)
    content: str = ""  # the hit's text, to recompute the signals offline
    crossing: float = -1.0  # the multilingual model's similarity (-1: the leg was off)
    cross: bool = False  # the hit is in another script than the question


def held_out(set_name: str, qid: str) -> bool:
    """The report half (the other half fits): a stable hash of the question."""
    return hashlib.sha256(f"{set_name}/{qid}".encode()).digest()[0] % 2 == 1


def _asks(other: str, name: str) -> bool:
    """Whether ``other``'s questions are negatives of set ``name``: not between sets of the same
    man pages (they answer each other), and the cross-lingual sets' one-line descriptions only of
    each other and of themselves (the base curves keep the questions they were first fitted on)."""
    if {name, other} <= MAN_PAGE_SETS:
        return False
    return other not in CROSSING_SETS or name in CROSSING_SETS


def negatives(name: str, datasets: dict[str, Dataset]) -> list[tuple[str, str]]:
    """(qid, question) of every question ``name``'s notes do not answer."""
    written = [
        *(("en-everyday", q) for q in EVERYDAY_EN),
        *(("en-near", q) for q in NEAR_EN),
        *(("zh-everyday", q) for q in EVERYDAY_ZH),
        *(("zh-near", q) for q in NEAR_ZH),
    ]
    answered = ANSWERED_IN.get(name, frozenset())
    out = [(f"{kind}-{i}", q) for i, (kind, q) in enumerate(written) if q not in answered]
    for other, dataset in datasets.items():
        if other == name or not _asks(other, name):
            continue
        for q in dataset.queries:
            qid = f"{other}:{q.qid}"
            if (name, qid) not in CROSS_ANSWERED:
                out.append((qid, q.query))
    return out


async def collect(names: Sequence[str], workdir: Path) -> list[Row]:
    """Search every set with its questions and its negatives; the top hits' signals."""
    from memsearch import MemSearch
    from memsearch.engine.multilingual import leg_embedder
    from memsearch.engine.relevance import QueryTerms, lexical_match
    from memsearch.engine.timeframe import search_window
    from memsearch.store.weights import MULTILINGUAL, text_script

    datasets = {name: ensure_set(name, CACHE_DIR) for name in names}
    rows: list[Row] = []
    for name, dataset in datasets.items():
        crossing = name in CROSSING_SETS
        ms = MemSearch(
            [str(dataset.corpus)],
            milvus_uri=str(workdir / f"{name}.db"),
            collection="rel",
            multilingual=crossing,
        )
        try:
            await ms.index()
            root = dataset.corpus.resolve()
            questions: list[tuple[str, str, tuple[Gold, ...]]] = [
                (q.qid, q.query, q.gold) for q in dataset.queries
            ]
            questions += [(qid, text, ()) for qid, text in negatives(name, datasets)]
            for qid, query, gold in questions:
                hits = await ms.search(query, top_k=TOP)
                text, _ = search_window(query, None, None, time_phrases=True)
                vector = (await ms.embedder.embed_query([text]))[0]
                keys = [h["chunk_hash"] for h in hits]
                sims = ms._search_store().similarity(vector, keys)
                crossed: dict[str, float] = {}
                if crossing:
                    leg_vector = (await leg_embedder(ms).embed_query([text]))[0]
                    crossed = ms._search_store().similarity(leg_vector, keys, MULTILINGUAL)
                terms = QueryTerms.of(text)
                for rank, hit in enumerate(hits, 1):
                    found: Hit = _to_hit(hit, root)
                    rows.append(
                        Row(
                            name,
                            qid,
                            query,
                            bool(gold),
                            terms.cjk,
                            rank,
                            sims.get(hit["chunk_hash"], 0.0),
                            lexical_match(terms, str(hit["content"])),
                            int(any(overlaps(found, g) for g in gold)),
                            found.path,
                            str(hit.get("heading") or ""),
                            " ".join(str(hit["content"]).split())[:160],
                            text,
                            str(hit["content"]),
                            crossed.get(hit["chunk_hash"], -1.0),
                            text_script(str(hit["content"])) != ("cjk" if terms.cjk else "other"),
                        )
                    )
            print(f"  {name}: {len(questions)} questions", file=sys.stderr, flush=True)
        finally:
            await ms.aclose()
    return rows


# --- fitting -----------------------------------------------------------------------------------


def fit_logistic(x: Any, y: Any, l2: float = 1e-3) -> list[float]:
    """Weights (bias first) of a logistic regression, by Newton's method with a small ridge, the
    two classes weighted equally: the curve is the probability at even odds, whatever share of
    answering hits the sets happen to have (so 0.5 is "as likely to answer as not")."""
    import numpy as np

    design = np.hstack([np.ones((len(x), 1)), np.asarray(x, dtype=float)])
    target = np.asarray(y, dtype=float)
    positives = max(1.0, float(target.sum()))
    negatives_ = max(1.0, float(len(target) - target.sum()))
    weight = np.where(target > 0, len(target) / (2 * positives), len(target) / (2 * negatives_))
    w = np.zeros(design.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-(design @ w)))
        grad = design.T @ (weight * (p - target)) + l2 * w
        hess = design.T @ (design * (weight * p * (1 - p))[:, None]) + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return [float(v) for v in w]


def fit(rows: list[Row]) -> dict[str, list[float]]:
    """Curves per script on the fitting half: (bias, similarity, match), and lexical-only ones."""
    curves: dict[str, list[float]] = {}
    for script, cjk in (("en", False), ("zh", True)):
        part = [r for r in rows if r.cjk == cjk and not held_out(r.set, r.qid) and r.set not in CROSSING_SETS]
        curves[script] = fit_logistic([(r.similarity, r.match) for r in part], [r.label for r in part])
        lexical = fit_logistic([(r.match,) for r in part], [r.label for r in part])
        curves[f"{script}-lexical"] = [lexical[0], 0.0, lexical[1]]
    # Across scripts, per question: does the top hit's multilingual similarity tell a question the
    # notes answer from one they do not? (Per hit it hardly can: the other man pages a question
    # finds are near misses, not strangers.)
    tops = [r for r in rows if r.rank == 1 and r.cross and r.crossing >= 0 and not held_out(r.set, r.qid)]
    if tops:
        crossing = fit_logistic([(r.crossing,) for r in tops], [int(r.answerable) for r in tops])
        curves["crossing"] = [crossing[0], crossing[1], 0.0]
    return curves


def scored(
    rows: list[Row], curves: dict[str, Any] | None = None, lexical: bool = False
) -> dict[tuple[str, str], float]:
    """The top hit's relevance of every question (by (set, qid)) under ``curves`` (default: shipped)."""
    from memsearch.engine.relevance import CROSSING, CURVES, Curve

    table = {k: Curve(*v) for k, v in curves.items()} if curves else CURVES
    crossing = table.get("crossing", CROSSING)
    best: dict[tuple[str, str], float] = {}
    for r in rows:
        if r.rank != 1:
            continue
        script = ("zh" if r.cjk else "en") + ("-lexical" if lexical else "")
        found = table[script](r.similarity, r.match, use_similarity=not lexical)
        if r.cross and r.crossing >= 0:
            found = max(found, crossing(r.crossing, 0.0))
        best[(r.set, r.qid)] = found
    return best


def precision_recall(
    rows: list[Row], best: dict[tuple[str, str], float], floor: float, keep: Any
) -> tuple[float, float, int, int]:
    """Precision and recall of "answerable" = top relevance >= ``floor``, over the questions ``keep``
    selects; with the counts of answerable and unanswerable questions."""
    answerable = {(r.set, r.qid): r.answerable for r in rows if r.rank == 1 and keep(r)}
    tp = sum(1 for k, a in answerable.items() if a and best[k] >= floor)
    fp = sum(1 for k, a in answerable.items() if not a and best[k] >= floor)
    positives = sum(1 for a in answerable.values() if a)
    negatives_ = len(answerable) - positives
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / positives if positives else 0.0
    return precision, recall, positives, negatives_


def report(rows: list[Row], floor: float, curves: dict[str, Any] | None = None, lexical: bool = False) -> str:
    """The held-out table: per set and overall, per language of the question (``lexical``: with the
    curves used for an embedding model they were not fitted for, the word match alone)."""
    best = scored(rows, curves, lexical)
    lines = [
        "| set | questions (answerable / not) | precision | recall | F1 |",
        "|---|---|---|---|---|",
    ]
    order = (*CALIBRATION_SETS, *CROSSING_SETS)
    sets = sorted({r.set for r in rows}, key=lambda s: order.index(s) if s in order else 99)
    groups: list[tuple[str, Any]] = [(s, lambda r, s=s: r.set == s) for s in sets]
    groups += [
        ("all, English questions", lambda r: not r.cjk),
        ("all, Chinese questions", lambda r: r.cjk),
        ("**all**", lambda r: True),
    ]
    for label, keep in groups:
        p, rec, pos, neg = precision_recall(
            rows, best, floor, lambda r, keep=keep: held_out(r.set, r.qid) and keep(r)
        )
        f1 = 2 * p * rec / (p + rec) if p + rec else 0.0
        lines.append(f"| {label} | {pos} / {neg} | {p:.3f} | {rec:.3f} | {f1:.3f} |")
    return "\n".join(lines)


def sweep(rows: list[Row], curves: dict[str, Any] | None, half: bool) -> str:
    """Precision / recall / F1 at floors 0.1 .. 0.9 on one half (``half``: the held-out one)."""
    best = scored(rows, curves)
    out = ["| floor | precision | recall | F1 |", "|---|---|---|---|"]
    for floor in [x / 20 for x in range(1, 20)]:
        p, r, _, _ = precision_recall(rows, best, floor, lambda row: held_out(row.set, row.qid) == half)
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        out.append(f"| {floor:.2f} | {p:.3f} | {r:.3f} | {f1:.3f} |")
    return "\n".join(out)


def review(rows: list[Row], curves: dict[str, Any] | None, count: int) -> str:
    """Per set, the negatives whose top hit is most relevant: read them, list the answered ones."""
    best = scored(rows, curves)
    out = []
    for name in sorted({r.set for r in rows}):
        tops = [r for r in rows if r.set == name and r.rank == 1 and not r.answerable]
        tops.sort(key=lambda r: -best[(r.set, r.qid)])
        out.append(f"## {name}")
        for r in tops[:count]:
            out.append(
                f"{best[(r.set, r.qid)]:.3f} sim={r.similarity:.3f} match={r.match:.2f} [{r.qid}] {r.query}"
            )
            out.append(f"      -> {r.source} | {r.heading} | {r.preview}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from memsearch.config.schema import DEFAULT_MIN_RELEVANCE

    parser = argparse.ArgumentParser(
        prog="python -m evaluation.relevance", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--sets", default=",".join((*CALIBRATION_SETS, *CROSSING_SETS)))
    parser.add_argument("--cached", action="store_true", help="reuse the last run's features")
    parser.add_argument("--fit", action="store_true", help="fit the curves on the fitting half")
    parser.add_argument("--review", type=int, default=0, metavar="N", help="list N negatives per set to read")
    parser.add_argument("--floor", type=float, default=DEFAULT_MIN_RELEVANCE)
    args = parser.parse_args(argv)
    names = [n for n in args.sets.split(",") if n]
    if unknown := [n for n in names if n not in SETS]:
        parser.error(f"unknown set(s) {', '.join(unknown)}")
    if args.cached:
        from memsearch.engine.relevance import QueryTerms, lexical_match

        rows = [Row(**r) for r in json.loads(FEATURES.read_text(encoding="utf-8"))]
        rows = [r for r in rows if r.set in names and (":" not in r.qid or _asks(r.qid.split(":")[0], r.set))]
        for r in rows:  # the word match as the code now computes it (the similarity is the store's)
            r.match = lexical_match(QueryTerms.of(r.text), r.content)
    else:
        with tempfile.TemporaryDirectory(prefix="memsearch-relevance-") as workdir:
            rows = asyncio.run(collect(names, Path(workdir)))
        if FEATURES.exists():  # the other sets' rows of an earlier run are kept
            earlier = [Row(**r) for r in json.loads(FEATURES.read_text(encoding="utf-8"))]
            rows = [r for r in earlier if r.set not in names] + rows
        FEATURES.write_text(
            json.dumps([asdict(r) for r in rows], ensure_ascii=False) + "\n", encoding="utf-8"
        )
    curves = fit(rows) if args.fit else None
    if curves:
        print("Fitted curves (bias, similarity, match):")
        for name, w in curves.items():
            print(f"  {name}: ({w[0]:.3f}, {w[1]:.3f}, {w[2]:.3f})")
    if args.review:
        print(review(rows, curves, args.review))
        return 0
    print("\nFitting half, floor sweep:\n\n" + sweep(rows, curves, half=False))
    print("\nHeld-out half, floor sweep:\n\n" + sweep(rows, curves, half=True))
    print(f"\nHeld-out half at the floor {args.floor}:\n\n" + report(rows, args.floor, curves))
    lexical = report(rows, args.floor, curves, lexical=True)
    print(f"\nThe same, word match alone (another embedding model):\n\n{lexical}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
