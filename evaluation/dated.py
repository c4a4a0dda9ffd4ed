"""The ``dated-journals`` set: synthetic daily journals where topics recur with different decisions.

Why it exists: time-aware recall ("what did we decide last week about the retry policy") can only
be measured on a memory where the same subject comes back on many days with a different answer
each time; a plain search finds all of them equally well, only the day tells them apart.

What it is (built by :func:`build_dated`, a pure function of ``today``):

- :data:`SPAN_DAYS` days of journals ``memory/YYYY-MM-DD.md`` ending ``today``, in the format
  memsearch's capture hooks write (``# date``, ``## Session HH:MM``, ``### HH:MM`` per turn, an
  anchor comment, one bullet per fact). Days hold unrelated chatter (:data:`FILLERS`) and the
  topics' decisions; about 70 of the 100 days have a file.
- Every :class:`~evaluation.dated_topics.Topic` (10 English, 8 Chinese) gets three time-scoped
  questions. For each, a kind of day window is taken from the topic's ``prefer`` list (the first
  three whose windows do not overlap for this ``today``: "last week" and "yesterday" overlap on a
  Monday, "last month" and "yesterday" on the 1st, ...), a day inside the window carries one
  version of the topic, and the other versions go to days outside all three windows. Versions
  are put on their days oldest first, so the story reads in order. The gold of a time-scoped
  question is the one turn in its window; the other versions are the distractors.
- Plain questions (no time phrase) have as gold every version of the topic: all of them answer
  "what is our retry policy", and the check is that time-aware search does not lose them. Six
  of them contain words that look like time but are not a date ("may", "second", 日志, 周期, the
  Sunday maintenance window, the Monday meeting 周一早会).
- Two day-summary questions ("what did we work on the day before yesterday?") whose gold is every
  turn of that day; no topic is put on that day.

The day windows are computed here with plain calendar rules, independently of
``memsearch.engine.timeframe``, so the evaluation checks that module instead of repeating it: weeks run
Monday to Sunday ("last week" is the previous calendar week, also when today is Monday), "last
month" and "in <month>" are whole calendar months, "in <month>" is the latest such month that has
begun (the current one up to today, when today is in it), "N days ago" is that one day.

Dates follow the real clock (the product resolves phrases against today), so the set is rebuilt
when the day changes; the build takes milliseconds.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field

from evaluation.builders import BuiltSet, _Doc
from evaluation.dataset import Gold, Query
from evaluation.dated_topics import DAY_SUMMARY, FILLERS, TOPICS, TRAPS, Topic

#: Days of journals, ending today: enough to hold the month before last whole (at most 92 days back).
SPAN_DAYS = 100
#: Time-scoped questions per topic.
SLOTS = 3

MONTHS_EN = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_ZH_DIGITS = "零一二三四五六七八九十"


def zh_number(n: int) -> str:
    """1..12 in Chinese numerals (十一, 十二)."""
    return _ZH_DIGITS[n] if n <= 10 else "十" + _ZH_DIGITS[n - 10]


@dataclass(frozen=True)
class Window:
    """An inclusive range of days."""

    start: dt.date
    end: dt.date

    def __contains__(self, day: object) -> bool:
        return isinstance(day, dt.date) and self.start <= day <= self.end

    def overlaps(self, other: Window) -> bool:
        return self.start <= other.end and other.start <= self.end

    def days(self) -> list[dt.date]:
        return [self.start + dt.timedelta(n) for n in range((self.end - self.start).days + 1)]


def month_window(year: int, month: int) -> Window:
    first = dt.date(year, month, 1)
    nxt = dt.date(year + (month == 12), month % 12 + 1, 1)
    return Window(first, nxt - dt.timedelta(1))


def months_back(today: dt.date, k: int) -> tuple[int, int]:
    """(year, month) of the calendar month ``k`` months before today's."""
    index = today.year * 12 + today.month - 1 - k
    return index // 12, index % 12 + 1


def named_month(today: dt.date, month: int) -> Window:
    """ "in <month>": the latest such month that has begun, cut at today when it is this month."""
    year = today.year if month <= today.month else today.year - 1
    window = month_window(year, month)
    return Window(window.start, min(window.end, today))


def _monday(day: dt.date) -> dt.date:
    return day - dt.timedelta(day.weekday())


def window(kind: str, today: dt.date) -> Window:
    """The day window of a kind of time phrase (see :data:`KINDS`)."""
    day = dt.timedelta(1)
    if kind == "T0":
        return Window(today, today)
    if kind in {"Y", "D2", "D3", "D4", "D5"}:
        back = today - day * (1 if kind == "Y" else int(kind[1]))
        return Window(back, back)
    if kind == "TW":
        return Window(_monday(today), today)
    if kind == "LW":
        return Window(_monday(today) - 7 * day, _monday(today) - day)
    if kind == "MC":
        return named_month(today, today.month)
    if kind in {"LM", "M1N"}:
        return month_window(*months_back(today, 1))
    if kind == "M2":
        return named_month(today, months_back(today, 2)[1])
    raise KeyError(kind)


def phrase(kind: str, lang: str, today: dt.date) -> str:
    """The words of a kind of time phrase in ``lang`` (month names depend on ``today``)."""
    month = {"MC": today.month, "M1N": months_back(today, 1)[1], "M2": months_back(today, 2)[1]}.get(kind)
    if lang == "zh":
        if kind == "M1N" and month:
            return f"{month}月份"  # digits, the other common spelling
        if month:
            return f"{zh_number(month)}月"
        return KINDS[kind][1]
    if month:
        return f"in {MONTHS_EN[month - 1]}"
    return KINDS[kind][0]


#: Kinds of time phrase: (English, Chinese); month kinds are spelled by :func:`phrase`.
KINDS: dict[str, tuple[str, str]] = {
    "T0": ("today", "今天"),
    "Y": ("yesterday", "昨天"),
    "D2": ("the day before yesterday", "前天"),
    "D3": ("3 days ago", "三天前"),
    "D4": ("four days ago", "4天前"),
    "D5": ("5 days ago", "五天前"),
    "TW": ("this week", "这周"),
    "LW": ("last week", "上周"),
    "MC": ("", ""),  # in <this month> / 十二月
    "LM": ("last month", "上个月"),
    "M1N": ("", ""),  # in <last month's name> / 11月份
    "M2": ("", ""),  # in <the month before last> / 十月
}


def _hash(*parts: object) -> int:
    return int(hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:12], 16)


@dataclass
class Turn:
    """One journal turn: its bullets, and what it is (("topic", key, version) or ("filler", n))."""

    what: tuple[object, ...]
    bullets: tuple[str, ...]
    minute: int  # minutes after midnight
    gold: Gold | None = None


@dataclass
class Slot:
    kind: str
    window: Window
    day: dt.date


@dataclass
class Plan:
    """Where everything goes for one ``today``: topic slots, version days, turns per day."""

    today: dt.date
    slots: dict[str, list[Slot]] = field(default_factory=dict)
    version_days: dict[str, list[dt.date]] = field(default_factory=dict)
    turns: dict[dt.date, list[Turn]] = field(default_factory=dict)

    @property
    def span(self) -> Window:
        return Window(self.today - dt.timedelta(SPAN_DAYS - 1), self.today)

    @property
    def summary_day(self) -> dt.date:
        return window("D2", self.today).start


def _slots(topic: Topic, today: dt.date, span: Window, reserved: dt.date) -> list[Slot]:
    chosen: list[Slot] = []
    for kind in topic.prefer:
        w = window(kind, today)
        if any(w.overlaps(s.window) for s in chosen):
            continue
        days = [d for d in w.days() if d in span and d != reserved]
        if not days:
            continue
        chosen.append(Slot(kind, w, days[_hash(topic.key, kind, today) % len(days)]))
        if len(chosen) == SLOTS:
            return chosen
    raise ValueError(f"topic {topic.key}: fewer than {SLOTS} disjoint windows on {today}")


def plan(today: dt.date) -> Plan:
    """Place every topic version and filler turn for ``today`` (deterministic)."""
    p = Plan(today)
    span, reserved = p.span, p.summary_day
    for topic in TOPICS:
        slots = _slots(topic, today, span, reserved)
        neutral = [d for d in span.days() if d != reserved and not any(d in s.window for s in slots)]
        extra: list[dt.date] = []
        for n in range(len(topic.versions) - SLOTS):
            free = [d for d in neutral if d not in extra]
            extra.append(free[_hash(topic.key, "extra", n, today) % len(free)])
        days = sorted([s.day for s in slots] + extra)
        p.slots[topic.key] = slots
        p.version_days[topic.key] = days
        for version, (day, bullets) in enumerate(zip(days, topic.versions, strict=True)):
            minute = 9 * 60 + _hash(topic.key, version) % (9 * 60)
            p.turns.setdefault(day, []).append(Turn(("topic", topic.key, version), bullets, minute))
    for day in span.days():
        roll = _hash("fill", day) % 10
        count = 2 if day == reserved else (0 if roll < 3 else 1 if roll < 7 else 2)
        used: set[str] = set()
        for n in range(count):
            lang = "zh" if _hash("lang", day, n) % 5 < 2 else "en"
            pool = [t for t in FILLERS[lang] if t not in used]
            text = pool[_hash("text", day, n) % len(pool)]
            used.add(text)
            minute = 8 * 60 + _hash("fill-minute", day, n) % (11 * 60)
            p.turns.setdefault(day, []).append(Turn(("filler", n), (text,), minute))
    return p


def _render_day(day: dt.date, turns: list[Turn]) -> str:
    """One journal file; sets each turn's gold span (``### HH:MM`` line to its last bullet)."""
    path = f"memory/{day.isoformat()}.md"
    doc = _Doc()
    doc.add(f"# {day.isoformat()}")
    last = -1000
    session = 0
    ordered = sorted(turns, key=lambda t: (t.minute, str(t.what)))
    for n, turn in enumerate(ordered):
        minute = max(turn.minute, last + 1)  # distinct stamps within a day
        stamp = f"{minute // 60:02d}:{minute % 60:02d}"
        if minute - last > 90:  # a long pause: a new session
            session += 1
            doc.blank()
            doc.add(f"## Session {stamp}")
        last = minute
        doc.blank()
        start = doc.next_line
        doc.add(f"### {stamp}", f"<!-- session:s{day:%Y%m%d}{session} turn:t{n + 1} -->")
        doc.add(*(f"- {b}" for b in turn.bullets))
        turn.gold = Gold(path, start, doc.next_line - 1)
    return doc.text()


def build_dated(today: dt.date) -> tuple[BuiltSet, dict[str, Window]]:
    """The set for ``today``, and the expected day window of every time-scoped question."""
    p = plan(today)
    built = BuiltSet()
    for day in sorted(p.turns):
        built.files[f"memory/{day.isoformat()}.md"] = _render_day(day, p.turns[day])
    gold_of: dict[tuple[object, ...], Gold] = {}
    for turns in p.turns.values():
        for turn in turns:
            if turn.what[0] == "topic" and turn.gold is not None:
                gold_of[turn.what] = turn.gold
    windows: dict[str, Window] = {}
    time_q: list[Query] = []
    plain_q: list[Query] = []
    by_key = {t.key: t for t in TOPICS}
    for topic in TOPICS:
        days = p.version_days[topic.key]
        for ask, slot in zip(topic.asks, p.slots[topic.key], strict=True):
            version = days.index(slot.day)
            text = ask.format(when=phrase(slot.kind, topic.lang, today))
            qid = f"{topic.key}-{slot.kind}"
            time_q.append(Query(qid, text, f"time-{topic.lang}", (gold_of[("topic", topic.key, version)],)))
            windows[qid] = slot.window
        every = tuple(gold_of[("topic", topic.key, v)] for v in range(len(topic.versions)))
        plain_q.append(Query(f"{topic.key}-plain", topic.plain, f"plain-{topic.lang}", every))
    for n, (key, lang, text) in enumerate(TRAPS, 1):
        every = tuple(gold_of[("topic", key, v)] for v in range(len(by_key[key].versions)))
        plain_q.append(Query(f"{key}-trap{n}", text, f"plain-{lang}", every))
    summary = [t.gold for t in p.turns[p.summary_day] if t.gold is not None]
    for lang, template in DAY_SUMMARY.items():
        qid = f"day-summary-{lang}"
        text = template.format(when=phrase("D2", lang, today))
        time_q.append(Query(qid, text[:1].upper() + text[1:], f"time-{lang}", tuple(summary)))
        windows[qid] = window("D2", today)
    built.queries = time_q + plain_q
    return built, windows
