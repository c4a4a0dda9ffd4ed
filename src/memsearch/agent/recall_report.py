"""What memory did, summed from the recall log: the one report ``memsearch stats --recall`` prints
and the console's "What memory did" view draws.

Why one function: the console's charts and the CLI's table must never disagree, so both are
renderings of :func:`report`'s dictionary (the CLI's ``--json-output`` prints it whole). Its keys
``collection``, ``days``, ``logging`` and ``sessions`` are the ones ``stats --recall`` always
printed; ``totals``, ``by_day``, ``by_host`` and ``llm`` add the same events summed per local day
and per host, and the model calls memsearch itself made (turn summaries, maintenance tasks) with
their tokens.

A session's ``consulted`` is over the whole window (a search on Tuesday consults a session that
started on Monday); a day's ``never_consulted`` counts the sessions active that day that were never
consulted in the window, so the days' counts need not add up to the window's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from dataclasses import asdict, dataclass
from typing import Any

from memsearch.agent import recall_log

__all__ = ["Counts", "report"]

#: The recall log's event → the counter it adds one to (tokens and hits are added beside).
_EVENT_COUNTERS = {
    "inject": "injections",
    "search": "searches",
    "expand": "expands",
    "capture": "captures",
    "skip": "skips",
    "llm": "llm_calls",
}


@dataclass
class Counts:
    """The numbers of one day, one host or the whole window."""

    sessions: int = 0
    never_consulted: int = 0
    injections: int = 0
    injected_tokens: int = 0
    searches: int = 0
    hits: int = 0
    expands: int = 0
    captures: int = 0
    #: Injections left out below the relevance floor (``skip`` events).
    skips: int = 0
    llm_calls: int = 0
    llm_prompt_tokens: int = 0
    llm_answer_tokens: int = 0

    def add(self, event: dict[str, Any]) -> None:
        counter = _EVENT_COUNTERS.get(str(event.get("event")))
        if counter is None:
            return
        setattr(self, counter, getattr(self, counter) + 1)
        if counter == "injections":
            self.injected_tokens += _int(event.get("tokens"))
        elif counter == "searches":
            self.hits += _int(event.get("hits"))
        elif counter == "llm_calls":
            self.llm_prompt_tokens += _int(event.get("prompt_tokens"))
            self.llm_answer_tokens += _int(event.get("answer_tokens"))


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _day(event: dict[str, Any]) -> dt.date | None:
    """The local day of an event; None for a time no calendar day holds (a damaged log line)."""
    try:
        return dt.datetime.fromtimestamp(float(event.get("ts", 0))).date()
    except (OverflowError, ValueError, OSError, TypeError):
        return None


def report(cfg: Any, collection: str, days: int, *, now: float | None = None) -> dict[str, Any]:
    """The last ``days`` days (today included) of ``collection``'s recall log: per session (the
    rows of ``stats --recall``), per day, per host, in total, and the model calls memsearch made."""
    now = time.time() if now is None else now
    events = recall_log.read_events(collection, now - days * 86400)
    rows = recall_log.summarise(events)
    by_session = {row.session: row for row in rows}
    today = dt.datetime.fromtimestamp(now).date()
    day_counts = {today - dt.timedelta(days=n): Counts() for n in range(days - 1, -1, -1)}
    host_counts: dict[str, Counts] = {}
    day_sessions: dict[dt.date, set[str]] = {}
    purposes: dict[str, dict[str, Any]] = {}
    totals = Counts()
    for event in events:
        kind = str(event.get("event"))
        row = by_session.get(str(event.get("session") or "") or recall_log.UNKNOWN)
        host = (row.host if row is not None and kind != "llm" else "") or str(event.get("host") or "")
        day = _day(event)
        counted = [host_counts.setdefault(host or "?", Counts())]
        if day is not None and day in day_counts:  # a damaged or future time: its host's, no day's
            counted.append(day_counts[day])
            if row is not None and kind in _EVENT_COUNTERS and kind != "llm":
                day_sessions.setdefault(day, set()).add(row.session)
        for counts in counted:
            counts.add(event)
        totals.add(event)
        if kind == "llm":
            _add_purpose(purposes, event)
    for day, sessions in day_sessions.items():
        day_counts[day].sessions = len(sessions)
        day_counts[day].never_consulted = sum(not by_session[s].consulted for s in sessions)
    for row in rows:
        counts = host_counts.setdefault(row.host or "?", Counts())
        counts.sessions += 1
        counts.never_consulted += not row.consulted
    totals.sessions = len(rows)
    totals.never_consulted = sum(not row.consulted for row in rows)
    return {
        "collection": collection,
        "days": days,
        "logging": recall_log.enabled(cfg),
        "sessions": [row.to_dict() for row in rows],
        "totals": asdict(totals),
        "by_day": [{"day": d.isoformat(), **asdict(c)} for d, c in sorted(day_counts.items())],
        "by_host": [{"host": h, **asdict(c)} for h, c in sorted(host_counts.items())],
        "llm": sorted(purposes.values(), key=lambda p: str(p["purpose"])),
    }


def _add_purpose(purposes: dict[str, dict[str, Any]], event: dict[str, Any]) -> None:
    """One model call added to its purpose's row (``summary``, ``maintenance:<task>``)."""
    purpose = str(event.get("purpose") or "?")
    row = purposes.setdefault(
        purpose,
        {"purpose": purpose, "calls": 0, "failed": 0, "prompt_tokens": 0, "answer_tokens": 0, "seconds": 0.0},
    )
    row["calls"] += 1
    row["failed"] += not event.get("ok", True)
    row["prompt_tokens"] += _int(event.get("prompt_tokens"))
    row["answer_tokens"] += _int(event.get("answer_tokens"))
    with contextlib.suppress(TypeError, ValueError):
        row["seconds"] = round(row["seconds"] + float(event.get("seconds") or 0), 3)
