"""What memory gained lately, day by day (``memsearch recent``): read from the markdown alone.

Why from the files and not the store: the question is "what was written when", which the files
answer exactly (a journal's name is its day, each entry's ``### HH:MM`` heading its time, a hand
note's modification time when it last changed), with no model to load and no store to open, so it
works while another process owns the store and before anything was indexed.

Journals are listed by name (one directory read) and only those of the window are opened; other
markdown files are dated by one ``stat`` each. Every file is read as a project file
(``project_files``: a regular file inside its root, within a size bound).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memsearch.engine.expand import anchor_host
from memsearch.engine.journal import is_journal, parse_anchor_fields
from memsearch.engine.timeframe import Window

__all__ = ["Day", "Entry", "Note", "changed_notes", "default_memory_dir", "journal_entries", "timeline"]

_ENTRY = re.compile(r"^###\s+(\d{1,2}:\d{2})\s*$")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
#: The longest summary line shown for one entry.
SUMMARY_CHARS = 200
#: Folders never walked for notes (hidden ones are skipped too).
_SKIP_DIRS = frozenset({"node_modules", "__pycache__"})


@dataclass(frozen=True)
class Entry:
    """One journal entry: its time, its session (from the anchor), its first bullet, the host
    that captured it (``engine.expand.anchor_host``: "" for a hand-written entry) and its anchor's
    fields."""

    time: str
    session: str
    summary: str
    source: str
    line: int
    host: str = ""
    anchor: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Note:
    """A markdown file that is not a journal, changed on that day."""

    source: str
    time: str
    title: str


@dataclass
class Day:
    date: dt.date
    entries: list[Entry] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "date": self.date.isoformat(),
            "entries": [asdict(e) for e in self.entries],
            "notes": [asdict(n) for n in self.notes],
        }


def default_memory_dir(cwd: Path | None = None) -> Path:
    """The memory folder the agent plugins write for this working folder: ``$MEMSEARCH_DIR/memory``,
    else ``<git root>/.memsearch/memory`` (else under the working folder)."""
    from memsearch.agent.hooks.base import MEMSEARCH_DIR_ENV, find_git_root

    shared = os.environ.get(MEMSEARCH_DIR_ENV, "").strip()
    if shared:
        return Path(shared).expanduser().resolve() / "memory"
    start = (cwd or Path.cwd()).resolve()
    return (find_git_root(start) or start) / ".memsearch" / "memory"


def journal_entries(text: str, source: str) -> list[Entry]:
    """The ``### HH:MM`` entries of one journal, each with its session and first bullet."""
    entries: list[Entry] = []
    current: dict[str, Any] | None = None

    def close() -> None:
        if current is not None:
            fields = current["anchor"]
            entries.append(
                Entry(
                    current["time"],
                    fields.get("session", ""),
                    current["summary"],
                    source,
                    current["line"],
                    anchor_host(fields),
                    fields,
                )
            )

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        stamp = _ENTRY.match(line)
        if stamp:
            close()
            current = {"time": stamp[1], "anchor": {}, "summary": "", "line": number}
        elif current is None:
            continue
        elif line.startswith("#"):
            close()
            current = None
        elif "<!--" in line and not current["anchor"]:
            current["anchor"] = parse_anchor_fields(line) or {}
        elif line.startswith("- ") and not current["summary"]:
            summary = " ".join(line[2:].split())
            current["summary"] = (
                summary if len(summary) <= SUMMARY_CHARS else summary[: SUMMARY_CHARS - 1] + "…"
            )
    close()
    return entries


def _files(paths: Iterable[Path]) -> Iterable[tuple[Path, Path]]:
    """(markdown file, the root it was found under): walked without following links."""
    for root in paths:
        if root.is_file() and not root.is_symlink():
            yield root, root.parent
            continue
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
            for name in sorted(names):
                if name.endswith((".md", ".markdown")) and not name.startswith("."):
                    yield Path(folder) / name, root


def _title(text: str, path: Path) -> str:
    for raw in text.splitlines():
        heading = _HEADING.match(raw.strip())
        if heading:
            return heading[1][:SUMMARY_CHARS]
    return path.stem


def changed_notes(paths: Iterable[str | os.PathLike[str]], window: Window) -> dict[dt.date, list[Note]]:
    """The markdown files under ``paths`` that are not journals, by the day of ``window`` they last
    changed (one ``stat`` each; only those are opened, for their title, which passes the exits'
    redaction: :mod:`memsearch.exits`)."""
    from memsearch import exits
    from memsearch.engine.project_files import read_project_text

    notes: dict[dt.date, list[Note]] = {}
    for path, root in _files(Path(p).expanduser().absolute() for p in paths):
        if is_journal(path):
            continue
        try:
            stamp = dt.datetime.fromtimestamp(path.lstat().st_mtime)
        except (OSError, ValueError, OverflowError):
            continue
        if window.contains(stamp.date()):
            title = _title(exits.out(read_project_text(path, root), "recent"), path)
            notes.setdefault(stamp.date(), []).append(Note(str(path), stamp.strftime("%H:%M"), title))
    for day in notes.values():
        day.sort(key=lambda n: (n.time, n.source))
    return notes


def timeline(paths: Iterable[str | os.PathLike[str]], window: Window) -> list[Day]:
    """The days of ``window`` that gained something under ``paths``, newest first: each day's
    journal entries (in time order) and the other markdown files last changed that day. What it
    shows of a file passes the exits' redaction (:mod:`memsearch.exits`)."""
    from memsearch import exits
    from memsearch.engine.project_files import MAX_JOURNAL_BYTES, read_project_text

    roots = [Path(p).expanduser().absolute() for p in paths]
    days: dict[dt.date, Day] = {}
    for path, root in _files(roots):
        if not is_journal(path):
            continue
        try:
            when = dt.date.fromisoformat(path.name[:10])
        except ValueError:
            continue
        if not window.contains(when):
            continue
        text = exits.out(read_project_text(path, root, max_bytes=MAX_JOURNAL_BYTES), "recent")
        entries = journal_entries(text, str(path))
        if entries:
            days.setdefault(when, Day(when)).entries.extend(entries)
    for when, notes in changed_notes(roots, window).items():
        days.setdefault(when, Day(when)).notes.extend(notes)
    for day in days.values():
        day.entries.sort(key=lambda e: (e.time.zfill(5), e.source, e.line))
    return [days[d] for d in sorted(days, reverse=True)]
