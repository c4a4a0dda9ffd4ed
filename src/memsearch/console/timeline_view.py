"""The timeline: journal entries by day across every host, and what tells the page memory changed.

Read from the markdown (as ``memsearch recent``: ``memsearch.agent.timeline``), never the store, so
it shows what hooks wrote a moment ago, indexed or not. A page is :data:`PAGE_DAYS` days that have
entries, or fewer once they hold :data:`PAGE_ENTRIES` entries; only their journals are opened
(journals are found by name, one directory read), so a year of journals costs what a few days do
(``make bench``'s console row). "Older" pages on from the last day shown; a host or day filter
reads at most :data:`SCAN_DAYS` journals per page. An entry is named in URLs by its journal's name
and the line of its heading, never by a path.

Live updates: ``/api/version`` answers a stamp of what the pages show (the journals' names, sizes
and times, the recall log, the skill candidates, the maintenance records); the page's script asks
every few seconds and reloads the main part when it changes, so an entry a hook, ``watch``, the
MCP server or the CLI wrote shows without a click.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.console.exits import shown
from memsearch.console.html import Raw, el, link, url
from memsearch.console.web import Reply, Request

if TYPE_CHECKING:
    from memsearch.agent.timeline import Entry, Note
    from memsearch.console.projects import Project
    from memsearch.console.server import Console

__all__ = ["HOST_NAMES", "host_name", "timeline_api", "timeline_page", "version_api", "version_stamp"]

#: Days with entries on one page, and the entries after which a page ends (with its whole day).
PAGE_DAYS = 7
PAGE_ENTRIES = 150
#: The most journals one page reads while looking for entries that pass a filter.
SCAN_DAYS = 62
#: Who wrote an entry (``engine.expand.anchor_host``) → its name on the page; "note" is a
#: hand-written note (a markdown file that is not a journal), "hand" an entry with no anchor.
HOST_NAMES = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "opencode": "OpenCode",
    "openclaw": "OpenClaw",
    "dsh": "DeepSeek Harness",
    "mcp": "MCP remember",
    "hand": "hand-written entry",
    "note": "note",
}


def host_name(host: str) -> str:
    return HOST_NAMES.get(host or "hand", host)


@dataclass
class DayView:
    date: dt.date
    entries: list[tuple[Project, Entry]] = field(default_factory=list)
    notes: list[tuple[Project, Note]] = field(default_factory=list)


def _journals(projects: list[Project]) -> dict[dt.date, list[tuple[Project, Path]]]:
    from memsearch.engine.journal import journal_files

    found: dict[dt.date, list[tuple[Project, Path]]] = {}
    for project in projects:
        for path in journal_files(project.memory_dir):
            try:
                found.setdefault(dt.date.fromisoformat(path.name[:10]), []).append((project, path))
            except ValueError:
                continue
    return found


def days_of(
    projects: list[Project], *, host: str = "", day: dt.date | None = None, before: dt.date | None = None
) -> tuple[list[DayView], dt.date | None, list[dt.date]]:
    """One page of days (newest first), the day the next page starts before (None: no more), and
    every day that has a journal or a changed note (for the day picker)."""
    from memsearch.agent.timeline import changed_notes, journal_entries
    from memsearch.engine.project_files import MAX_JOURNAL_BYTES, read_project_text
    from memsearch.engine.timeframe import Window

    journals = _journals(projects)
    notes: dict[dt.date, list[tuple[Project, Note]]] = {}
    if host in ("", "note"):
        for project in projects:
            for date, found in changed_notes([project.memory_dir], Window()).items():
                notes.setdefault(date, []).extend((project, n) for n in found)
    dates = sorted(set(journals) | set(notes), reverse=True)
    wanted = [d for d in dates if (day is None or d == day) and (before is None or d < before)]
    views: list[DayView] = []
    scanned = 0
    shown_entries = 0
    for date in wanted:
        if len(views) == PAGE_DAYS or scanned == SCAN_DAYS or shown_entries >= PAGE_ENTRIES:
            break
        scanned += 1
        view = DayView(date, notes=notes.get(date, []))
        for project, path in journals.get(date, []) if host != "note" else []:
            text = read_project_text(path, project.files_root, max_bytes=MAX_JOURNAL_BYTES)
            view.entries += [(project, e) for e in journal_entries(text, str(path)) if _passes(e, host)]
        view.entries.sort(key=lambda pe: (pe[1].time.zfill(5), pe[1].source, pe[1].line))
        if view.entries or view.notes:
            views.append(view)
            shown_entries += len(view.entries)
    more = scanned < len(wanted)  # the next page starts after the last day read, shown or not
    return views, (wanted[scanned - 1] if more and scanned else None), dates


def _passes(entry: Entry, host: str) -> bool:
    return not host or (entry.host or "hand") == host


def _filters(request: Request) -> tuple[str, dt.date | None, dt.date | None]:
    from memsearch.errors import InvalidArgumentError

    host = request.arg("host")
    if host and host not in HOST_NAMES:
        raise InvalidArgumentError(f"no host {host!r}", hint=f"one of: {', '.join(HOST_NAMES)}")
    days = []
    for name in ("day", "before"):
        value = request.arg(name)
        try:
            days.append(dt.date.fromisoformat(value) if value else None)
        except ValueError:
            raise InvalidArgumentError(f"{name} {value!r} is not a day", hint="write it YYYY-MM-DD") from None
    return host, days[0], days[1]


def _relative(project: Project, source: str) -> str:
    try:
        return str(Path(source).relative_to(project.scope.project_dir))
    except ValueError:
        return source


def _entry(project: Project, entry: Entry, many: bool) -> Raw:
    key, journal = project.key, Path(entry.source).name
    host = entry.host or "hand"
    return el(
        "li",
        el("time", entry.time, class_="time"),
        " ",
        el("span", host_name(host), class_=f"host host-{host}"),
        " ",
        el("span", project.name, class_="project") if many else None,
        " ",
        el(
            "a",
            shown(entry.summary) or "(no bullet)",
            href=url("/expand", p=key, journal=journal, line=entry.line),
        ),
        " ",
        el("span", f"session {shown(entry.session[:12])}", class_="session") if entry.session else None,
        " ",
        el("a", "forget", href=url("/forget", p=key, journal=journal, line=entry.line), class_="forget"),
        class_="entry",
        data_host=host,
    )


def _note(project: Project, note: Note, many: bool) -> Raw:
    return el(
        "li",
        el("time", note.time, class_="time"),
        " ",
        el("span", "note", class_="host host-note"),
        " ",
        el("span", project.name, class_="project") if many else None,
        " ",
        shown(note.title),
        " ",
        el("span", shown(_relative(project, note.source)), class_="path"),
        class_="entry note",
    )


def timeline_page(console: Console, request: Request) -> Reply:
    projects = console.selected(request)
    host, day, before = _filters(request)
    views, older, dates = days_of(projects, host=host, day=day, before=before)
    many = len(projects) > 1
    key = console.key_of(request)
    form = el(
        "form",
        el("input", type="hidden", name="p", value=key),
        el(
            "label",
            "Host ",
            el(
                "select",
                el("option", "every host", value=""),
                [el("option", name, value=h, selected=h == host) for h, name in HOST_NAMES.items()],
                name="host",
            ),
        ),
        " ",
        el(
            "label",
            "Day ",
            el(
                "select",
                el("option", "newest first", value=""),
                [el("option", d.isoformat(), value=d.isoformat(), selected=d == day) for d in dates],
                name="day",
            ),
        ),
        " ",
        el("button", "Filter", type="submit"),
        method="get",
        action="/",
        class_="filters",
    )
    days = [
        el(
            "section",
            el("h2", f"{v.date.isoformat()} {v.date.strftime('%a')}", id=f"day-{v.date.isoformat()}"),
            el(
                "ol",
                [_entry(p, e, many) for p, e in v.entries],
                [_note(p, n, many) for p, n in v.notes],
                class_="entries",
            ),
            class_="day",
        )
        for v in views
    ]
    empty = None
    if not views:
        said = (
            "No entry matches in these days."
            if host or day
            else "Nothing here yet: journals show as written."
        )
        empty = el("p", said, class_="muted")
    more = (
        el("p", link("Older days →", "/", p=key, host=host, before=older.isoformat()), class_="more")
        if older
        else None
    )
    body = [el("h1", "Timeline"), form, empty, days, more]
    return console.render(request, "Timeline", body, active="/", live="timeline")


def timeline_api(console: Console, request: Request) -> Reply:
    projects = console.selected(request)
    host, day, before = _filters(request)
    views, older, _dates = days_of(projects, host=host, day=day, before=before)
    data = {
        "days": [
            {
                "date": v.date.isoformat(),
                "entries": [
                    {
                        "project": p.key,
                        "time": e.time,
                        "host": e.host or "hand",
                        "host_name": host_name(e.host),
                        "session": shown(e.session),
                        "summary": shown(e.summary),
                        "source": shown(e.source),
                        "line": e.line,
                    }
                    for p, e in v.entries
                ],
                "notes": [
                    {"project": p.key, "time": n.time, "title": shown(n.title), "source": shown(n.source)}
                    for p, n in v.notes
                ],
            }
            for v in views
        ],
        "older": older.isoformat() if older else None,
    }
    return Reply.json(data)


def version_stamp(projects: list[Project]) -> str:
    """A stamp that changes when anything a page shows changes (stats and names only: cheap)."""
    from memsearch.agent.recall_log import log_path
    from memsearch.maintenance.history import runs_folder
    from memsearch.skills import candidates_root

    digest = hashlib.sha256()
    for project in projects:
        folders = (
            project.memory_dir,
            candidates_root(project.memsearch_dir),
            runs_folder(project.memsearch_dir),
        )
        for folder in folders:
            digest.update(_listing(folder).encode())
        for path in (log_path(project.collection), project.memsearch_dir / "PROJECT.md"):
            digest.update(_stat(path).encode())
    return digest.hexdigest()[:16]


def _stat(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:-\n"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}\n"


def _listing(folder: Path) -> str:
    """Names, sizes and times under ``folder`` (two levels: a candidate's files are in its folder)."""
    lines: list[str] = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if entry.name.startswith(".") and entry.name != ".git":
                    continue
                lines.append(_stat(Path(entry.path)))
                if entry.is_dir(follow_symlinks=False) and entry.name != ".git":
                    with os.scandir(entry.path) as inner:
                        lines += [_stat(Path(e.path)) for e in inner]
    except OSError:
        return f"{folder}:-\n"
    return "".join(sorted(lines))


def version_api(console: Console, request: Request) -> Reply:
    return Reply.json({"version": version_stamp(console.selected(request))})
