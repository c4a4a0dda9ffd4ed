"""What memory did: the recall log of a project, drawn.

The numbers are ``memsearch.agent.recall_report.report``'s, the dictionary ``memsearch stats
--recall --json-output`` prints, so the page and the CLI cannot disagree. The page shows them as
tables (readable without JavaScript); the page's script draws the charts from the same dictionary,
embedded in the page as data (``html.json_block``), and ``/api/activity`` answers it as JSON.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from memsearch.console.exits import shown
from memsearch.console.html import Raw, el, json_block, link
from memsearch.console.timeline_view import host_name
from memsearch.console.web import Reply, Request

if TYPE_CHECKING:
    from memsearch.console.projects import Project
    from memsearch.console.server import Console

__all__ = ["activity_api", "activity_page", "project_report"]

#: The windows offered, in days (``stats --recall --days``).
WINDOWS = (7, 30, 90, 365)
#: Totals shown as cards: (key of ``totals``, label).
TOTALS = (
    ("sessions", "sessions"),
    ("never_consulted", "never consulted memory"),
    ("injections", "injections"),
    ("injected_tokens", "tokens injected"),
    ("searches", "searches by the model"),
    ("hits", "hits returned"),
    ("expands", "hits expanded"),
    ("captures", "turns captured"),
    ("skips", "skips below the relevance floor"),
    ("llm_calls", "model calls (summaries, maintenance)"),
    ("llm_prompt_tokens", "their tokens sent"),
    ("llm_answer_tokens", "their tokens received"),
)
#: The per-day and per-host table's columns.
COLUMNS = (
    "sessions",
    "never_consulted",
    "injections",
    "injected_tokens",
    "searches",
    "hits",
    "expands",
    "captures",
    "skips",
    "llm_calls",
    "llm_prompt_tokens",
    "llm_answer_tokens",
)


def _days(request: Request) -> int:
    from memsearch.errors import InvalidArgumentError

    try:
        days = int(request.arg("days") or 7)
    except ValueError:
        days = 0
    if not 1 <= days <= 36_500:
        raise InvalidArgumentError("days must be 1 to 36500", hint="e.g. days=30")
    return days


def project_report(project: Project, days: int) -> dict[str, Any]:
    """The project's report (``stats --recall --json-output`` for its collection), sessions'
    names passed through the console's exit."""
    from memsearch.agent.recall_report import report

    data = report(project.config, project.collection, days)
    for row in data["sessions"]:
        row["session"] = shown(str(row["session"]))
    return data


def _table(rows: list[dict[str, Any]], first: str, label: Any) -> Raw:
    head = el(
        "tr", el("th", first, scope="col"), [el("th", c.replace("_", " "), scope="col") for c in COLUMNS]
    )
    body = [
        el("tr", el("th", label(row), scope="row"), [el("td", row[c], data_col=c) for c in COLUMNS])
        for row in rows
    ]
    return el("table", el("thead", head), el("tbody", body))


def activity_page(console: Console, request: Request) -> Reply:
    projects = console.selected(request)
    if len(projects) > 1:
        rows = [el("li", link(p.name, "/activity", p=p.key)) for p in projects]
        pick = [el("h1", "What memory did"), el("p", "Pick a project:"), el("ul", rows)]
        return console.render(request, "What memory did", pick, active="/activity")
    project = projects[0]
    days = _days(request)
    data = project_report(project, days)
    totals = data["totals"]
    windows = el(
        "p",
        "Last ",
        [
            [
                link(f"{n} days", "/activity", p=project.key, days=n)
                if n != days
                else el("strong", f"{n} days"),
                " ",
            ]
            for n in WINDOWS
        ],
        class_="windows",
    )
    cards = el(
        "dl",
        [
            el("div", el("dt", label), el("dd", totals[key], data_total=key), class_="card")
            for key, label in TOTALS
        ],
        class_="totals",
    )
    charts = el(
        "div",
        el(
            "figure",
            el("figcaption", "Tokens injected per day"),
            class_="chart",
            data_chart="injected_tokens",
        ),
        el(
            "figure",
            el("figcaption", "Searches and expands per day"),
            class_="chart",
            data_chart="searches,expands",
        ),
        el(
            "figure",
            el("figcaption", "Sessions and those that never consulted memory"),
            class_="chart",
            data_chart="sessions,never_consulted",
        ),
        el(
            "figure",
            el("figcaption", "Model call tokens per day (sent, received)"),
            class_="chart",
            data_chart="llm_prompt_tokens,llm_answer_tokens",
        ),
        class_="charts",
    )
    active_days = [r for r in data["by_day"] if any(r[c] for c in COLUMNS)]
    sessions = el(
        "table",
        el(
            "thead",
            el(
                "tr",
                [
                    el("th", h, scope="col")
                    for h in (
                        "session",
                        "host",
                        "started",
                        "injected",
                        "searches",
                        "hits",
                        "expands",
                        "captures",
                        "",
                    )
                ],
            ),
        ),
        el(
            "tbody",
            [
                el(
                    "tr",
                    el("th", row["session"][:36], scope="row"),
                    el("td", host_name(row["host"]) if row["host"] else "?"),
                    el("td", dt.datetime.fromtimestamp(row["started"]).strftime("%Y-%m-%d %H:%M")),
                    [
                        el("td", row[k])
                        for k in ("injected_tokens", "searches", "hits", "expands", "captures")
                    ],
                    el("td", "" if row["consulted"] else "never consulted", class_="flag"),
                    class_=None if row["consulted"] else "idle",
                )
                for row in data["sessions"]
            ],
        ),
    )
    llm = el(
        "table",
        el(
            "thead",
            el(
                "tr",
                [
                    el("th", h, scope="col")
                    for h in ("purpose", "calls", "failed", "tokens sent", "tokens received", "seconds")
                ],
            ),
        ),
        el(
            "tbody",
            [
                el(
                    "tr",
                    el("th", c["purpose"], scope="row"),
                    [
                        el("td", c[k])
                        for k in ("calls", "failed", "prompt_tokens", "answer_tokens", "seconds")
                    ],
                )
                for c in data["llm"]
            ],
        ),
    )
    off = (
        None
        if data["logging"]
        else el(
            "p",
            "The recall log is off (telemetry.recall = false or MEMSEARCH_RECALL_LOG=0).",
            class_="flash error",
        )
    )
    body: list[Any] = [
        el("h1", "What memory did"),
        windows,
        off,
        cards,
        json_block("recall-data", data),
        charts,
        el("h2", "By day"),
        _table(active_days, "day", lambda r: r["day"])
        if active_days
        else el("p", "No events in this window.", class_="muted"),
        el("h2", "By host"),
        _table(data["by_host"], "host", lambda r: host_name(r["host"]) if r["host"] != "?" else "?"),
        el("h2", "Sessions"),
        sessions if data["sessions"] else el("p", "No sessions in this window.", class_="muted"),
        el("h2", "Model calls memsearch made"),
        llm if data["llm"] else el("p", "None in this window.", class_="muted"),
    ]
    return console.render(request, "What memory did", body, active="/activity", live="activity")


def activity_api(console: Console, request: Request) -> Reply:
    return Reply.json(project_report(console.one(request), _days(request)))
