"""Search, expand and transcript: progressive disclosure, as the CLI and the MCP tools do it.

One engine: a search is ``Memory.search`` with the CLI's arguments (time phrases in the query,
``since``/``until`` in the same forms, the configured recency), an expand is ``Memory.expand``,
both through the store's owner; the hits and scores are the CLI's (and a hit's ``relevance`` is
shown when the engine gives one). A timeline entry opens as the expand of the chunk that holds
it. A transcript is read only when this project's journals name it *and* memsearch recorded
writing that anchor (``engine.written``): an anchor a cloned repository shipped opens nothing, as
for the MCP ``transcript`` tool. The console's own reading is not logged as recall: the recall
log counts what memory did for the agents.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.console.exits import shown
from memsearch.console.html import Raw, el, link, url
from memsearch.console.timeline_view import HOST_NAMES, host_name
from memsearch.console.web import Reply, Request

if TYPE_CHECKING:
    from memsearch.console.projects import Project
    from memsearch.console.server import Console
    from memsearch.engine.expand import Expansion
    from memsearch.transcript import Turn

__all__ = ["expand_page", "search_api", "search_page", "transcript_page"]

#: Characters of a hit shown before "expand".
SNIPPET_CHARS = 500
DEFAULT_TOP_K = 10
MAX_TOP_K = 100


# --- search -----------------------------------------------------------------------------------


def _search(console: Console, request: Request) -> tuple[list[tuple[Project, dict[str, Any]]], str]:
    """The hits of every selected project, best first (at most ``k``), and the time window line."""
    from memsearch.engine.timeframe import search_window
    from memsearch.errors import InvalidArgumentError

    query = request.arg("q")
    if not query.strip():
        return [], ""
    since, until = request.arg("since") or None, request.arg("until") or None
    phrases = request.arg("phrases", "1") != "0"
    try:
        top_k = int(request.arg("k") or DEFAULT_TOP_K)
    except ValueError:
        top_k = -1
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgumentError(f"k must be 1 to {MAX_TOP_K}", hint="ask for fewer hits")
    text, window = search_window(query, since, until, time_phrases=phrases)  # a bad day: Error
    hits: list[tuple[Project, dict[str, Any]]] = []
    for project in console.selected(request):
        with project.memory() as memory:
            found = memory.search(
                query,
                top_k=top_k,
                since=since,
                until=until,
                time_phrases=phrases,
                recency_half_life=project.config.search.recency_half_life or None,
            )
        hits += [(project, hit) for hit in found]
    hits.sort(key=lambda ph: -float(ph[1].get("score") or 0))
    said = ""
    if window is not None:
        said = f"Time window: {window}" + (
            f' (from "{window.phrase}"; searched for "{text}")' if window.phrase else ""
        )
    return hits[:top_k], said


def _hit(rank: int, project: Project, hit: dict[str, Any], many: bool) -> Raw:
    key = project.key
    content = shown(str(hit.get("content") or ""))
    cut = len(content) > SNIPPET_CHARS
    when = " ".join(str(hit.get(k) or "") for k in ("date", "time")).strip()
    source = shown(_relative(project, str(hit.get("source"))))
    where = f"{source}:{hit.get('start_line')}-{hit.get('end_line')}"
    meta = [
        el("span", f"#{rank}", class_="rank"),
        el("span", f"score {float(hit.get('score') or 0):.3f}", class_="score"),
        el("span", f"relevance {float(hit['relevance']):.2f}", class_="relevance")
        if hit.get("relevance") is not None
        else None,
        el("time", when) if when else None,
        el("span", project.name, class_="project") if many else None,
        el("span", where, class_="path"),
    ]
    return el(
        "li",
        el("p", [[m, " "] for m in meta if m is not None], class_="meta"),
        el("p", shown(str(hit["heading"])), class_="heading") if hit.get("heading") else None,
        el("pre", content[:SNIPPET_CHARS] + ("…" if cut else ""), class_="memory"),
        el(
            "p",
            link("expand", "/expand", p=key, chunk=hit["chunk_hash"]),
            " ",
            el("a", "forget", href=url("/forget", p=key, chunk=hit["chunk_hash"]), class_="forget"),
            class_="actions",
        ),
        class_="hit",
    )


def search_page(console: Console, request: Request) -> Reply:
    key = console.key_of(request)
    form = el(
        "form",
        el("input", type="hidden", name="p", value=key),
        el(
            "label",
            "Search memory ",
            el("input", type="search", name="q", value=request.arg("q"), id="q", autofocus=True, size="40"),
        ),
        " ",
        el(
            "label",
            "since ",
            el("input", name="since", value=request.arg("since"), size="10", placeholder="7d"),
        ),
        " ",
        el("label", "until ", el("input", name="until", value=request.arg("until"), size="10")),
        " ",
        el("label", "hits ", el("input", name="k", value=request.arg("k") or DEFAULT_TOP_K, size="3")),
        " ",
        el("button", "Search", type="submit"),
        method="get",
        action="/search",
        role="search",
        class_="filters",
    )
    from memsearch.errors import MemSearchError

    body: list[Any] = [el("h1", "Search"), form]
    try:
        hits, window = _search(console, request)
    except MemSearchError as exc:  # a bad day or hit count: said under the form, which stays
        body.append(el("p", f"Error: {exc.one_line()}", class_="flash error", role="alert"))
        return console.render(request, "Search", body, active="/search", status=400)
    if window:
        body.append(el("p", shown(window), class_="window"))
    many = len(console.selected(request)) > 1
    if request.arg("q").strip():
        body.append(
            el("ol", [_hit(i, p, h, many) for i, (p, h) in enumerate(hits, 1)], class_="hits")
            if hits
            else el("p", "No results found.")
        )
    return console.render(request, "Search", body, active="/search")


def search_api(console: Console, request: Request) -> Reply:
    hits, window = _search(console, request)
    shown_hits = [
        {**{k: (shown(v) if isinstance(v, str) else v) for k, v in hit.items()}, "project": p.key}
        for p, hit in hits
    ]
    return Reply.json({"window": shown(window), "hits": shown_hits})


def _relative(project: Project, source: str) -> str:
    try:
        return str(Path(source).relative_to(project.scope.project_dir))
    except ValueError:
        return source


# --- expand -----------------------------------------------------------------------------------


def journal_of(project: Project, name: str) -> Path:
    """The journal ``name`` (``YYYY-MM-DD.md``) of ``project``'s memory folder: a URL names an
    entry by its journal's name and line, never by a path (it could name any file)."""
    from memsearch.engine.journal import DAY_FILE_RE
    from memsearch.errors import InvalidArgumentError

    if not DAY_FILE_RE.match(name):
        raise InvalidArgumentError("not a journal of this project", hint="open the entry from the timeline")
    return project.memory_dir / name


def _chunk_at(memory: Any, path: Path, line: int) -> str | None:
    """The stored chunk that holds ``line`` of ``path`` (the one starting there first)."""
    rows = [r for r in memory.query_chunks(str(path)) if r["start_line"] <= line <= r["end_line"]]
    rows.sort(key=lambda r: (r["start_line"] != line, r["start_line"]))
    return str(rows[0]["chunk_hash"]) if rows else None


def expand_page(console: Console, request: Request) -> Reply:
    from memsearch.errors import InvalidArgumentError

    project = console.one(request)
    chunk = request.arg("chunk")
    body: list[Any] = [el("h1", "Memory")]
    with project.memory() as memory:
        if not chunk:
            path = journal_of(project, request.arg("journal"))
            try:
                line = int(request.arg("line"))
            except ValueError:
                raise InvalidArgumentError(
                    "line is not a number", hint="open the entry from the timeline"
                ) from None
            chunk = _chunk_at(memory, path, line) or ""
            if not chunk:
                return _unindexed(console, request, project, path, line)
        result = memory.expand(chunk)
    body.append(_expansion(project, result))
    return console.render(request, "Memory", body, active="/")


def _expansion(project: Project, result: Expansion) -> Raw:
    from memsearch.engine.journal import parse_anchor_fields

    key = project.key
    # One chunk can hold several anchored entries (written under one heading, by hand or by another
    # tool): each gets its conversation, named by host and turn when there is more than one.
    anchors = [f for line in result.content.splitlines() if (f := parse_anchor_fields(line))]
    fields = anchors[0] if anchors else {}
    links = [_conversation_link(project, f, named=len(anchors) > 1) for f in anchors]
    conversations = [part for found in links if found is not None for part in (found, " ")]
    return el(
        "article",
        el(
            "p",
            el(
                "span",
                f"{shown(_relative(project, result.source))} (lines {result.start_line}-{result.end_line})",
                class_="path",
            ),
            class_="meta",
        ),
        el("h2", shown(result.heading)) if result.heading else None,
        _anchor_line(fields),
        el("pre", shown(result.content), class_="memory"),
        el(
            "p",
            *conversations,
            el("a", "forget", href=url("/forget", p=key, chunk=result.chunk_hash), class_="forget"),
            class_="actions",
        ),
        class_="expansion",
    )


def _anchor_line(fields: dict[str, str]) -> Raw | None:
    from memsearch.engine.expand import anchor_host

    if not fields:
        return None
    host = anchor_host(fields) or "hand"
    parts: list[Any] = [el("span", host_name(host), class_=f"host host-{host}")]
    for name in ("session", "turn", "turn_id"):
        if fields.get(name):
            parts += [" ", el("span", f"{name} {shown(fields[name])}", class_="session")]
    return el("p", parts, class_="anchor")


def _conversation_link(project: Project, fields: dict[str, str], *, named: bool = False) -> Raw | None:
    """The link to the conversation an entry's anchor names; ``named``: its text says whose
    (host and turn), for an expansion that holds several entries."""
    from memsearch.engine.expand import anchor_host
    from memsearch.engine.journal import TRANSCRIPT_FIELDS

    where = next((fields[f] for f in TRANSCRIPT_FIELDS if fields.get(f)), "")
    if not where:
        return None
    if _resolved(where) not in _allowed(project):
        return el("span", "(its conversation is not one memsearch recorded: not opened)", class_="muted")
    turn = fields.get("turn") or fields.get("turn_id")
    session = fields.get("session")  # a database holds many sessions (OpenCode, OpenClaw)
    host = anchor_host(fields)
    text = f"conversation ({host_name(host or 'hand')}, turn {turn})" if named and turn else "conversation"
    return link(text, "/transcript", p=project.key, path=where, turn=turn, session=session, host=host)


def _unindexed(console: Console, request: Request, project: Project, path: Path, line: int) -> Reply:
    """A journal entry not in the index yet (written a moment ago): its lines, from the file."""
    from memsearch.engine.forget import blocks_at, read_lines
    from memsearch.redact import Redactor

    blocks = blocks_at(path, line, Redactor(enabled=False))
    if not blocks:
        gone = [el("h1", "Memory"), el("p", "Error: no entry starts there any more (the journal changed).")]
        return console.render(request, "Memory", gone, active="/", status=404)
    block = blocks[0]
    text = "".join(read_lines(path)[block.start : block.end])
    fields = dict(block.anchor)
    body: list[Any] = [
        el("h1", "Memory"),
        el(
            "p",
            f"{shown(_relative(project, str(path)))} (lines {block.start + 1}-{block.end}): not indexed yet",
            class_="meta",
        ),
        _anchor_line(fields),
        el("pre", shown(text), class_="memory"),
        el(
            "p",
            _conversation_link(project, fields),
            " ",
            el(
                "a",
                "forget",
                href=url("/forget", p=project.key, journal=path.name, line=line),
                class_="forget",
            ),
            class_="actions",
        ),
    ]
    return console.render(request, "Memory", body, active="/")


# --- transcript -------------------------------------------------------------------------------


def _resolved(path: str) -> str:
    try:
        return str(Path(path).expanduser().resolve())
    except (OSError, ValueError, RuntimeError):
        return ""


def _allowed(project: Project) -> frozenset[str]:
    """The conversations this project's journals name and memsearch recorded naming there."""
    from memsearch.engine import written
    from memsearch.maintenance.commands import anchored_transcripts

    named = anchored_transcripts(project.memory_dir, project.files_root)
    return named & written.recorded_transcripts(project.memory_dir)


def transcript_page(console: Console, request: Request) -> Reply:
    from memsearch.errors import InvalidArgumentError, SessionNotApplicableError
    from memsearch.transcript import find_turn, read_transcript, select_turns

    project = console.one(request)
    path = _resolved(request.arg("path"))
    if not path or path not in _allowed(project):
        raise InvalidArgumentError(
            "not a conversation this project's memory points at",
            hint="open it from an entry's expand view",
        )
    session = request.arg("session") or None
    try:
        result = read_transcript(path, session=session)
    except SessionNotApplicableError:
        result = read_transcript(path)
    turn = request.arg("turn") or None
    turns = select_turns(result.turns, turn, 3)
    selected = result.turns[find_turn(result.turns, turn)].uuid if turn else None
    host = request.arg("host")
    agent = host_name(host) if host in HOST_NAMES else "Agent"
    body = [
        el("h1", "Conversation"),
        el("p", shown(os.path.basename(path)), " · ", f"{len(result.turns)} turns", class_="meta"),
        el(
            "div",
            [_turn(t, agent, t.uuid == selected and selected is not None) for t in turns],
            class_="conversation",
        ),
    ]
    return console.render(request, "Conversation", body, active="/")


def _turn(turn: Turn, agent: str, selected: bool) -> Raw:
    user = turn.role == "user"
    return el(
        "article",
        el(
            "h3",
            "User" if user else agent,
            el("span", f" {shown(turn.uuid[:12])}", class_="muted") if turn.uuid else None,
        ),
        el("div", shown(turn.text), class_="text") if turn.text else None,
        [
            el(
                "details",
                el("summary", f"ran {shown(tool.name)}: {shown(tool.command)[:200]}"),
                el("pre", shown(tool.output), class_="memory") if tool.output else None,
                class_="tool",
            )
            for tool in turn.tools
        ],
        class_=f"turn turn-{'user' if user else 'assistant'}" + (" selected" if selected else ""),
        id=f"turn-{turn.uuid}" if turn.uuid else None,
        aria_current="true" if selected else None,
    )
