"""The review inbox: what waits for a person's decision, each with the CLI's own action.

- skill candidates waiting for review (``skills list``): accept installs it as ``skills install``
  does, reject is ``skills reject``;
- maintenance's rewrites of PROJECT.md and USER.md (``maintenance history``), a diff each: keep or
  revert (``maintenance keep``/``revert``);
- secrets ``scan`` finds in the memory files (where and which kind, never the value): redact the
  journals as ``scan --redact`` does; a hand-written note is the user's to edit;
- journal entries that look duplicated or superseded (``memsearch.agent.duplicates``): forget one
  with ``forget``'s confirmation;
- the originals ``forget`` and ``scan --redact`` kept of this project's files
  (``memsearch.engine.backups``): restore one as ``forget --undo ID`` / ``scan --restore ID`` do.

The buttons post to ``/act/<action>`` (``console.actions``: one table, each row the CLI's
operation). The navigation's badge counts the first two (cheap: a folder listing); secrets and
duplicates are read when the inbox is opened, each file's answer kept while its size and time stay.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.console.exits import shown
from memsearch.console.html import Raw, el, link, url
from memsearch.console.web import Reply, Request

if TYPE_CHECKING:
    from memsearch.agent.duplicates import Finding
    from memsearch.console.projects import Project
    from memsearch.console.server import Console
    from memsearch.engine.backups import Backup
    from memsearch.engine.secret_scan import Hit

__all__ = ["action_form", "backups_of", "inbox_page", "secrets_of", "waiting_count"]

_CACHE: dict[tuple[str, int, int], list[Hit]] = {}
_CACHE_LOCK = threading.Lock()


def waiting_count(project: Project) -> int:
    """Skill candidates and maintenance rewrites waiting for review (the navigation's badge)."""
    from memsearch.maintenance.history import list_runs
    from memsearch.skills import WAITING, list_candidates

    try:
        skills = sum(c.status in WAITING for c in list_candidates(project.memsearch_dir))
    except Exception:  # a damaged store must not break every page
        skills = 0
    return skills + len(list_runs(project.memsearch_dir, status=("new",)))


def action_form(
    console: Console, action: str, label: str, fields: dict[str, Any], *extra: Any, danger: bool = False
) -> Raw:
    """A POST form for one action of ``console.actions`` (the CSRF token included)."""
    hidden = [el("input", type="hidden", name=k, value=v) for k, v in fields.items() if v is not None]
    return el(
        "form",
        el("input", type="hidden", name="csrf", value=console.guard.csrf),
        hidden,
        extra,
        el("button", label, type="submit", class_="danger" if danger else None),
        method="post",
        action=f"/act/{action}",
        class_="action",
    )


def secrets_of(project: Project) -> list[Hit]:
    """``memsearch scan``'s findings in the project's memory folder (rules always on, as scan's)."""
    from memsearch import redact
    from memsearch.engine import secret_scan

    r = project.config.redact
    redactor = redact.from_settings(True, r.notes, r.patterns, r.allow, env={})
    hits: list[Hit] = []
    for path in secret_scan.memory_files([project.memory_dir]):
        try:
            st = path.stat()
        except OSError:
            continue
        key = (str(path), st.st_size, st.st_mtime_ns)
        with _CACHE_LOCK:
            found = _CACHE.get(key)
        if found is None:
            try:
                found = secret_scan.scan_files([path], redactor)
            except OSError:
                continue
            with _CACHE_LOCK:
                _CACHE[key] = found
        hits += found
    return hits


def _skills(console: Console, project: Project, next_url: str) -> Raw:
    from memsearch.skills import HOST_SKILL_DIRS, WAITING, list_candidates

    waiting = [c for c in list_candidates(project.memsearch_dir) if c.status in WAITING]
    items = []
    for c in waiting:
        try:
            body = c.body()
        except OSError:
            body = ""
        platforms = el(
            "label",
            "into ",
            el("select", [el("option", name, value=name) for name in HOST_SKILL_DIRS], name="platform"),
        )
        user = el(
            "label", el("input", type="checkbox", name="user", value="1"), " for every project (user level)"
        )
        fields = {"p": project.key, "slug": c.slug, "next": next_url}
        items.append(
            el(
                "li",
                el(
                    "h3",
                    shown(c.name),
                    " ",
                    el("span", "new" if c.status == "pending" else "update", class_="badge"),
                ),
                el("p", shown(c.description)),
                el("p", f"seen {c.occurrences} times" if c.occurrences else None, class_="muted"),
                el("details", el("summary", "SKILL.md"), el("pre", shown(body), class_="memory")),
                el(
                    "div",
                    action_form(
                        console, "skill-accept", "Accept (install)", fields, platforms, " ", user, " "
                    ),
                    action_form(console, "skill-reject", "Reject", fields, danger=True),
                    class_="buttons",
                ),
                class_="card",
                data_skill=c.slug,
            )
        )
    return _section("Skill candidates", items, "No skill candidate waits for review.", "skills")


def _runs(console: Console, project: Project, next_url: str) -> Raw:
    from memsearch.maintenance.history import list_runs, unified_diff

    items = []
    for run in list_runs(project.memsearch_dir, status=("new",)):
        lines = [el("span", shown(line), class_=_diff_class(line)) for line in unified_diff(run).splitlines()]
        fields = {"p": project.key, "run": run.id, "next": next_url}
        items.append(
            el(
                "li",
                el(
                    "h3", f"{run.task} rewrote {Path(run.file).name}", " ", el("time", run.at, class_="muted")
                ),
                el("p", shown(run.reason)) if run.reason else None,
                el("pre", [[line, "\n"] for line in lines], class_="diff"),
                el(
                    "div",
                    action_form(console, "run-keep", "Keep", fields),
                    action_form(console, "run-revert", "Revert", fields, danger=True),
                    class_="buttons",
                ),
                class_="card",
                data_run=run.id,
            )
        )
    return _section(
        "Maintenance changes", items, "No rewrite of PROJECT.md or USER.md waits for review.", "runs"
    )


def _diff_class(line: str) -> str | None:
    """A diff line's colour: added or removed text (the ``+++``/``---`` file names are neither)."""
    if line.startswith(("+++", "---")):
        return None
    return "add" if line.startswith("+") else "del" if line.startswith("-") else None


def _secrets(console: Console, project: Project, next_url: str) -> Raw:
    from memsearch.engine.journal import is_journal

    hits = secrets_of(project)
    rows = [
        el(
            "li",
            el("span", f"{shown(_relative(project, str(h.path)))}:{h.line}", class_="path"),
            f" {h.kind}",
            "" if is_journal(h.path) else " (a hand-written note: edit it yourself)",
        )
        for h in hits
    ]
    button = None
    if any(is_journal(h.path) for h in hits):
        fields = {"p": project.key, "next": next_url}
        button = action_form(console, "redact", "Redact the journals (as scan --redact)", fields, danger=True)
    return _section("Secrets in memory files", rows, "No secrets found by scan.", "secrets", button)


def _duplicates(project: Project) -> Raw:
    from memsearch.agent.duplicates import journal_findings

    items = [_finding(project, f) for f in journal_findings(project.memory_dir, project.files_root)]
    return _section(
        "Duplicated or superseded entries", items, "No entry looks duplicated or superseded.", "duplicates"
    )


def _finding(project: Project, finding: Finding) -> Raw:
    entry, by = finding.entry, finding.by
    verb = "repeats" if finding.kind == "duplicate" else "is all said again, and more, in"
    key = project.key
    return el(
        "li",
        link(f"{entry.day} {entry.time}", "/expand", p=key, journal=Path(entry.source).name, line=entry.line),
        f" “{shown(entry.bullets[0])}” {verb} ",
        link(f"{by.day} {by.time}", "/expand", p=key, journal=Path(by.source).name, line=by.line),
        " ",
        el(
            "a",
            "forget the first",
            href=url("/forget", p=key, journal=Path(entry.source).name, line=entry.line),
            class_="forget",
        ),
        class_=f"finding {finding.kind}",
    )


def backups_of(project: Project) -> list[Backup]:
    """The kept originals (``forget --undo --list``, ``scan --restore --list``) whose files all lie
    in this project: the ones its inbox offers to restore."""
    from memsearch.engine import backups

    root = project.scope.project_dir.resolve()
    return [b for b in backups.listing() if all(Path(p).resolve().is_relative_to(root) for p in b.paths)]


def _backups(console: Console, project: Project, next_url: str) -> Raw:
    import datetime as dt

    from memsearch.cli.undo import RESTORE

    items = []
    for b in backups_of(project):
        when = dt.datetime.fromtimestamp(b.created).strftime("%Y-%m-%d %H:%M")
        files = el("ul", [el("li", shown(_relative(project, p)), class_="path") for p in b.paths])
        if b.values_needed:  # the value forget --secret took out is nowhere on disk: only its owner has it
            how: Raw = el(
                "p", f"Needs the forgotten value: `{RESTORE[b.command]} {b.id} --secret -`", class_="muted"
            )
        else:
            fields = {"p": project.key, "backup": b.id, "next": next_url}
            how = action_form(console, "restore", "Restore", fields)
        items.append(
            el(
                "li",
                el("h3", shown(b.what), " ", el("time", when, class_="muted")),
                files,
                how,
                class_="card",
                data_backup=b.id,
            )
        )
    return _section("Kept originals", items, "No forget or redaction of this project is kept.", "backups")


def _section(title: str, items: list[Raw], empty: str, name: str, after: Raw | None = None) -> Raw:
    return el(
        "section",
        el("h2", title, f" ({len(items)})" if items else ""),
        el("ul", items, class_="cards") if items else el("p", empty, class_="muted"),
        after if items else None,
        class_="inbox",
        id=name,
    )


def _relative(project: Project, source: str) -> str:
    try:
        return os.path.relpath(source, project.scope.project_dir)
    except ValueError:
        return source


def inbox_page(console: Console, request: Request) -> Reply:
    projects = console.selected(request)
    if len(projects) > 1:
        rows = [el("li", link(p.name, "/inbox", p=p.key), f": {waiting_count(p)} waiting") for p in projects]
        body = [el("h1", "Review"), el("p", "Pick a project:"), el("ul", rows)]
        return console.render(request, "Review", body, active="/inbox", live="inbox")
    project = projects[0]
    here = url("/inbox", p=project.key)
    body = [
        el("h1", "Review"),
        _skills(console, project, here),
        _runs(console, project, here),
        _secrets(console, project, here),
        _duplicates(project),
        _backups(console, project, here),
    ]
    return console.render(request, "Review", body, active="/inbox", live="inbox")
