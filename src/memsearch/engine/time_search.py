"""Search in time: the day of every hit, a search limited to a window of days, recency weighting.

Why no date is stored in the collection: the collection must stay the original memsearch's (it
reads ours and we read its), a stored date goes stale for the unchanged chunks of an edited file
(their chunk IDs do not change, so they are never rewritten), and existing collections have none.
A chunk's day is derived when a search needs it, from what is true now:

- a journal (``YYYY-MM-DD.md``, ``journal.DAY_FILE_RE``) is of the day its name says, and an entry
  of the time its ``### HH:MM`` heading says;
- any other file is of its modification time's local day.

A window becomes a store filter, ``source in [...]`` of the indexed files whose day falls in it
(journals by name, other files by one ``stat`` each), so the hybrid search ranks only chunks of
those days and ``top_k`` is filled from them. A window of more than :data:`MAX_IN_FILTER` files
is searched in parts of at most that many files, each leg's hits of the parts merged by score
before the fusion (``MilvusStore.ranked``): the same ranking as one filter, at any window size.
A window that holds every indexed file needs no filter. The measurements are in docs/time.md.

Recency reweights every candidate of the search before the list is cut to ``top_k``, so the
result does not depend on ``top_k`` either (``memsearch.engine.hybrid_search``).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.engine.hybrid_search import Ranked, hybrid
from memsearch.engine.journal import DAY_FILE_RE, is_journal
from memsearch.engine.timeframe import Window, local_today, parse_day, search_window

if TYPE_CHECKING:
    from memsearch.core import MemSearch

__all__ = ["hit_day", "recency_weight", "sources_in_window", "timed_search"]

#: The most files of one ``source in [...]`` filter: a larger window is searched in parts.
MAX_IN_FILTER = 1000
_ENTRY_TIME = re.compile(r"^(?:Session\s+)?(\d{1,2}:\d{2})$")


def source_day(source: str) -> dt.date | None:
    """The day of an indexed file: a journal's name, else its modification time's local day (None
    when it is gone)."""
    name = os.path.basename(source)
    if DAY_FILE_RE.match(name):
        try:
            return dt.date.fromisoformat(name[:10])
        except ValueError:
            return None
    try:
        return dt.datetime.fromtimestamp(os.stat(source).st_mtime).date()
    except (OSError, ValueError, OverflowError):
        return None


def hit_day(hit: dict[str, Any]) -> tuple[dt.date | None, str]:
    """(day, ``HH:MM`` or "") of a search hit: a journal entry's time is its heading's."""
    day = source_day(str(hit.get("source", "")))
    time = ""
    if is_journal(str(hit.get("source", ""))):
        match = _ENTRY_TIME.match(str(hit.get("heading", "")).strip())
        time = match[1] if match else ""
    return day, time


def sources_in_window(sources: Iterable[str], window: Window) -> list[str]:
    """The files among ``sources`` whose day falls in ``window``: journals by name (ISO days
    compare as strings), other files by one ``stat`` against the window's local midnights."""
    first = window.since.isoformat() if window.since else ""
    last = window.until.isoformat() if window.until else "9999-99-99"
    start, end = window.timestamps()
    kept = []
    for source in sources:
        name = os.path.basename(source)
        if DAY_FILE_RE.match(name):
            if first <= name[:10] <= last:
                kept.append(source)
            continue
        try:
            mtime = os.stat(source).st_mtime
        except OSError:
            continue  # gone: nothing dates it
        if (start is None or mtime >= start) and (end is None or mtime < end):
            kept.append(source)
    return sorted(kept)


def recency_weight(day: dt.date | None, today: dt.date, half_life: float) -> float:
    """``0.5 ** (age / half_life)``, age in days (a hit of today or the future weighs 1, one of no
    known day 1: nothing says it is old)."""
    if day is None or half_life <= 0:
        return 1.0
    age = max((today - day).days, 0)
    return float(0.5 ** (age / half_life))


def _and(*clauses: str) -> str:
    kept = [c for c in clauses if c]
    return " and ".join(f"({c})" for c in kept) if len(kept) > 1 else (kept[0] if kept else "")


def _sources_filter(sources: list[str]) -> str:
    from memsearch.store.filters import escape_filter_value
    from memsearch.store.rows import stored_value

    values = ", ".join(f'"{escape_filter_value(stored_value("source", s))}"' for s in sources)
    return f"source in [{values}]"


async def timed_search(
    ms: MemSearch,
    query: str,
    *,
    top_k: int,
    source_prefix: str | None,
    since: str | dt.date | None,
    until: str | dt.date | None,
    time_phrases: bool,
    recency_half_life: float | None,
    today: str | dt.date | None,
    min_relevance: float | None = None,
) -> list[dict[str, Any]]:
    """``MemSearch.search`` with its time arguments (documented there): the window from
    ``since``/``until`` or the query's time phrase, then the hybrid search, recency weights over
    every candidate, the cut to ``top_k``, dated hits, and each kept hit's relevance (those below
    ``min_relevance`` left out)."""
    from memsearch.store import source_prefix_filter

    # top_k and recency_half_life were checked where the call entered (memsearch.engine.operations).
    day = parse_day(today) if today is not None else local_today()
    text, window = search_window(query, since, until, time_phrases=time_phrases, today=day)
    base = ""
    if source_prefix:
        base = source_prefix_filter(str(Path(source_prefix).expanduser().resolve()))
    half_life = recency_half_life or 0.0
    if window is None:
        ranked = await hybrid(ms, text, wanted=top_k, filters=(base,))
    else:
        ranked = await _in_window(ms, text, window, top_k, base)
        if not ranked.hits and window.phrase:
            # The query's phrase found nothing dated in its window: its words still deserve an
            # answer (hits are marked out of the window, the CLI says so).
            ranked = await hybrid(ms, text, wanted=top_k, filters=(base,))
    hits = ranked.hits
    if half_life:
        for hit in hits:
            hit["score"] = float(hit["score"]) * recency_weight(hit_day(hit)[0], day, half_life)
        hits.sort(key=lambda h: h["score"], reverse=True)  # stable: equal scores keep their order
    hits = hits[:top_k]
    if window is not None or half_life:
        for hit in hits:
            when, time = hit_day(hit)
            hit["date"] = when.isoformat() if when else None
            if time:
                hit["time"] = time
            if window is not None:
                hit["window"] = window.to_dict()
                hit["in_window"] = window.contains(when)
    ranked.add_relevance(text, hits)
    if min_relevance:
        hits = [hit for hit in hits if hit["relevance"] >= min_relevance]
    return hits


async def _in_window(ms: MemSearch, text: str, window: Window, wanted: int, base: str) -> Ranked:
    """The hybrid search over the chunks of ``window``'s days (see the module docstring)."""
    indexed = ms._search_store().indexed_sources()
    sources = sources_in_window(indexed, window)
    if not sources:
        return Ranked([])
    if len(sources) == len(indexed):
        return await hybrid(ms, text, wanted=wanted, filters=(base,))  # every file: no filter
    parts = [sources[i : i + MAX_IN_FILTER] for i in range(0, len(sources), MAX_IN_FILTER)]
    return await hybrid(ms, text, wanted=wanted, filters=[_and(base, _sources_filter(p)) for p in parts])
