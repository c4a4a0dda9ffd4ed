"""Journal entries that look duplicated or superseded: candidates for ``forget``, for a person to
decide on (the console's review inbox lists them; nothing is removed here).

Why by bullets, exactly: a journal entry is a list of bullets, and the same turn captured twice
(a retried hook, an entry copied into another day) repeats them word for word, while an entry
whose every bullet is repeated in a later, longer entry was folded into it (the later one says
all it said, and more). Both are certain, cheap to find (a set of normalised bullets per entry,
one index from bullet to entries) and easy to explain, where a similarity threshold would be
neither. Bullets are compared with case, spacing and trailing punctuation ignored.

- **duplicate**: an entry with the same bullets as an earlier entry (the earlier one is kept);
- **superseded**: an entry whose bullets are all in one later entry that has more.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finding", "JournalEntryText", "find_duplicates", "journal_findings", "read_entries"]

_ENTRY = re.compile(r"^###\s+(\d{1,2}:\d{2})\s*$")
_TRAILING = re.compile(r"[\s.;:!?,。；：！？，]+$")
#: A finding names at most this many (the oldest first): an inbox, not a report.
MAX_FINDINGS = 200


@dataclass(frozen=True)
class JournalEntryText:
    """One ``### HH:MM`` entry of a journal: where it starts, its day and time, its bullets."""

    source: str
    line: int
    day: str
    time: str
    bullets: tuple[str, ...]

    @property
    def key(self) -> frozenset[str]:
        return frozenset(_normal(b) for b in self.bullets)

    @property
    def order(self) -> tuple[str, str, str, int]:
        return (self.day, self.time.zfill(5), self.source, self.line)


@dataclass(frozen=True)
class Finding:
    """``entry`` is a duplicate of, or superseded by, ``by``."""

    kind: str
    entry: JournalEntryText
    by: JournalEntryText


def _normal(bullet: str) -> str:
    return _TRAILING.sub("", " ".join(bullet.lower().split()))


def read_entries(text: str, source: str, day: str) -> list[JournalEntryText]:
    """The entries of one journal's ``text`` with their bullets (``- `` lines up to the next heading)."""
    found: list[JournalEntryText] = []
    current: tuple[int, str, list[str]] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        stamp = _ENTRY.match(line)
        if stamp or line.startswith("#"):
            if current is not None and current[2]:
                found.append(JournalEntryText(source, current[0], day, current[1], tuple(current[2])))
            current = (number, stamp[1], []) if stamp else None
        elif current is not None and line.startswith("- ") and line[2:].strip():
            current[2].append(line[2:].strip())
    if current is not None and current[2]:
        found.append(JournalEntryText(source, current[0], day, current[1], tuple(current[2])))
    return found


def find_duplicates(entries: Iterable[JournalEntryText]) -> list[Finding]:
    """The duplicated and superseded entries among ``entries`` (any order), oldest first."""
    ordered = sorted(entries, key=lambda e: e.order)
    first: dict[frozenset[str], JournalEntryText] = {}
    by_bullet: dict[str, list[int]] = {}
    for index, entry in enumerate(ordered):
        for bullet in entry.key:
            by_bullet.setdefault(bullet, []).append(index)
    findings: list[Finding] = []
    for index, entry in enumerate(ordered):
        key = entry.key
        if not key:
            continue
        if key in first:
            findings.append(Finding("duplicate", entry, first[key]))
            continue
        first[key] = entry
        later = _later_holding_all(ordered, by_bullet, index, key)
        if later is not None:
            findings.append(Finding("superseded", entry, later))
    findings.sort(key=lambda f: f.entry.order)
    return findings[:MAX_FINDINGS]


def _later_holding_all(
    ordered: list[JournalEntryText], by_bullet: dict[str, list[int]], index: int, key: frozenset[str]
) -> JournalEntryText | None:
    """The first entry after ``index`` whose bullets include all of ``key`` and more."""
    postings = sorted((by_bullet[b] for b in key), key=len)
    candidates = {i for i in postings[0] if i > index}
    for rest in postings[1:]:
        candidates &= set(rest)
        if not candidates:
            return None
    for i in sorted(candidates):
        if len(ordered[i].key) > len(key):
            return ordered[i]
    return None


def journal_findings(memory_dir: Path, root: Path) -> list[Finding]:
    """The findings of every journal in ``memory_dir`` (read as project files inside ``root``)."""
    from memsearch.engine.journal import journal_files
    from memsearch.engine.project_files import MAX_JOURNAL_BYTES, read_project_text

    entries: list[JournalEntryText] = []
    for path in journal_files(memory_dir):
        text = read_project_text(path, root, max_bytes=MAX_JOURNAL_BYTES)
        entries += read_entries(text, str(path), path.name[:10])
    return find_duplicates(entries)
