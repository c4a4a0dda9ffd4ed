"""The scale bench's corpora (``make bench-scale``): a team's memory after three years.

Why not ``gen_corpus.py`` as it is: that corpus is one project's journals, ~33 turns a day for a
few months. A memory at 100,000 chunks is several agents' journals, one file per project per day,
over years, plus hand-written notes; what grows with it (files to stat, journals in a window of
days, rows per file) is what the scale bench measures. So this module lays the same turns out
differently, reusing ``gen_corpus``'s turn generators (the hooks' format, ~10 % Chinese):

- ``memory/pNN/YYYY-MM-DD.md``: one journal per project per day it worked, each day of
  :data:`FIRST_DAY` .. :data:`LAST_DAY` (three years) at most once; ``## Session HH:MM``,
  ``### HH:MM`` turns with their anchor comment (the transcripts they name are not written: no
  row of the bench reads them), each turn one chunk;
- ``notes/<area>/<slug>.md``: hand-written notes (English, ~10 % Chinese), a title and an intro,
  then 4-14 ``##`` sections, each one chunk; their modification times are spread over the same
  three years, so a window of days selects notes as it selects journals.

A corpus of ``chunks`` chunks has ``chunks // 10`` files (10,000 at 100,000 chunks), a tenth of them
notes, and at most :data:`DAYS_PER_PROJECT` journals per project. The same arguments give the same
files, byte for byte and with the same modification times. Standard library only.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from pathlib import Path

from evaluation import gen_corpus as g

__all__ = ["FIRST_DAY", "LAST_DAY", "VERSION", "generate"]

#: Changes whenever the generator's output changes (a cached corpus with another version is rebuilt).
VERSION = 1
FIRST_DAY = dt.date(2023, 12, 1)
LAST_DAY = dt.date(2026, 11, 30)
#: Journals of one project at most (the three years have 1,096 days; a project skips some).
DAYS_PER_PROJECT = 1000
#: Chunks per file on average, and the share of files that are notes.
CHUNKS_PER_FILE = 10
NOTE_SHARE = 0.1
ZH_SHARE = 0.1
NOTE_AREAS = ["billing", "payments", "platform", "web", "oncall", "adr", "howto", "people"]
_ZH_TITLES = ["值班手册", "发布流程", "故障复盘", "架构决策", "排查笔记", "代码规范"]


def layout(chunks: int) -> tuple[int, int, int]:
    """(journals, notes, projects) of a corpus of ``chunks`` chunks."""
    files = max(2, chunks // CHUNKS_PER_FILE)
    notes = max(1, round(files * NOTE_SHARE))
    journals = files - notes
    projects = -(-journals // DAYS_PER_PROJECT)
    return journals, notes, projects


def generate(out: Path, chunks: int, seed: int = 42) -> dict[str, int]:
    """Write the corpus of ``chunks`` chunks under ``out`` (``memory/``, ``notes/``); its counts."""
    out = out.resolve()
    rng = random.Random(seed)
    journals, notes, projects = layout(chunks)
    note_sections = [rng.randint(4, 14) for _ in range(notes)]
    note_chunks = sum(1 + k for k in note_sections)
    if chunks - note_chunks < journals:
        raise ValueError(f"{chunks} chunks are too few for {journals} journals and {notes} notes")
    stats = {"journals": 0, "notes": 0, "chunks": 0, "zh_chunks": 0, "bytes": 0, "projects": projects}
    days = [FIRST_DAY + dt.timedelta(days=d) for d in range((LAST_DAY - FIRST_DAY).days + 1)]
    per_project = [journals // projects + (p < journals % projects) for p in range(projects)]
    turns = iter(g._split(chunks - note_chunks, journals, rng))
    sessions = out / "sessions"  # named by the anchors only
    for p, count in enumerate(per_project):
        folder = out / "memory" / f"p{p:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        for day in sorted(rng.sample(days, count)):
            text, zh = _journal(rng, day, next(turns), sessions)
            _write(folder / f"{day.isoformat()}.md", text, stats)
            stats["journals"] += 1
            stats["zh_chunks"] += zh
    span = int((LAST_DAY - FIRST_DAY).total_seconds()) + 86_400
    start = dt.datetime.combine(FIRST_DAY, dt.time()).timestamp()
    for n, sections in enumerate(note_sections):
        zh = rng.random() < ZH_SHARE
        area = NOTE_AREAS[n % len(NOTE_AREAS)]
        path = out / "notes" / area / f"{area}-{n:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, _note(rng, n, sections, zh), stats)
        when = start + rng.randrange(span)
        os.utime(path, (when, when))
        stats["notes"] += 1
        stats["zh_chunks"] += zh * (1 + sections)
    stats["chunks"] = chunks
    return stats


def _write(path: Path, text: str, stats: dict[str, int]) -> None:
    data = text.encode("utf-8")
    path.write_bytes(data)
    stats["bytes"] += len(data)


def _journal(rng: random.Random, day: dt.date, turns: int, sessions: Path) -> tuple[str, int]:
    """One day's journal of ``turns`` turns in the capture hooks' format; (text, Chinese turns)."""
    n_sessions = min(turns, rng.randint(1, 4))
    minute = rng.randint(8 * 60, 10 * 60)
    step = max(1, min(12, (23 * 60 - minute) // (turns + 4 * n_sessions)))
    lines = [f"# {day.isoformat()}", ""]
    zh_turns = 0
    for in_session in g._split(turns, n_sessions, rng):
        session = g._uuid(rng)
        minute += rng.randint(step, 4 * step)
        lines += [f"## Session {g._hhmm(minute)}", ""]
        for _ in range(in_session):
            minute += rng.randint(1, step)
            zh = rng.random() < ZH_SHARE
            zh_turns += zh
            bullets = g._body(rng, g._episode(rng, zh, None), zh)
            anchor = f"<!-- session:{session} turn:{g._uuid(rng)} transcript:{sessions / session}.jsonl -->"
            lines += [f"### {g._hhmm(minute)}", anchor, *bullets, ""]
    return "\n".join(lines).rstrip("\n") + "\n", zh_turns


def _note(rng: random.Random, n: int, sections: int, zh: bool) -> str:
    """A hand-written note: a title and an intro (one chunk), then ``sections`` ``##`` sections."""
    episodes = [g._episode(rng, zh, None) for _ in range(sections)]
    if zh:
        title = f"{rng.choice(_ZH_TITLES)} {n}"
        intro = f"这份笔记整理了 {sections} 个主题，来自团队的日常记录，最后更新于 {rng.choice(g.PEOPLE)}。"
    else:
        title = f"Notes {n}: {episodes[0].prompt[:60].rstrip()}"
        intro = f"What the team learned about {sections} topics, kept up to date by {rng.choice(g.PEOPLE)}."
    lines = [f"# {title}", "", intro, ""]
    for k, episode in enumerate(episodes):
        lines += [f"## {k + 1}. {episode.prompt[:70].rstrip()}", ""]
        body = " ".join(b.removeprefix("- ") for b in g._body(rng, episode, zh))
        lines += [body[:1300], ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--chunks", type=int, default=10_000)
    args = parser.parse_args()
    print(json.dumps(generate(args.out, args.chunks)))


if __name__ == "__main__":
    main()
