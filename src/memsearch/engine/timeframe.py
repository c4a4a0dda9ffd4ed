"""Days for memory: the window of days a search is limited to, from ``--since``/``--until`` values
and from time phrases inside a query, in English and Chinese.

Why a table of our own instead of a date-parsing library: the phrases must be *found* inside a
free query ("what did we decide last week about the retry policy", "上周我们怎么处理的导出失败")
and *removed* from the text that is embedded and BM25-searched, and each one names a window (last
week is the previous Monday..Sunday, "in October" the whole month), not a point. A library parses
a string that is all date; it neither finds a phrase in a sentence nor knows its span. One table
answers both ``--since`` values and query phrases, so the two always agree, and it costs nothing
at start-up (dateparser 1.x would cost an import and a slow first parse on every hook and CLI
search, docs/scaling.md; four more dependencies, and no Chinese numerals such as 三天前). See docs/time.md.

Everything is resolved against ``today``, the local date of the caller (``TZ`` respected): the
journals are named by local day.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from memsearch.errors import InvalidDateError

__all__ = ["Window", "local_today", "parse_day", "resolve_query", "search_window"]

#: What ``--since``/``--until`` accept, for error hints.
DAY_FORMS = "YYYY-MM-DD, 7d, 2w, 3m, today, yesterday, last monday, 3 days ago, Nov 3, 昨天, 三天前"


@dataclass(frozen=True)
class Window:
    """Inclusive local days ``since..until`` (either end open when None); ``phrase`` is the query's
    words it came from ("" for explicit bounds)."""

    since: dt.date | None = None
    until: dt.date | None = None
    phrase: str = ""

    def contains(self, day: dt.date | None) -> bool:
        if day is None:
            return False
        return (self.since is None or day >= self.since) and (self.until is None or day <= self.until)

    def timestamps(self) -> tuple[float | None, float | None]:
        """``[start, end)`` as epoch seconds of local midnights (for file modification times); None
        for an open end. A window may reach the calendar's ends (``--until 9999-12-31``): an end
        the platform's clock cannot name is infinite, never an error."""
        start = _midnight(self.since) if self.since else None
        end = None
        if self.until and self.until < dt.date.max:  # the day after 9999-12-31 is no day: open
            end = _midnight(self.until + dt.timedelta(days=1))
        return start, end

    def to_dict(self) -> dict[str, str | None]:
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "phrase": self.phrase,
        }

    def __str__(self) -> str:
        first = self.since.isoformat() if self.since else "…"
        last = self.until.isoformat() if self.until else "…"
        return first if first == last else f"{first}..{last}"


def _midnight(day: dt.date) -> float:
    """The local midnight starting ``day``, in epoch seconds; minus or plus infinity for a day
    before or after what ``mktime`` can express (year 1 in a zone east of UTC, far years on a
    32-bit clock): every file time then falls on the same side of it as of the day itself."""
    try:
        return dt.datetime.combine(day, dt.time()).timestamp()
    except (OverflowError, ValueError, OSError):
        return -math.inf if day.year < 1970 else math.inf


def local_today() -> dt.date:
    """Today in the local time zone (``TZ`` respected), the day the journals are named by."""
    return dt.date.today()


# --- calendar helpers --------------------------------------------------------------------------


def _day(day: dt.date) -> Window:
    return Window(day, day)


def _week_of(day: dt.date) -> Window:
    monday = day - dt.timedelta(days=day.weekday())
    return Window(monday, monday + dt.timedelta(days=6))


def _month(year: int, month: int) -> Window:
    return Window(dt.date(year, month, 1), dt.date(year, month, calendar.monthrange(year, month)[1]))


def _month_back(day: dt.date, n: int) -> tuple[int, int]:
    """(year, month) ``n`` months before ``day``'s; OverflowError outside the calendar's years, as
    ``date`` arithmetic raises (every day out of range is an OverflowError here: ``parse_day``
    and the phrase table tell it from a malformed day that way)."""
    index = day.year * 12 + day.month - 1 - n
    year, month = index // 12, index % 12 + 1
    if not dt.MINYEAR <= year <= dt.MAXYEAR:
        raise OverflowError("date value out of range")
    return year, month


def _months_back(today: dt.date, n: int) -> Window:
    return _month(*_month_back(today, n))


def _shift_months(day: dt.date, n: int) -> dt.date:
    """The same day ``n`` months earlier (the month's last day when it has fewer days)."""
    year, month = _month_back(day, n)
    return dt.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _recent_month(today: dt.date, month: int, year: int | None = None) -> Window:
    """The most recent ``month`` not in the future (or of ``year``)."""
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    return _month(year, month)


def _weekday(today: dt.date, weekday: int, strictly_before: bool) -> dt.date:
    back = (today.weekday() - weekday) % 7
    if back == 0 and strictly_before:
        back = 7
    return today - dt.timedelta(days=back)


def _recent_date(today: dt.date, month: int, day: int, year: int | None = None) -> dt.date:
    """``month``/``day`` of ``year``, else of the most recent year where it is not in the future."""
    try:
        if year is not None:
            return dt.date(year, month, day)
        when = dt.date(today.year, month, day)
        return when if when <= today else dt.date(today.year - 1, month, day)
    except ValueError:
        raise InvalidDateError(f"no such day: {month}/{day}", hint=f"use one of: {DAY_FORMS}") from None


def _last_days(today: dt.date, days: int) -> Window:
    return Window(today - dt.timedelta(days=max(days, 1) - 1), today)


# --- numbers and names -------------------------------------------------------------------------

_EN_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_ZH_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}


def _number(text: str) -> int:
    """``12``, ``twelve``, ``十二``, ``二十三``, ``两`` as an int."""
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    if text in _EN_NUMBERS:
        return _EN_NUMBERS[text]
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)
    value = 0
    for ch in text:
        value = value * 10 + _ZH_DIGITS[ch]
    return value


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_WEEKDAY_ABBR = {
    "mon": 0,
    "tue": 1,
    "tues": 1,
    "wed": 2,
    "thu": 3,
    "thur": 3,
    "thurs": 3,
    "fri": 4,
    "sat": 5,
    "sun": 6,
}
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_UNITS = {"day": "d", "days": "d", "week": "w", "weeks": "w", "month": "m", "months": "m"}

_N_EN = r"(\d{1,4}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_N_ZH = r"(\d{1,4}|[零〇一二两三四五六七八九十]{1,3})"
_WD = "(" + "|".join(calendar.day_name).lower() + ")"
_MON = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + ")"
_ZH_WEEK = r"(?:周|星期|礼拜)"


def _ago(today: dt.date, n: int, unit: str) -> Window:
    """The day, week or month ``n`` units before ``today``."""
    if unit == "d":
        return _day(today - dt.timedelta(days=n))
    if unit == "w":
        return _week_of(today - dt.timedelta(weeks=n))
    return _months_back(today, n)


def _past(today: dt.date, n: int, unit: str) -> Window:
    """The last ``n`` units up to and including today."""
    days = {"d": n, "w": 7 * n}.get(unit)
    if days is not None:
        return _last_days(today, days)
    return Window(_shift_months(today, n) + dt.timedelta(days=1), today)


# --- the phrase table --------------------------------------------------------------------------

Rule = Callable[["re.Match[str]", dt.date], Window]

#: Point phrases (a day, week or month) that may follow "since"/"自"/"从", and stand alone.
_POINTS: list[tuple[str, Rule]] = [
    (r"(?:the\s+)?day\s+before\s+yesterday", lambda m, t: _day(t - dt.timedelta(days=2))),
    (r"today|tonight|this\s+morning", lambda m, t: _day(t)),
    (r"yesterday|last\s+night", lambda m, t: _day(t - dt.timedelta(days=1))),
    (r"(?:this|current)\s+week", lambda m, t: _week_of(t)),
    (r"(?:last|previous)\s+week", lambda m, t: _week_of(t - dt.timedelta(weeks=1))),
    (r"(?:the\s+)?past\s+week", lambda m, t: _last_days(t, 7)),
    (r"this\s+month", lambda m, t: _months_back(t, 0)),
    (r"(?:last|previous)\s+month", lambda m, t: _months_back(t, 1)),
    (r"(?:the\s+)?past\s+month", lambda m, t: _last_days(t, 30)),
    (rf"last\s+{_WD}", lambda m, t: _day(_weekday(t, _WEEKDAYS[m.group(1).lower()], True))),
    (rf"this\s+{_WD}", lambda m, t: _day(_weekday(t, _WEEKDAYS[m.group(1).lower()], False))),
    (rf"{_N_EN}\s+(days?|weeks?|months?)\s+ago", lambda m, t: _ago(t, _number(m[1]), _UNITS[m[2].lower()])),
    (
        rf"(?:(?:in|during|over)\s+)?(?:the\s+)?(?:past|last|previous)\s+{_N_EN}\s+(days|weeks|months)",
        lambda m, t: _past(t, _number(m[1]), _UNITS[m[2].lower()]),
    ),
    (
        rf"(?:in|during)\s+{_MON}(?:\s+(\d{{4}}))?",
        lambda m, t: _recent_month(t, _MONTHS[m[1].lower()], int(m[2]) if m[2] else None),
    ),
    (
        rf"(?:on\s+)?{_MON}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?",
        lambda m, t: _day(_recent_date(t, _MONTHS[m[1].lower()], int(m[2]), int(m[3]) if m[3] else None)),
    ),
    (
        r"(?:on\s+)?(\d{4})-(\d{2})-(\d{2})",
        lambda m, t: _day(_recent_date(t, int(m[2]), int(m[3]), int(m[1]))),
    ),
    # Chinese (no word boundaries: Han text has no spaces)
    (r"大前天", lambda m, t: _day(t - dt.timedelta(days=3))),
    (r"前天", lambda m, t: _day(t - dt.timedelta(days=2))),
    (r"昨天|昨日|昨晚", lambda m, t: _day(t - dt.timedelta(days=1))),
    (r"今天|今日|今晚|今早", lambda m, t: _day(t)),
    (rf"上上(?:个)?{_ZH_WEEK}([一二三四五六日天])?", lambda m, t: _zh_week(t, 2, m[1])),
    (rf"上(?:个)?{_ZH_WEEK}([一二三四五六日天])?", lambda m, t: _zh_week(t, 1, m[1])),
    (rf"(?:本|这个?){_ZH_WEEK}([一二三四五六日天])?", lambda m, t: _zh_week(t, 0, m[1])),
    (r"上上个?月", lambda m, t: _months_back(t, 2)),
    (r"上个?月", lambda m, t: _months_back(t, 1)),
    (r"本月|这个?月", lambda m, t: _months_back(t, 0)),
    (rf"{_N_ZH}(天|日)前", lambda m, t: _ago(t, _number(m[1]), "d")),
    (rf"{_N_ZH}个?(周|星期|礼拜)前", lambda m, t: _ago(t, _number(m[1]), "w")),
    (rf"{_N_ZH}个月前", lambda m, t: _ago(t, _number(m[1]), "m")),
    (rf"(?:最近|过去|近)的?{_N_ZH}(天|日)", lambda m, t: _past(t, _number(m[1]), "d")),
    (rf"(?:最近|过去|近)的?{_N_ZH}个?(周|星期|礼拜)", lambda m, t: _past(t, _number(m[1]), "w")),
    (rf"(?:最近|过去|近)的?{_N_ZH}个月", lambda m, t: _past(t, _number(m[1]), "m")),
    (
        rf"(?:(\d{{4}})年)?{_N_ZH}月{_N_ZH}[日号]",
        lambda m, t: _day(_recent_date(t, _number(m[2]), _number(m[3]), int(m[1]) if m[1] else None)),
    ),
    (rf"(?:(\d{{4}})年)?{_N_ZH}月份?(?![\d日号])", lambda m, t: _zh_month(t, m[2], m[1])),
]


#: A weekday alone ("Monday", "周一") is read only after "since"/"自"/"从": on its own it names a day
#: that recurs as often as a date ("the Sunday maintenance window", "周一早会"), and a wrong window
#: hides the answer, while a missed one only leaves the search unfiltered.
_SINCE_ONLY: list[tuple[str, Rule]] = [
    (rf"(?:last\s+)?{_WD}", lambda m, t: _day(_weekday(t, _WEEKDAYS[m.group(1).lower()], False))),
    (
        rf"(?<![上本这个]){_ZH_WEEK}([一二三四五六日天])",
        lambda m, t: _day(_weekday(t, _ZH_WEEKDAYS[m[1]], False)),
    ),
]


def _zh_week(today: dt.date, back: int, weekday: str | None) -> Window:
    week = _week_of(today - dt.timedelta(weeks=back))
    if weekday is None:
        return week
    assert week.since is not None
    return _day(week.since + dt.timedelta(days=_ZH_WEEKDAYS[weekday]))


def _zh_month(today: dt.date, month: str, year: str | None) -> Window:
    number = _number(month)
    if not 1 <= number <= 12:
        raise ValueError(month)  # not a month: no phrase here
    return _recent_month(today, number, int(year) if year else None)


def _since(point: Rule) -> Rule:
    def rule(m: re.Match[str], today: dt.date) -> Window:
        return Window(point(m, today).since, today)

    return rule


def _compile(pattern: str) -> re.Pattern[str]:
    ascii_only = pattern.isascii()
    # English phrases are whole words; Chinese ones have no boundaries to look for.
    return re.compile(rf"(?<![\w-])(?:{pattern})(?![\w-])" if ascii_only else pattern, re.IGNORECASE)


@functools.cache
def _rules() -> list[tuple[re.Pattern[str], Rule]]:
    """(compiled pattern, rule): every phrase a query may hold, "since X" forms included. Compiled
    on first need (docs/scaling.md): a query without any of :data:`_CUES` never needs them."""
    points = _POINTS + _SINCE_ONLY
    zh = [(p, r) for p, r in points if not p.isascii()]
    rules = [(_compile(p), r) for p, r in _POINTS]
    rules += [(_compile(rf"since\s+(?:{p})"), _since(r)) for p, r in points if p.isascii()]
    rules += [(_compile(rf"(?:自从|自|从)(?:{p})(?:以来|开始|起)?"), _since(r)) for p, r in zh]
    rules += [(_compile(rf"(?:{p})以来"), _since(r)) for p, r in zh]
    return rules


#: Every phrase of the table holds one of these (lowercase) or a digit: a query with none of them
#: holds no phrase, and the table is not compiled for it (most queries; compiling it would be a
#: large part of a routed search, docs/scaling.md).
_CUES = (
    "today", "tonight", "morning", "yesterday", "night", "week", "month", "ago", "since", "day",
    *(name.lower()[:3] for name in calendar.month_name if name),
    "今", "昨", "前", "周", "星期", "礼拜", "月", "天", "日", "以来",
)  # fmt: skip


def _may_hold_phrase(text: str) -> bool:
    lowered = text.lower()
    return any(ch.isdigit() for ch in lowered) or any(cue in lowered for cue in _CUES)


def _find(text: str, today: dt.date) -> tuple[re.Match[str], Window] | None:
    """The longest time phrase in ``text`` (the leftmost of equals) and its window."""
    best: tuple[re.Match[str], Window] | None = None
    if not _may_hold_phrase(text):
        return None
    for pattern, rule in _rules():
        for match in pattern.finditer(text):
            if best is not None and (len(match[0]), -match.start()) <= (len(best[0][0]), -best[0].start()):
                continue
            try:
                window = rule(match, today)
            except (ValueError, KeyError, OverflowError):
                continue  # "十三月", "Feb 30", a week past 9999-12-31: words, not a day
            best = (match, window)
    return best


def resolve_query(query: str, today: dt.date | None = None) -> tuple[str, Window | None]:
    """``(text without its time phrase, the phrase's window)``; ``(query, None)`` when the query
    holds no time phrase (it is then returned untouched). Only the longest phrase is taken; when
    removing it would leave nothing to search for, the text is the query itself."""
    today = today or local_today()
    found = _find(query, today)
    if found is None:
        return query, None
    match, window = found
    rest = query[match.end() :]
    if not match[0].isascii():  # "本月的告警": the 的 belongs to the phrase, not to what is searched
        rest = re.sub(r"^\s*的", "", rest)
    text = query[: match.start()] + " " + rest
    text = " ".join(text.split())
    text = re.sub(r"\s+([?.!,;:，。？！；：])", r"\1", text).strip(" ,;:，；：")
    phrase = " ".join(match[0].split())
    return (text if text.strip() else query), Window(window.since, window.until, phrase)


@functools.cache
def _forms() -> tuple[re.Pattern[str], ...]:
    """The fixed forms of a ``--since``/``--until`` value (compiled when one is first parsed)."""
    return (
        re.compile(r"^(\d{1,5})\s*([dwmy])$", re.IGNORECASE),  # 7d, 2w, 3m, 1y
        re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})$"),  # 2026-11-03, 2026/11/3
        re.compile(rf"^(\d{{1,2}})\s+{_MON}(?:,?\s+(\d{{4}}))?$", re.IGNORECASE),  # 3 Nov 2026
        re.compile(r"^(?:last\s+)?([a-z]+)$", re.IGNORECASE),  # monday, last fri
    )


def parse_day(
    value: str | dt.date | dt.datetime, today: dt.date | None = None, *, end: bool = False
) -> dt.date:
    """One day from ``value``: a ``date``, a ``datetime`` (its local date), an ISO day
    (``2026-11-03``), a relative form (``7d``, ``2w``, ``3m``, ``1y``: that long before today), or a
    phrase (``yesterday``, ``last monday``, ``3 weeks ago``, ``Nov 3``, ``昨天``, ``三天前``). A phrase
    naming several days (``last week``) gives its first day, or its last with ``end`` (for
    ``--until``). Raises InvalidDateError (one line, with the accepted forms) for anything else."""
    if isinstance(value, dt.datetime):
        return (value.astimezone() if value.tzinfo else value).date()
    if isinstance(value, dt.date):
        return value
    today = today or local_today()
    text = " ".join(str(value).split())
    try:
        return _parse_text(text, today, end)
    except OverflowError:  # a well-formed value whose day the calendar does not have
        raise InvalidDateError(
            f"{str(value)!r} is out of range: days run from {dt.date.min} to {dt.date.max}",
            hint="give a nearer day, or leave the bound out to search without it",
        ) from None
    except (ValueError, KeyError):
        pass
    raise InvalidDateError(f"not a day: {str(value)!r}", hint=f"use one of: {DAY_FORMS}")


def _parse_text(text: str, today: dt.date, end: bool) -> dt.date:
    relative_form, iso_form, day_month_form, weekday_form = _forms()
    iso = iso_form.match(text)
    if iso:
        return dt.date(int(iso[1]), int(iso[2]), int(iso[3]))
    relative = relative_form.match(text)
    if relative:
        n, unit = int(relative[1]), relative[2].lower()
        if unit in ("m", "y"):
            return _shift_months(today, n * (12 if unit == "y" else 1))
        return today - dt.timedelta(days=n * (7 if unit == "w" else 1))
    day_month = day_month_form.match(text)
    if day_month:
        given = int(day_month[3]) if day_month[3] else None
        return _recent_date(today, _MONTHS[day_month[2].lower()], int(day_month[1]), given)
    weekday = weekday_form.match(text)
    number = _WEEKDAY_ABBR.get(weekday[1].lower(), _WEEKDAYS.get(weekday[1].lower())) if weekday else None
    if number is not None:
        return _weekday(today, number, text.lower().startswith("last"))
    month = _MONTHS.get(text.lower())
    if month is not None:  # "--since october": the month's first day (--until: its last)
        return _end(_recent_month(today, month), end)
    for pattern, rule in [*_rules(), *((_compile(p), r) for p, r in _SINCE_ONLY)]:
        match = pattern.fullmatch(text)  # a value is all date: "周一" names a day here
        if match:
            return _end(rule(match, today), end)
    raise ValueError(text)


def _end(window: Window, end: bool) -> dt.date:
    day = window.until if end else window.since
    if day is None:
        raise ValueError(window)
    return day


def search_window(
    query: str,
    since: str | dt.date | dt.datetime | None = None,
    until: str | dt.date | dt.datetime | None = None,
    *,
    time_phrases: bool = True,
    today: str | dt.date | None = None,
) -> tuple[str, Window | None]:
    """What a search looks for and in which days: explicit ``since``/``until`` win (the query is
    then searched as written); otherwise, with ``time_phrases``, a phrase in the query is taken out
    of it and gives the window (:func:`resolve_query`). ``(query, None)``: no window."""
    day = parse_day(today) if today is not None else local_today()
    if since is not None or until is not None:
        first = parse_day(since, day) if since is not None else None
        last = parse_day(until, day, end=True) if until is not None else None
        if first is not None and last is not None and first > last:
            raise InvalidDateError(
                f"--since {first.isoformat()} is after --until {last.isoformat()}",
                hint="give the earlier day to --since",
            )
        return query, Window(first, last)
    if not time_phrases:
        return query, None
    return resolve_query(query, day)
