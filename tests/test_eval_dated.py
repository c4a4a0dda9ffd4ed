"""The ``dated-journals`` evaluation set: its generator (deterministic, 100 days, gold spans on the
right turns, calendar edge cases for fixed days) and one run through ``MemSearch`` with the hash
embedder on a real Milvus Lite store. No model is needed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root holds evaluation/

from evaluation import builders, dated
from evaluation.dated import SPAN_DAYS, Window, build_dated, phrase, plan, window
from evaluation.dated_run import PLAIN, TIME_AWARE, StaleSetError, _span, dated_configs, run_dated
from evaluation.dated_topics import FILLERS, TOPICS

D = dt.date
WEDNESDAY = D(2026, 12, 2)
MONDAY = D(2026, 11, 30)
FIRST = D(2026, 12, 1)


def _gold_text(files: dict[str, str], gold: object) -> list[str]:
    lines = files[gold.path].split("\n")  # type: ignore[attr-defined]
    return lines[gold.start_line - 1 : gold.end_line]  # type: ignore[attr-defined]


def _day_of(path: str) -> dt.date:
    return D.fromisoformat(Path(path).stem)


def test_the_generator_is_deterministic_and_sized() -> None:
    a, wa = build_dated(WEDNESDAY)
    b, wb = build_dated(WEDNESDAY)
    assert a.files == b.files and a.queries == b.queries and wa == wb
    assert build_dated(D(2026, 12, 3))[0].files != a.files  # dates follow today
    cats = {
        c: sum(q.category == c for q in a.queries) for c in ("time-en", "time-zh", "plain-en", "plain-zh")
    }
    assert cats["time-en"] + cats["time-zh"] >= 40 and cats["plain-en"] + cats["plain-zh"] >= 20
    assert all(n >= 10 for n in cats.values())
    days = sorted(_day_of(p) for p in a.files)
    assert len(days) >= 60 and days[-1] == WEDNESDAY and days[0] >= WEDNESDAY - dt.timedelta(SPAN_DAYS - 1)
    assert all(p.startswith("memory/") and p.endswith(".md") for p in a.files)


@pytest.mark.parametrize("offset", range(0, 731, 7))
def test_every_today_over_two_years_gives_a_consistent_set(offset: int) -> None:
    # Every weekday and every day of the month comes up (a step of 7 days over 731 days).
    today = D(2026, 1, 1) + dt.timedelta(offset + offset // 7 % 7)
    built, windows = build_dated(today)
    assert len(built.files) >= 60
    versions = {t.key: t.versions for t in TOPICS}
    turns = plan(today).turns
    for q in built.queries:
        key = q.qid.rsplit("-", 1)[0]
        if q.qid in windows and not q.qid.startswith("day-summary"):
            # One gold turn, in the window; every other version of the topic outside it.
            (gold,) = q.gold
            assert _day_of(gold.path) in windows[q.qid]
            body = [line[2:] for line in _gold_text(built.files, gold) if line.startswith("- ")]
            version = [v for v in versions[key] if list(v) == body]
            assert len(version) == 1, (q.qid, body)
            topic_days = [d for d, day in turns.items() for t in day if t.what[:2] == ("topic", key)]
            assert sum(d in windows[q.qid] for d in topic_days) == 1
        elif q.category.startswith("plain-"):
            assert len(q.gold) == len(versions[key])


def test_gold_spans_are_whole_turns() -> None:
    built, _ = build_dated(WEDNESDAY)
    for q in built.queries:
        for gold in q.gold:
            lines = _gold_text(built.files, gold)
            assert lines[0].startswith("### ") and lines[1].startswith("<!-- session:")
            assert all(line.startswith("- ") for line in lines[2:]) and len(lines) >= 3
            after = built.files[gold.path].split("\n")[gold.end_line : gold.end_line + 1]
            assert after in ([], [""])  # the turn ends there


def test_journals_are_in_the_hook_format() -> None:
    built, _ = build_dated(WEDNESDAY)
    text = built.files["memory/2026-11-30.md"]
    lines = text.splitlines()
    assert lines[0] == "# 2026-11-30" and lines[2].startswith("## Session ")
    assert any(line.startswith("### ") for line in lines)
    assert all(not line or line[0] in "#<-" for line in lines)


def test_calendar_windows_by_hand() -> None:
    w = lambda kind, today: (window(kind, today).start, window(kind, today).end)  # noqa: E731
    # Wednesday, December 2nd 2026.
    assert w("Y", WEDNESDAY) == (D(2026, 12, 1),) * 2
    assert w("D3", WEDNESDAY) == (D(2026, 11, 29),) * 2
    assert w("TW", WEDNESDAY) == (D(2026, 11, 30), WEDNESDAY)
    assert w("LW", WEDNESDAY) == (D(2026, 11, 23), D(2026, 11, 29))
    assert w("LM", WEDNESDAY) == (D(2026, 11, 1), D(2026, 11, 30))
    assert w("M2", WEDNESDAY) == (D(2026, 10, 1), D(2026, 10, 31))
    assert w("MC", WEDNESDAY) == (D(2026, 12, 1), WEDNESDAY)  # "in December" on December 2nd
    # Monday: last week is the previous Monday..Sunday, and yesterday is its last day.
    assert w("LW", MONDAY) == (D(2026, 11, 23), D(2026, 11, 29))
    assert w("TW", MONDAY) == (MONDAY, MONDAY)
    assert window("Y", MONDAY).overlaps(window("LW", MONDAY))
    # Sunday: this week runs from Monday to today.
    assert w("TW", D(2026, 11, 29)) == (D(2026, 11, 23), D(2026, 11, 29))
    # The 1st of a month: yesterday is in last month.
    assert window("Y", FIRST).overlaps(window("LM", FIRST))
    # January: last month and the month before last are in the previous year.
    jan = D(2027, 1, 10)
    assert w("LM", jan) == (D(2026, 12, 1), D(2026, 12, 31))
    assert w("M2", jan) == (D(2026, 11, 1), D(2026, 11, 30))
    # "in October" on October 15th is this October, up to today; in September it is last year's.
    assert dated.named_month(D(2026, 10, 15), 10) == Window(D(2026, 10, 1), D(2026, 10, 15))
    assert dated.named_month(D(2026, 9, 15), 10) == Window(D(2025, 10, 1), D(2025, 10, 31))
    # February of a leap year.
    assert dated.month_window(2028, 2).end == D(2028, 2, 29)


def test_phrases_in_both_languages() -> None:
    assert phrase("M2", "en", WEDNESDAY) == "in October"
    assert phrase("M2", "zh", WEDNESDAY) == "十月"
    assert phrase("MC", "en", WEDNESDAY) == "in December"
    assert phrase("MC", "zh", WEDNESDAY) == "十二月"
    assert phrase("M1N", "zh", WEDNESDAY) == "11月份"
    assert phrase("LW", "zh", WEDNESDAY) == "上周" and phrase("D3", "zh", WEDNESDAY) == "三天前"
    assert phrase("M2", "en", D(2027, 1, 10)) == "in November"


def test_overlapping_windows_never_share_a_topic() -> None:
    # On a Monday "last week" contains yesterday, so the retry topic (last week, then yesterday)
    # takes its third question from further down its list.
    kinds = [s.kind for s in plan(MONDAY).slots["retry"]]
    assert kinds == ["M2", "LW", "T0"]
    assert [s.kind for s in plan(WEDNESDAY).slots["retry"]] == ["M2", "LW", "Y"]
    for today in (MONDAY, FIRST, D(2027, 1, 1), D(2027, 3, 1)):
        for slots in plan(today).slots.values():
            assert not any(a.window.overlaps(b.window) for a in slots for b in slots if a is not b)


def test_the_day_summary_holds_only_chatter() -> None:
    built, windows = build_dated(WEDNESDAY)
    (q,) = [q for q in built.queries if q.qid == "day-summary-en"]
    assert q.query == "What did we work on the day before yesterday?"
    assert {g.path for g in q.gold} == {"memory/2026-11-30.md"} and len(q.gold) == 2
    fillers = {t for pool in FILLERS.values() for t in pool}
    for gold in q.gold:
        assert _gold_text(built.files, gold)[2][2:] in fillers
    assert windows["day-summary-zh"] == Window(D(2026, 11, 30), D(2026, 11, 30))


def test_ensure_set_rebuilds_when_the_day_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = builders.SETS["dated-journals"]
    assert spec.runner == "memsearch"
    day = ["2026-12-02"]
    monkeypatch.setitem(builders.SETS, spec.name, dataclasses.replace(spec, stamp=lambda: day[0]))
    first = builders.ensure_set(spec.name, tmp_path)
    meta = json.loads((first.root / "meta.json").read_text())
    assert meta["stamp"] == "2026-12-02" and meta["queries"] == len(first.queries)
    (first.corpus / "marker.md").write_text("x")
    builders.ensure_set(spec.name, tmp_path)
    assert (first.corpus / "marker.md").exists()  # same day: kept
    day[0] = "2026-12-03"
    builders.ensure_set(spec.name, tmp_path)
    assert not (first.corpus / "marker.md").exists()  # a new day: rebuilt


def test_configurations_follow_what_search_accepts() -> None:
    async def old(query: str, *, top_k: int = 10, source_prefix: str | None = None) -> list[object]:
        return []

    async def new(
        query: str, *, top_k: int = 10, time_phrases: bool = True, recency_half_life: float | None = None
    ) -> list[object]:
        return []

    rows, note = dated_configs(old)
    assert [r.name for r in rows] == [PLAIN] and "time_phrases" in note
    rows, note = dated_configs(new)
    assert [r.name for r in rows][:2] == [PLAIN, TIME_AWARE] and len(rows) == 3 and not note
    assert rows[0].kwargs == {"time_phrases": False} and rows[2].kwargs == {"recency_half_life": 30.0}


def test_resolved_windows_are_cut_at_today() -> None:
    class W:
        def __init__(self, since: dt.date | None, until: dt.date | None) -> None:
            self.since, self.until = since, until

    assert _span(None, WEDNESDAY) is None
    assert _span(W(D(2026, 12, 1), D(2026, 12, 31)), WEDNESDAY) == (D(2026, 12, 1), WEDNESDAY)
    assert _span((W(D(2026, 10, 1), D(2026, 10, 31)), "rest"), WEDNESDAY) == (D(2026, 10, 1), D(2026, 10, 31))


async def test_a_run_through_memsearch(tmp_path: Path) -> None:
    data = builders.ensure_set("dated-journals", tmp_path / "cache")
    results, _ = await run_dated(data, tmp_path / "work", provider="hash")
    plain = results[0]
    assert plain.config.name == PLAIN and set(plain.per_query) == {q.qid for q in data.queries}
    assert plain.chunks > 150
    assert plain.summary["plain-en"]["mrr"] > 0.5  # the topics are found at all
    if len(results) > 1:  # time-aware search present: it must find the day's entry more often
        aware = results[1]
        assert aware.summary["time-en"]["recall@1"] > plain.summary["time-en"]["recall@1"]


async def test_a_set_built_for_another_day_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = builders.SETS["dated-journals"]
    monkeypatch.setitem(builders.SETS, spec.name, dataclasses.replace(spec, stamp=lambda: "2020-01-01"))
    data = builders.ensure_set(spec.name, tmp_path / "cache")
    with pytest.raises(StaleSetError, match="built for 2020-01-01"):
        await run_dated(data, tmp_path / "work", provider="hash")
