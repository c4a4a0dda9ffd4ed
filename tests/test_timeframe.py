"""The time phrases and day values (``memsearch.engine.timeframe``), against a fixed today.

Today is Wednesday 2026-12-02 in every case, so each window below is spelled out by hand.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsearch.engine.timeframe import Window, local_today, parse_day, resolve_query, search_window
from memsearch.errors import InvalidDateError

TODAY = dt.date(2026, 12, 2)  # a Wednesday


def d(text: str) -> dt.date:
    return dt.date.fromisoformat(text)


#: query -> (text left to search, since, until, the phrase taken out)
PHRASES = {
    # English
    "decided today about caching": ("decided about caching", "2026-12-02", "2026-12-02", "today"),
    "deploy failures yesterday": ("deploy failures", "2026-12-01", "2026-12-01", "yesterday"),
    "what did we decide last week about the retry policy": (
        "what did we decide about the retry policy", "2026-11-23", "2026-11-29", "last week"),
    "bugs fixed this week": ("bugs fixed", "2026-11-30", "2026-12-06", "this week"),
    "releases last month": ("releases", "2026-11-01", "2026-11-30", "last month"),
    "releases this month": ("releases", "2026-12-01", "2026-12-31", "this month"),
    "what did we ship in October": ("what did we ship", "2026-10-01", "2026-10-31", "in October"),
    "what did we ship in December": ("what did we ship", "2026-12-01", "2026-12-31", "in December"),
    "what did we ship in January": ("what did we ship", "2026-01-01", "2026-01-31", "in January"),
    "the outage this Monday": ("the outage", "2026-11-30", "2026-11-30", "this Monday"),
    "the outage this Wednesday": ("the outage", "2026-12-02", "2026-12-02", "this Wednesday"),
    "the outage last monday": ("the outage", "2026-11-30", "2026-11-30", "last monday"),
    "the outage last wednesday": ("the outage", "2026-11-25", "2026-11-25", "last wednesday"),
    "login bug 3 days ago": ("login bug", "2026-11-29", "2026-11-29", "3 days ago"),
    "login bug two days ago": ("login bug", "2026-11-30", "2026-11-30", "two days ago"),
    "errors in the past 7 days": ("errors", "2026-11-26", "2026-12-02", "in the past 7 days"),
    "errors last 3 days": ("errors", "2026-11-30", "2026-12-02", "last 3 days"),
    "what changed since Monday": ("what changed", "2026-11-30", "2026-12-02", "since Monday"),
    "what changed since yesterday": ("what changed", "2026-12-01", "2026-12-02", "since yesterday"),
    "notes from 2026-11-03": ("notes from", "2026-11-03", "2026-11-03", "2026-11-03"),
    "the Nov 3 incident": ("the incident", "2026-11-03", "2026-11-03", "Nov 3"),
    # Chinese
    "今天的部署": ("部署", "2026-12-02", "2026-12-02", "今天"),
    "昨天导出失败": ("导出失败", "2026-12-01", "2026-12-01", "昨天"),
    "前天导出失败": ("导出失败", "2026-11-30", "2026-11-30", "前天"),
    "上周我们怎么处理的导出失败": ("我们怎么处理的导出失败", "2026-11-23", "2026-11-29", "上周"),
    "本周的发布": ("发布", "2026-11-30", "2026-12-06", "本周"),
    "这周的发布": ("发布", "2026-11-30", "2026-12-06", "这周"),
    "上个月的发布": ("发布", "2026-11-01", "2026-11-30", "上个月"),
    "本月的发布": ("发布", "2026-12-01", "2026-12-31", "本月"),
    "三天前的报错": ("报错", "2026-11-29", "2026-11-29", "三天前"),
    "3天前的报错": ("报错", "2026-11-29", "2026-11-29", "3天前"),
    "最近7天的报错": ("报错", "2026-11-26", "2026-12-02", "最近7天"),
    "最近三天的报错": ("报错", "2026-11-30", "2026-12-02", "最近三天"),
    "十月的迁移": ("迁移", "2026-10-01", "2026-10-31", "十月"),
    "10月的迁移": ("迁移", "2026-10-01", "2026-10-31", "10月"),
    "十二月的迁移": ("迁移", "2026-12-01", "2026-12-31", "十二月"),
    "上周一的会议": ("会议", "2026-11-23", "2026-11-23", "上周一"),
    "上上周的会议": ("会议", "2026-11-16", "2026-11-22", "上上周"),
    "上上个月的发布": ("发布", "2026-10-01", "2026-10-31", "上上个月"),
    "10月3日的事故": ("事故", "2026-10-03", "2026-10-03", "10月3日"),
    "自周一以来的改动": ("改动", "2026-11-30", "2026-12-02", "自周一以来"),
}  # fmt: skip


@pytest.mark.parametrize("query", list(PHRASES))
def test_each_phrase_gives_its_window_and_leaves_the_rest(query: str) -> None:
    text, since, until, phrase = PHRASES[query]
    assert resolve_query(query, TODAY) == (text, Window(d(since), d(until), phrase))


@pytest.mark.parametrize(
    "query",
    [
        "redis connection timeout",
        "订单导出失败",
        "may I ask about the monthly report",
        "weekly sync notes",
        "the sunday-school schedule parser",
        "十三月",
        "",
        # a weekday alone recurs: a window would hide the answer (only "since Monday" reads it)
        "Do DB migrations run in the Sunday night maintenance window?",
        "deploys happen on Monday",
        "值班交接是在周一早会上做吗？",
    ],
)
def test_a_query_without_a_time_phrase_is_untouched(query: str) -> None:
    assert resolve_query(query, TODAY) == (query, None)


def test_a_query_that_is_only_a_phrase_keeps_its_words() -> None:
    # nothing else to search for: the words stay, the window applies
    assert resolve_query("yesterday", TODAY) == (
        "yesterday",
        Window(d("2026-12-01"), d("2026-12-01"), "yesterday"),
    )


def test_in_october_in_january_takes_last_year() -> None:
    jan = dt.date(2027, 1, 15)
    assert resolve_query("in October", jan)[1] == Window(d("2026-10-01"), d("2026-10-31"), "in October")
    assert resolve_query("last month", jan)[1] == Window(d("2026-12-01"), d("2026-12-31"), "last month")
    assert resolve_query("上周", dt.date(2027, 1, 1))[1] == Window(d("2026-12-21"), d("2026-12-27"), "上周")


@pytest.mark.parametrize(
    ("value", "since", "until"),
    [
        ("2026-11-03", "2026-11-03", "2026-11-03"),
        ("2026/11/3", "2026-11-03", "2026-11-03"),
        ("7d", "2026-11-25", "2026-11-25"),
        ("2w", "2026-11-18", "2026-11-18"),
        ("1m", "2026-11-02", "2026-11-02"),
        ("today", "2026-12-02", "2026-12-02"),
        ("yesterday", "2026-12-01", "2026-12-01"),
        ("last monday", "2026-11-30", "2026-11-30"),
        ("Monday", "2026-11-30", "2026-11-30"),
        ("last week", "2026-11-23", "2026-11-29"),
        ("3 weeks ago", "2026-11-09", "2026-11-15"),
        ("Nov 3", "2026-11-03", "2026-11-03"),
        ("3 Nov", "2026-11-03", "2026-11-03"),
        ("October", "2026-10-01", "2026-10-31"),
        ("昨天", "2026-12-01", "2026-12-01"),
        ("三天前", "2026-11-29", "2026-11-29"),
        ("上周", "2026-11-23", "2026-11-29"),
    ],
)
def test_parse_day(value: str, since: str, until: str) -> None:
    assert parse_day(value, TODAY) == d(since)
    assert parse_day(value, TODAY, end=True) == d(until)


def test_parse_day_takes_dates_and_datetimes() -> None:
    assert parse_day(dt.date(2026, 1, 2), TODAY) == dt.date(2026, 1, 2)
    assert parse_day(dt.datetime(2026, 1, 2, 23, 59), TODAY) == dt.date(2026, 1, 2)


@pytest.mark.parametrize("value", ["", "soon", "2026-13-01", "2026-02-30", "Feb 30", "next week", "7x"])
def test_a_bad_day_is_one_error_with_the_forms(value: str) -> None:
    with pytest.raises(InvalidDateError) as caught:
        parse_day(value, TODAY)
    assert "YYYY-MM-DD" in caught.value.one_line()
    assert caught.value.exit_code == 2


def test_explicit_bounds_win_over_phrases_and_are_checked() -> None:
    text, window = search_window("what broke yesterday", "2026-11-01", None, today=TODAY)
    assert (text, window) == ("what broke yesterday", Window(d("2026-11-01"), None))
    assert search_window("what broke yesterday", time_phrases=False, today=TODAY) == (
        "what broke yesterday",
        None,
    )
    with pytest.raises(InvalidDateError, match="after"):
        search_window("x", "2026-12-01", "2026-11-01", today=TODAY)


def test_window_contains_and_timestamps() -> None:
    window = Window(d("2026-11-30"), d("2026-12-01"))
    assert window.contains(d("2026-11-30")) and window.contains(d("2026-12-01"))
    assert not window.contains(d("2026-12-02")) and not window.contains(None)
    start, end = window.timestamps()
    assert start is not None and end is not None and end - start == pytest.approx(2 * 86400, abs=3600)
    assert str(window) == "2026-11-30..2026-12-01"
    assert Window(None, d("2026-12-01")).to_dict() == {"since": None, "until": "2026-12-01", "phrase": ""}


def test_today_is_the_local_date_of_tz() -> None:
    """The journals are named by local day: ``TZ`` decides what today is."""
    from zoneinfo import ZoneInfo

    code = "from memsearch.engine.timeframe import local_today; print(local_today())"
    seen = {}
    for zone in ("Pacific/Kiritimati", "Pacific/Pago_Pago"):  # UTC+14, UTC-11: never the same day
        env = {**os.environ, "TZ": zone}
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        seen[zone] = d(run.stdout.strip())
        assert seen[zone] == dt.datetime.now(ZoneInfo(zone)).date()
    assert seen["Pacific/Kiritimati"] > seen["Pacific/Pago_Pago"]
    assert local_today() == dt.date.today()


def test_the_day_of_a_hit_and_its_recency_weight(tmp_path: Path) -> None:
    from memsearch.engine.time_search import hit_day, recency_weight, sources_in_window

    journal = tmp_path / "2026-11-24.md"
    journal.write_text("### 09:10\n- x\n", encoding="utf-8")
    note = tmp_path / "note.md"
    note.write_text("# n\n", encoding="utf-8")
    noon = dt.datetime(2026, 10, 15, 12).timestamp()
    os.utime(note, (noon, noon))
    assert hit_day({"source": str(journal), "heading": "09:10"}) == (d("2026-11-24"), "09:10")
    assert hit_day({"source": str(journal), "heading": "Session 14:00"}) == (d("2026-11-24"), "14:00")
    assert hit_day({"source": str(note), "heading": "n"}) == (d("2026-10-15"), "")
    assert hit_day({"source": str(tmp_path / "gone.md"), "heading": ""}) == (None, "")
    sources = [str(journal), str(note), str(tmp_path / "gone.md")]
    assert sources_in_window(sources, Window(d("2026-11-01"), None)) == [str(journal)]
    assert sources_in_window(sources, Window(None, d("2026-10-15"))) == [str(note)]
    assert sources_in_window(sources, Window(d("2026-10-16"), d("2026-11-23"))) == []
    assert recency_weight(d("2026-12-02"), TODAY, 7) == 1.0
    assert recency_weight(d("2026-11-25"), TODAY, 7) == 0.5
    assert recency_weight(d("2026-11-18"), TODAY, 7) == 0.25
    assert recency_weight(None, TODAY, 7) == 1.0 and recency_weight(d("2027-01-01"), TODAY, 7) == 1.0


def test_the_service_is_sent_time_arguments_only_when_they_matter() -> None:
    """A plain search is the request it always was (a service of an older install answers it);
    days cross as the caller's ISO days."""
    from memsearch.engine.operations import OPERATIONS

    search = OPERATIONS["search"]
    assert search.outbound is not None

    def _time_args(query, since, until, time_phrases, recency_half_life, today):  # type: ignore[no-untyped-def]
        """What the search request carries beyond the query, top_k and the source prefix."""
        args = {"query": query, "top_k": 5, "source_prefix": None, "since": since, "until": until}
        args.update(time_phrases=time_phrases, recency_half_life=recency_half_life, today=today)
        args["min_relevance"] = None  # (sent only when set: tests/test_relevance.py)
        sent = search.outbound(args)
        assert {k: sent.pop(k) for k in ("query", "top_k", "source_prefix")} == {
            "query": query,
            "top_k": 5,
            "source_prefix": None,
        }
        return sent

    assert _time_args("redis connection timeout", None, None, True, None, None) == {}
    assert _time_args("redis connection timeout", None, None, False, None, None) == {}
    assert _time_args("what broke yesterday", None, None, True, None, TODAY) == {
        "time_phrases": True,
        "today": "2026-12-02",
    }
    assert _time_args("what broke yesterday", None, None, False, None, TODAY)["time_phrases"] is False
    assert _time_args("x", "7d", dt.datetime(2026, 12, 1, 8), True, 0, TODAY) == {
        "since": "2026-11-25",
        "until": "2026-12-01",
        "today": "2026-12-02",
    }
    assert _time_args("x", None, None, True, 14.0, TODAY) == {
        "recency_half_life": 14.0,
        "today": "2026-12-02",
    }
    with pytest.raises(InvalidDateError):
        _time_args("x", "someday", None, True, None, TODAY)
