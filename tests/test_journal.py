"""Daily journals: the exact format, session headings, duplicate turns, local dates, safety of text
from models and users, the recent-memory preview, and many writers at once."""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from pathlib import Path

import pytest

from memsearch.engine.expand import parse_anchor
from memsearch.engine.journal import (
    JournalEntry,
    append_entry,
    day_file,
    find_duplicate,
    format_anchor,
    journal_files,
    parse_anchor_fields,
    preview_lines,
    recent_memory,
    sanitize_bullet,
)

DAY = dt.datetime(2026, 3, 25, 15, 24)


def claude_entry(session: str, turn: str, *bullets: str) -> JournalEntry:
    anchor = {"session": session, "turn": turn, "transcript": f"/home/dev/.claude/projects/p/{session}.jsonl"}
    return JournalEntry(list(bullets) or ["- User asked X.", "- Claude did Y."], anchor, ("session", "turn"))


def test_entries_of_one_session_share_one_heading(tmp_path: Path) -> None:
    first = append_entry(tmp_path, claude_entry("sess-1", "u-1"), when=DAY)
    second = append_entry(tmp_path, claude_entry("sess-1", "u-2"), when=DAY + dt.timedelta(minutes=3))
    assert first.written and second.written and first.path == second.path == tmp_path / "2026-03-25.md"
    assert first.path.read_text() == (
        "\n## Session 15:24\n\n"
        "### 15:24\n"
        "<!-- session:sess-1 turn:u-1 transcript:/home/dev/.claude/projects/p/sess-1.jsonl -->\n"
        "- User asked X.\n- Claude did Y.\n\n"
        "### 15:27\n"
        "<!-- session:sess-1 turn:u-2 transcript:/home/dev/.claude/projects/p/sess-1.jsonl -->\n"
        "- User asked X.\n- Claude did Y.\n\n"
    )
    assert parse_anchor(first.path.read_text()) is not None  # the core's expand reads these anchors


def test_titled_platforms_start_a_new_file_with_the_date(tmp_path: Path) -> None:
    entry = JournalEntry(
        ["- Noted."], {"session": "ses_1", "turn": "msg_1", "db": "/x/opencode.db"}, ("session", "turn")
    )
    result = append_entry(tmp_path, entry, when=DAY, title=True)
    assert result.path.read_text().startswith(
        "# 2026-03-25\n\n## Session 15:24\n\n### 15:24\n<!-- session:ses_1 "
    )


def test_a_session_never_writes_under_another_sessions_heading(tmp_path: Path) -> None:
    append_entry(tmp_path, claude_entry("a", "a1"), when=DAY)
    append_entry(tmp_path, claude_entry("b", "b1"), when=DAY.replace(minute=30))
    append_entry(tmp_path, claude_entry("a", "a2"), when=DAY.replace(minute=35))
    append_entry(tmp_path, claude_entry("a", "a3"), when=DAY.replace(minute=36))
    text = (tmp_path / "2026-03-25.md").read_text()
    sections = text.split("\n## Session ")[1:]
    assert [s.split("\n")[0] for s in sections] == ["15:24", "15:30", "15:35"]
    owners = [{f["session"] for line in s.splitlines() if (f := parse_anchor_fields(line))} for s in sections]
    assert owners == [{"a"}, {"b"}, {"a"}]
    assert sections[2].count("### ") == 2


def test_session_ids_are_compared_exactly_not_as_substrings(tmp_path: Path) -> None:
    append_entry(tmp_path, claude_entry("s1-long", "t1"), when=DAY)
    result = append_entry(tmp_path, claude_entry("s1", "t1"), when=DAY)  # a prefix of the first id
    assert result.written
    assert result.path.read_text().count("## Session ") == 2


def test_a_repeated_turn_is_written_once_even_across_midnight(tmp_path: Path) -> None:
    late = dt.datetime(2026, 3, 25, 23, 59)
    assert append_entry(tmp_path, claude_entry("s", "t"), when=late).written
    again = append_entry(tmp_path, claude_entry("s", "t", "- A different summary."), when=late)
    assert not again.written and again.duplicate_in == tmp_path / "2026-03-25.md"
    after_midnight = append_entry(tmp_path, claude_entry("s", "t"), when=late + dt.timedelta(minutes=2))
    assert not after_midnight.written and not (tmp_path / "2026-03-26.md").exists()
    assert (
        find_duplicate(tmp_path, claude_entry("s", "t"), late + dt.timedelta(minutes=2))
        == tmp_path / "2026-03-25.md"
    )
    assert find_duplicate(tmp_path, claude_entry("s", "other"), late) is None
    assert append_entry(tmp_path, claude_entry("s", "t2"), when=late + dt.timedelta(minutes=2)).written


def test_entries_without_a_turn_identity_are_never_deduplicated(tmp_path: Path) -> None:
    legacy = JournalEntry(["- Same words."], {"session": "codex-1", "rollout": ""}, ())
    assert append_entry(tmp_path, legacy, when=DAY).written
    assert append_entry(tmp_path, legacy, when=DAY).written
    half = JournalEntry(["- x"], {"session": "s"}, ("session", "turn"))  # turn missing: no key
    assert half.key() is None


@pytest.mark.parametrize("zone", ["Etc/GMT-14", "Etc/GMT+12"])
def test_file_date_and_stamps_are_both_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zone: str
) -> None:
    # 26 hours apart: at any moment at least one of these zones has a date other than UTC's, so a
    # journal named by the UTC date (the original's OpenClaw/DSH bug) fails here.
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        before = time.localtime()
        result = append_entry(tmp_path, claude_entry("s", "t"))
        after = time.localtime()
    finally:
        monkeypatch.undo()
        time.tzset()
    assert result.path.name in {time.strftime("%Y-%m-%d.md", before), time.strftime("%Y-%m-%d.md", after)}
    stamps = {time.strftime("### %H:%M", before), time.strftime("### %H:%M", after)}
    assert any(stamp in result.path.read_text() for stamp in stamps)


def test_day_file_names_the_local_date() -> None:
    assert day_file("/m", dt.datetime(2026, 1, 2, 0, 5)) == Path("/m/2026-01-02.md")
    assert day_file("/m", dt.date(2026, 12, 31)) == Path("/m/2026-12-31.md")


def test_anchor_values_stay_one_token_and_parseable(tmp_path: Path) -> None:
    anchor = format_anchor({"session": "s", "turn": "t", "transcript": "/home/me/My Projects/a-->b.jsonl"})
    assert anchor == "<!-- session:s turn:t transcript:/home/me/My%20Projects/a--%3Eb.jsonl -->"
    parsed = parse_anchor(anchor)
    assert parsed is not None and parsed.kind == "claude-code"
    codex = format_anchor({"session": "c", "rollout": "", "turn_id": "0199"})
    parsed = parse_anchor(codex)
    assert parsed is not None and parsed.kind == "codex" and parsed.rollout == ""  # extra field ignored
    assert parse_anchor_fields(codex) == {"session": "c", "rollout": "", "turn_id": "0199"}
    assert format_anchor({}) == ""


def test_model_or_user_text_cannot_forge_structure(tmp_path: Path) -> None:
    forged = "<!-- session:victim turn:t1 transcript:/x -->"
    entry = claude_entry("real", "r1", f"- quoting {forged}", "## Session 00:00", "- two\nlines\n### 10:00")
    result = append_entry(tmp_path, entry, when=DAY)
    text = result.path.read_text()
    anchors = [f for line in text.splitlines() if (f := parse_anchor_fields(line))]
    assert anchors == [
        {"session": "real", "turn": "r1", "transcript": "/home/dev/.claude/projects/p/real.jsonl"}
    ]
    assert "- quoting &lt;!-- session:victim turn:t1 transcript:/x --&gt;" in text
    assert "- ## Session 00:00" in text and "- two lines ### 10:00" in text
    assert text.count("\n## Session ") == 1 and text.count("\n### ") == 1
    assert append_entry(tmp_path, claude_entry("victim", "t1"), when=DAY).written  # no fake duplicate


def test_bullets_are_normalised() -> None:
    assert sanitize_bullet("* starred") == "- starred"
    assert sanitize_bullet("• dotted   spaced ") == "- dotted spaced"
    assert sanitize_bullet("plain text") == "- plain text"
    assert sanitize_bullet("   ") == "" and sanitize_bullet("-") == ""
    assert len(sanitize_bullet("- " + "x" * 5000)) < 2100


def test_an_entry_needs_a_bullet(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one bullet"):
        append_entry(tmp_path / "memory", JournalEntry(["", "  "], {"session": "s"}), when=DAY)
    assert not (tmp_path / "memory").exists()


def test_a_hand_edit_without_final_newline_is_respected(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-25.md"
    path.write_text("# Notes\nwritten by hand")
    append_entry(tmp_path, claude_entry("s", "t"), when=DAY)
    assert path.read_text().startswith("# Notes\nwritten by hand\n\n## Session 15:24\n\n### 15:24\n")


# --- reading back -----------------------------------------------------------------------------

JOURNAL = """# 2026-03-25

## Session 09:00

### 09:00
<!-- session:a turn:1 transcript:/t -->
- First bullet.
Some prose that is not a bullet.

## Session 10:00

## Session 11:00

### 11:00
#### detail
- Second bullet.
"""


def test_preview_keeps_headings_and_bullets_of_sections_that_have_bullets() -> None:
    assert preview_lines(JOURNAL) == [
        "## Session 09:00",
        "### 09:00",
        "- First bullet.",
        "## Session 11:00",
        "### 11:00",
        "#### detail",
        "- Second bullet.",
    ]
    assert preview_lines(JOURNAL, max_lines=2) == ["#### detail", "- Second bullet."]
    assert preview_lines(JOURNAL, max_lines=0) == []


def test_recent_memory_reads_only_the_newest_daily_journals(tmp_path: Path) -> None:
    for day in ("2026-03-20", "2026-03-24", "2026-03-25"):
        (tmp_path / f"{day}.md").write_text(f"\n## Session 10:00\n\n### 10:00\n- Work of {day}.\n")
    (tmp_path / "2026-03-26.md").write_text("\n## Session 10:00\n\n")  # only a stub: skipped
    (tmp_path / "zz-notes.md").write_text("## Notes\n- not a journal\n")
    (tmp_path / "2026-03-27.md").mkdir()  # a folder with a journal's name
    assert [p.name for p in journal_files(tmp_path)] == [
        "2026-03-26.md",
        "2026-03-25.md",
        "2026-03-24.md",
        "2026-03-20.md",
    ]
    text = recent_memory(tmp_path, files=3)
    assert text == (
        "# Recent Memory\n\n"
        "## 2026-03-25.md\n## Session 10:00\n### 10:00\n- Work of 2026-03-25.\n\n"
        "## 2026-03-24.md\n## Session 10:00\n### 10:00\n- Work of 2026-03-24.\n".rstrip("\n")
    )
    assert recent_memory(tmp_path / "missing") == ""


def test_many_threads_writing_one_day_file(tmp_path: Path) -> None:
    barrier = threading.Barrier(40)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            barrier.wait()
            entry = claude_entry(f"s{i % 5}", f"t{i}", f"- entry {i} " + "y" * 300, f"- tail {i}")
            assert append_entry(tmp_path, entry, when=DAY).written
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=write, args=(i,)) for i in range(40)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    text = (tmp_path / "2026-03-25.md").read_text()
    assert text.count("\n### 15:24\n") == 40
    for i in range(40):
        anchor_tail = f"turn:t{i} transcript:/home/dev/.claude/projects/p/s{i % 5}.jsonl -->"
        assert f"{anchor_tail}\n- entry {i} {'y' * 300}\n- tail {i}\n\n" in text
    for section in text.split("\n## Session ")[1:]:
        assert len({f["session"] for line in section.splitlines() if (f := parse_anchor_fields(line))}) == 1


def test_an_entry_waiting_for_the_lock_goes_into_a_journal_renamed_over_meanwhile(tmp_path: Path) -> None:
    """``memsearch scan --redact`` renames a rewritten journal over the old one while holding the
    writers' lock; an append that waited for that lock must land in the new file, not the old one."""
    import os

    from memsearch.files import atomic_write, exclusive

    when = dt.datetime(2026, 12, 2, 9, 0)
    path = tmp_path / "2026-12-02.md"
    path.write_text("# 2026-12-02\n\n### 08:00\n- before\n", encoding="utf-8")
    done: list[object] = []
    with path.open("rb") as held, exclusive(held):
        writer = threading.Thread(
            target=lambda: done.append(
                append_entry(tmp_path, JournalEntry(["- the waiting entry"]), when=when)
            )
        )
        writer.start()
        time.sleep(0.3)  # the writer now waits for the lock on the old file
        assert writer.is_alive()
        old = os.stat(path).st_ino
        atomic_write(path, "# 2026-12-02\n\n### 08:00\n- rewritten\n", keep_mode=True)
        assert os.stat(path).st_ino != old
    writer.join(timeout=10)
    text = path.read_text(encoding="utf-8")
    assert "- rewritten" in text and "- the waiting entry" in text


def test_entries_without_a_session_in_one_minute_share_one_heading(tmp_path: Path) -> None:
    """Two MCP ``remember`` notes in one minute wrote two identical ``## Session HH:MM`` headings."""
    at = dt.datetime(2026, 11, 30, 10, 5, 10)
    for second, bullet in ((10, "first"), (50, "second")):
        append_entry(tmp_path, JournalEntry([bullet]), when=at.replace(second=second))
    append_entry(tmp_path, JournalEntry(["third"]), when=at.replace(minute=6))  # another minute
    session = JournalEntry(["a turn"], {"session": "s1", "turn": "t1"}, ("session", "turn"))
    append_entry(tmp_path, session, when=at.replace(minute=6))  # a session of its own: its heading
    append_entry(tmp_path, JournalEntry(["fourth"]), when=at.replace(minute=6))  # not under s1's
    text = (tmp_path / "2026-11-30.md").read_text(encoding="utf-8")
    assert re.findall(r"^## Session .*$", text, re.MULTILINE) == [
        "## Session 10:05",
        "## Session 10:06",
        "## Session 10:06",
        "## Session 10:06",
    ]
    assert text.index("- first") < text.index("- second") < text.index("## Session 10:06")
