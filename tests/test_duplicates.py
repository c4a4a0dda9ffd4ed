"""Duplicated and superseded journal entries (memsearch.agent.duplicates), on journals written by
memsearch's own journal writer."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from memsearch.agent.duplicates import find_duplicates, journal_findings, read_entries
from memsearch.engine.journal import JournalEntry, append_entry


def test_read_entries_keeps_each_entrys_bullets() -> None:
    text = (
        "# 2026-11-03\n\n## Session 10:00\n\n### 10:00\n<!-- session:a turn:1 -->\n- one\n- two\n\n"
        "### 11:00\nprose, no bullet\n\n## Memory Compact\n\n- not an entry\n"
    )
    (entry,) = read_entries(text, "j.md", "2026-11-03")
    assert (entry.line, entry.time, entry.bullets) == (5, "10:00", ("one", "two"))


def test_duplicates_and_superseded_entries_are_found_oldest_first(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    day = dt.datetime(2026, 11, 3, 9, 0)

    def write(minutes: int, *bullets: str) -> None:
        append_entry(memory, JournalEntry(list(bullets)), when=day + dt.timedelta(minutes=minutes))

    write(0, "Moved staging to port 6543.", "Updated the runbook.")
    write(10, "moved  staging to port 6543", "Updated the runbook")  # same, but for case and spaces
    write(20, "Chose the fast queue.")
    write(30, "Chose the fast queue.", "Documented it in the README.")  # holds all of 20:00, and more
    write(40, "Something else entirely.")
    append_entry(memory, JournalEntry(["Moved staging to port 6543.", "Updated the runbook."]),
                 when=day + dt.timedelta(days=1))  # fmt: skip
    findings = journal_findings(memory, memory)
    assert [(f.kind, f.entry.day, f.entry.time, f.by.time) for f in findings] == [
        ("duplicate", "2026-11-03", "09:10", "09:00"),
        ("superseded", "2026-11-03", "09:20", "09:30"),
        ("duplicate", "2026-11-04", "09:00", "09:00"),
    ]
    assert findings[2].by.day == "2026-11-03"  # the earliest copy is the one kept


def test_an_entry_is_not_superseded_by_an_earlier_or_an_equal_one() -> None:
    text = "### 10:00\n- a\n- b\n\n### 11:00\n- a\n\n"
    assert [f.kind for f in find_duplicates(read_entries(text, "j.md", "2026-11-03"))] == []
