"""The four event handlers every platform shares, and what they need: status, recall, capture, index.

- ``session-start``: status line for the user; recent journal bullets for the model; background
  indexing (a watch kept for the session, or a one-shot index). Reads only the newest journals and
  never opens the store or loads a model in the hook's own process.
- ``prompt-submit``: a one-line hint to the model that past sessions are searchable (only when
  there is memory), plus, with ``plugins.<platform>.prompt_recall.auto_inject``, the best search hits.
- ``stop``: extract the last turn, skip it if already journaled, summarise, append, index.
- ``session-end``: release this session's hold on the watch (stopping it if it was the last).
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memsearch.agent.framing import DATA_NOTE, frame
from memsearch.agent.hooks import processes
from memsearch.agent.hooks.base import Capture, HookContext, Reply, render_hook_json
from memsearch.agent.hooks.summarize import log, redact_capture, summarize_capture
from memsearch.agent.spawn import NO_WATCH_ENV, memsearch_argv, spawn_detached
from memsearch.engine import journal

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.interface import Memory
    from memsearch.index_report import IndexReport

__all__ = [
    "EVENTS",
    "MIN_PROMPT_CHARS",
    "SYNC_ENV",
    "finish_capture",
    "finish_detached",
    "index_memory",
    "memory_contained",
    "missing_key",
    "new_capture",
    "prompt_submit",
    "search_memory",
    "session_end",
    "session_start",
    "status_line",
    "stop",
    "store_flags",
]

#: Prompts shorter than this ("ok", "go on") get no recall hint.
MIN_PROMPT_CHARS = 10
#: Journals shown at session start, and lines of each.
RECENT_FILES = 2
RECENT_LINES = 40
#: An index run "running" for longer than this is reported as stuck.
STUCK_AFTER = dt.timedelta(hours=1)
#: Characters of each auto-injected search hit.
SNIPPET_CHARS = 300


# --- status -----------------------------------------------------------------------------------


def missing_key(cfg: MemSearchConfig, env: Mapping[str, str]) -> str:
    """The key variable the embedding provider lacks ("" when nothing is missing).

    A custom ``embedding.base_url`` (a proxy or a local server) may need no key, so it counts as set.
    """
    from memsearch.embeddings import PROVIDERS

    spec = PROVIDERS.get(cfg.embedding.provider)
    var = (spec.key_env if spec else None) or ""
    if not var or cfg.embedding.api_key or cfg.embedding.base_url or env.get(var, "").strip():
        return ""
    return var


def index_warning(ctx: HookContext) -> str:
    """A warning when ``.index-state.json`` says the last index failed or has hung. Read as a
    project file (a cloned repository may ship a FIFO or a link under its name)."""
    from memsearch.engine.project_files import read_project_text

    try:
        state = json.loads(read_project_text(ctx.memsearch_dir / ".index-state.json", ctx.memsearch_dir))
    except ValueError:  # missing, refused (with a warning line) or damaged
        return ""
    if not isinstance(state, dict):
        return ""
    status = state.get("status")
    if status in ("error", "degraded"):
        return "WARNING: memory index may be stale; run the memory-config skill to diagnose"
    if status == "running":
        try:
            started = dt.datetime.fromisoformat(str(state.get("last_started_at", "")).replace("Z", "+00:00"))
        except ValueError:
            return ""
        if started.tzinfo is not None and dt.datetime.now(dt.timezone.utc) - started > STUCK_AFTER:
            return (
                "WARNING: memory index has been running for over 1h; run the memory-config skill to diagnose"
            )
    return ""


def status_line(ctx: HookContext) -> str:
    """``[memsearch v<version>] embedding: <provider>/<model> | milvus: <uri> | collection: <name>``."""
    from memsearch.version import package_version

    cfg = ctx.config
    return (
        f"[memsearch v{package_version()}] embedding: {cfg.embedding.provider}/"
        f"{cfg.embedding.model or 'unknown'} | milvus: {cfg.milvus.uri} | collection: {ctx.collection}"
    )


# --- session start ----------------------------------------------------------------------------


def _start_background(ctx: HookContext) -> str:
    """Start the platform's background indexing; a warning when that failed ("" otherwise)."""
    if ctx.flag(NO_WATCH_ENV) or not memory_contained(ctx):
        return ""
    memory = ctx.memory_dir
    description = ctx.description()
    try:
        if ctx.platform.keep_watch and not ctx.input.session_id:
            # No session: a person ran the hook by hand (the troubleshooting command); a watch
            # would be tied to their shell and outlive the check, and no session-end will come.
            return "(no session id in the hook input, as when run by hand: no background watch started)"
        if ctx.platform.keep_watch:
            users = ctx.memsearch_dir / processes.WATCH_SESSIONS
            argv = processes.watch_argv(memory, ctx.collection, description, users_file=users)
            user = processes.WatchUser.of(_session_key(ctx), processes.host_process())
            processes.retain_watch(ctx.memsearch_dir, memory, user, argv, cwd=ctx.project_dir)
        elif journal.journal_files(memory, 1):
            argv = processes.index_argv(memory, ctx.collection, description)
            processes.start_index(ctx.memsearch_dir, memory, argv, cwd=ctx.project_dir)
    except OSError as exc:
        log(f"could not start background indexing: {exc}")
        return f"WARNING: background indexing did not start ({exc.strerror or exc})"
    return ""


def _maintenance(ctx: HookContext) -> str:
    """PROJECT.md and USER.md for the model, and due maintenance tasks started in the background
    (detached: the hook never waits for a model). Any failure is logged, never raised."""
    from memsearch import maintenance

    try:
        maintenance.start_due_tasks(ctx)
    except Exception as exc:
        log(f"maintenance tasks not started: {type(exc).__name__}: {exc}")
    try:
        return maintenance.session_context(ctx)
    except Exception as exc:
        log(f"PROJECT.md/USER.md not shown: {type(exc).__name__}: {exc}")
        return ""


def _session_key(ctx: HookContext) -> str:
    return ctx.input.session_id or "unknown-session"


def session_start(ctx: HookContext) -> Reply:
    status = status_line(ctx)
    ctx.memory_dir.mkdir(parents=True, exist_ok=True)
    key = missing_key(ctx.config, ctx.env)
    if key:
        index = f"memsearch index {shlex.quote(str(ctx.memory_dir))}{store_flags(ctx)} --force"
        return Reply(
            f"{status} | ERROR: {key} not set — memory search disabled | Tip: switch to free local "
            f"embedding: memsearch config set embedding.provider onnx && {index}"
        )
    from memsearch.skills import candidates_hint

    skills_hint = candidates_hint(ctx.memsearch_dir)
    notes = [n for n in (index_warning(ctx), _start_background(ctx), skills_hint) if n]
    days = journal.recent_days(
        ctx.memory_dir, files=RECENT_FILES, max_lines=RECENT_LINES, root=ctx.files_root
    )
    standing = _maintenance(ctx)
    context = _session_context(ctx, days, skills_hint, standing)
    _log_injection(ctx, "session-start", context)
    return Reply(" | ".join([status, *notes]), context)


def _compose(ctx: HookContext, recent: str, skills_hint: str, standing: str) -> str:
    """The session-start context: recent journals, the recall hint, skill candidates, PROJECT.md
    and USER.md, with the data note once when any memory text is in it."""
    context = frame(recent, "recent journals") if recent else ""
    if context and "prompt-submit" not in ctx.platform.events:
        # A host with a prompt hook gets the hint with the prompt (once per turn), not here too.
        context += "\n\n" + ctx.platform.recall_hint
    if skills_hint and ctx.platform.render is not render_hook_json:
        # OpenCode and OpenClaw show the user no status line: the model hears of the candidates.
        context = f"{context}\n\n{skills_hint}" if context else skills_hint
    context = "\n\n".join(part for part in (context, standing) if part)
    if recent or standing:  # journal text or PROJECT.md/USER.md: say once that it is data
        context = f"{DATA_NOTE}\n\n{context}"
    return context


def _session_context(
    ctx: HookContext, days: list[tuple[str, list[str]]], skills_hint: str, standing: str
) -> str:
    """:func:`_compose` within ``context.session_start_tokens``: older journal days and entries
    are left out first (one line says how many, and how to search them); whatever still does not
    fit is cut (:func:`memsearch.agent.context_budget.clip`)."""
    from memsearch.agent import context_budget as cb

    budget = ctx.config.context.session_start_tokens
    full = _compose(ctx, journal.render_days(days), skills_hint, standing)
    # a token covers at least a character; an unchanged context was counted at an earlier start
    if len(full) <= budget or cb.count_remembered(full) <= budget:
        return full
    search = f'memsearch search "<topic>"{store_flags(ctx)}'
    reserve = cb.count_tokens(cb.left_out_line(999, "older journal entries", search))
    # everything but the entries: the note, the frame, the hint, "# Recent Memory" and day headings
    bare = journal.render_days([(name, []) for name, _lines in days])
    room = budget - cb.count_tokens(_compose(ctx, bare, skills_hint, standing)) - reserve
    recent, dropped = cb.fit_journal(days, max(room, 0))
    line = cb.left_out_line(dropped, "older journal entries", search) if dropped else ""
    context, cut = cb.clip(_compose(ctx, recent, skills_hint, standing), budget - cb.count_tokens(line) - 2)
    if cut and not line:
        line = cb.left_out_line(cut, "tokens of the session context", search)
        context, _cut = cb.clip(context, budget - cb.count_tokens(line) - 2)
    return "\n\n".join(part for part in (context, line) if part)


def _log_injection(ctx: HookContext, via: str, context: str) -> None:
    """Record what the hook injected (``memsearch.agent.recall_log``); at session start, also tell the
    agent's shell its session and host where the host allows it."""
    from memsearch.agent import recall_log

    session = ctx.input.session_id
    if via == "session-start" and session:
        recall_log.export_session(ctx.env, session, ctx.platform.name, ctx.collection)
    if not context or not recall_log.enabled(ctx.config, ctx.env):
        return
    from memsearch.agent.context_budget import count_remembered

    recall_log.record(
        ctx.config,
        ctx.collection,
        "inject",
        session=session,
        host=ctx.platform.name,
        env=ctx.env,
        via=via,
        tokens=count_remembered(context),
    )


# --- prompt submit ----------------------------------------------------------------------------


def open_project_memory(ctx: HookContext) -> Memory:
    """This project's memory (its memory folder, with the watch's settings), through the store's
    owner; a service is started on demand when nobody owns the store (``service.autostart``). A
    hook process searches or indexes once and exits, so a model it loads itself is dropped as
    soon as it has embedded. Contained (``follow_links=False``): a link in the folder, which a cloned
    repository may have put there, is never indexed."""
    from memsearch.engine.memory import open_memory

    return open_memory(
        ctx.config,
        [str(ctx.memory_dir)],
        start=True,
        description=ctx.description(),
        follow_links=False,
    )


def memory_contained(ctx: HookContext) -> bool:
    """Whether the memory folder lies inside the project's files root; a ``.memsearch`` or
    ``memory`` folder that is a link out of it is never indexed (one warning line says so)."""
    from memsearch.engine.project_files import is_inside, warn

    if is_inside(ctx.memory_dir, ctx.files_root):
        return True
    warn(ctx.memory_dir, f"outside {ctx.files_root} (a folder on the way is a symbolic link); not indexed")
    return False


def search_memory(ctx: HookContext, query: str, top_k: int) -> list[dict[str, Any]]:
    """Search this project's collection, through the memory service when one runs: the hits at or
    above the strong-match floor (``search.min_relevance``) only. The query is a user's prompt, not
    words chosen for a search: a "today" in "let's finish this today" is no window, so time
    phrases are not read (the recall skill's own searches read them)."""
    with open_project_memory(ctx) as memory:
        floor = ctx.config.search.min_relevance or None
        return memory.search(query, top_k=top_k, time_phrases=False, min_relevance=floor)


def store_flags(ctx: HookContext) -> str:
    """The flags a ``memsearch`` command suggested to the model or the user must carry to reach this
    project's memory, each after a space: ``--collection`` (derived from the project, so no config
    file names it), and ``--milvus-uri`` with the absolute path when ``milvus.uri`` is a relative
    Milvus Lite path (resolved against the working directory, which may be another folder when the
    command runs). Any other ``milvus.uri`` comes from the global config (a project file may not set
    it), which that command reads too."""
    from pathlib import Path

    from memsearch.store.uri import resolve_uri

    flags = f" --collection {shlex.quote(ctx.collection)}"
    uri = ctx.config.milvus.uri
    location = resolve_uri(uri)
    if location.path is not None and not Path(uri.strip()).expanduser().is_absolute():
        flags = f" --milvus-uri {shlex.quote(str(location.path))}" + flags
    return flags


def _hit_line(hit: dict[str, Any]) -> str:
    source = str(hit.get("source", "")).rsplit("/", 1)[-1]
    heading = f" › {hit['heading']}" if hit.get("heading") else ""
    snippet = " ".join(str(hit.get("content", "")).split())
    if len(snippet) > SNIPPET_CHARS:
        snippet = snippet[:SNIPPET_CHARS].rstrip() + " …"
    return f"- [{source}{heading}] {snippet} (chunk_hash {hit.get('chunk_hash', '')})"


def _format_hits(ctx: HookContext, hits: list[dict[str, Any]], budget: int) -> str:
    """The hits that fit ``budget`` tokens, lowest-ranked left out first (one line says so)."""
    from memsearch.agent import context_budget as cb

    head = (
        "[memsearch] Memories that may be relevant (expand one with "
        f"`memsearch expand <chunk_hash>{store_flags(ctx)}`). {DATA_NOTE}"
    )
    lines = [_hit_line(hit) for hit in hits]
    more = cb.left_out_line(len(lines), "lower-ranked hits", f'memsearch search "<prompt>"{store_flags(ctx)}')
    room = budget - cb.count_tokens(head) - cb.count_tokens(more) - 20
    fitted = cb.fit_items(lines, max(room, 0), render=str)
    if not fitted.kept:
        return ""
    text = head + "\n" + frame("\n".join(fitted.kept), "search hits")
    if fitted.dropped:
        text += "\n" + more.replace(f" {len(lines)} ", f" {fitted.dropped} ", 1)
    return text


def prompt_submit(ctx: HookContext) -> Reply:
    """The recall hint for the prompt; with ``prompt_recall.auto_inject``, the best hits with it.
    When the auto-inject's search finds nothing at or above the strong-match floor, nothing is
    injected, not even the hint (memory holds nothing on this prompt: a hint would send the model
    searching for it), and the recall log counts a ``skip``."""
    prompt = ctx.input.prompt.strip()
    if len(prompt) < MIN_PROMPT_CHARS or not journal.journal_files(ctx.memory_dir, 1):
        return Reply()
    context = ctx.platform.recall_hint
    recall = ctx.plugin.prompt_recall
    budget = ctx.config.context.prompt_hint_tokens
    if recall.auto_inject:
        from memsearch import redact
        from memsearch.agent.context_budget import count_tokens
        from memsearch.errors import MemSearchError

        # The prompt is the query: redacted first, so a pasted key or a <private> span is never
        # embedded, nor sent to a remote embedding provider.
        query = redact.current(ctx.config, ctx.env).text(prompt, "query")
        hits: list[dict[str, Any]] | None = (
            None  # None: not searched (nothing left to search with, a failure)
        )
        try:
            hits = search_memory(ctx, query, recall.top_k) if query.strip() else None
        except MemSearchError as exc:
            log(f"auto-inject search failed: {exc.one_line()}")
        if hits == []:
            _log_skip(ctx)
            return Reply()
        shown = _format_hits(ctx, hits, budget - count_tokens(context) - 2) if hits else ""
        if shown:
            context += "\n\n" + shown
    context = _within(context, budget)
    _log_injection(ctx, "prompt", context)
    return Reply(context=context)


def _log_skip(ctx: HookContext) -> None:
    """Record a prompt whose auto-inject found nothing strong enough (``memsearch.agent.recall_log``)."""
    from memsearch.agent import recall_log

    recall_log.record(
        ctx.config,
        ctx.collection,
        "skip",
        session=ctx.input.session_id,
        host=ctx.platform.name,
        env=ctx.env,
        via="prompt",
        floor=ctx.config.search.min_relevance,
    )


def _within(text: str, budget: int) -> str:
    """``text`` cut to ``budget`` tokens when it is over (a hint longer than a small budget)."""
    from memsearch.agent import context_budget as cb

    if len(text) <= budget:  # a token covers at least one character: no need to count
        return text
    return cb.clip(text, budget)[0]


# --- stop -------------------------------------------------------------------------------------


def index_memory(ctx: HookContext) -> None:
    """Index the memory folder: through the service when one runs, else directly.

    Failures are reported on stderr and in ``.index-state.json``, never raised: the journal entry is
    already on disk and the next index (or the watch) picks it up.
    """
    from memsearch.index_state import IndexRun

    paths = [str(ctx.memory_dir)]
    if not memory_contained(ctx):
        return
    try:
        run = IndexRun.of("index", paths, ctx.config, memsearch_dir=str(ctx.memsearch_dir))
        ctx.description()
    except Exception as exc:
        log(f"not indexed: {type(exc).__name__}: {exc}")
        return
    try:
        report = run.record(lambda: _index_report(ctx))
    except Exception as exc:  # a failed index must never lose or undo the journal entry
        from memsearch.errors import MemSearchError

        detail = exc.one_line() if isinstance(exc, MemSearchError) else f"{type(exc).__name__}: {exc}"
        log(f"journal entry saved but not indexed: {detail}")
        return
    for failure in report.failed_files:
        log(f"not indexed: {failure.path}: {failure.error}")


def _index_report(ctx: HookContext) -> IndexReport:
    """Index the memory folder at the store's owner (an owner that goes away mid-request is
    replaced by the seam, ``memsearch.service.owner``)."""
    with open_project_memory(ctx) as memory:
        return memory.index_with_report()


def finish_capture(ctx: HookContext, capture: Capture) -> journal.AppendResult:
    """Summarise, append to today's journal, and index (when something was written).

    The turn is redacted before anything reads it (:func:`redact_capture`): the summariser, a
    remote provider included, never sees a private span or a secret; a turn with no text left
    (entirely ``<private>``) is not summarised and leaves no entry."""
    from memsearch import redact

    redactor = redact.current(ctx.config, ctx.env)
    capture, had_text = redact_capture(redactor, capture)
    if had_text and not (capture.user_text.strip() or capture.reply_text.strip()):
        return journal.AppendResult(journal.day_file(ctx.memory_dir, ctx.now), False)
    bullets, source = summarize_capture(ctx, capture)
    entry = journal.JournalEntry(bullets, capture.anchor, capture.identity)
    result = journal.append_entry(
        ctx.memory_dir, entry, when=ctx.now, title=ctx.platform.title, redactor=redactor
    )
    if result.written:
        from memsearch.agent import recall_log

        recall_log.record(
            ctx.config,
            ctx.collection,
            "capture",
            session=ctx.input.session_id,
            host=ctx.platform.name,
            env=ctx.env,
        )
        if source == "extract":
            log("no summariser answered; wrote a plain extract of the turn")
        index_memory(ctx)
    return result


#: Set to 1 to capture in the hook's own process even on hosts that detach it (debugging).
SYNC_ENV = "MEMSEARCH_HOOK_SYNC"
#: Where detached capture workers report problems, and the size at which it starts over.
WORKER_LOG = ".worker.log"
WORKER_LOG_MAX = 1 << 20


def _detach(ctx: HookContext, capture: Capture | None) -> None:
    """Hand the capture (or, when None, the reading of the turn too) to a detached worker."""
    data = {"context": ctx.to_json(), "capture": capture.to_json() if capture is not None else None}
    argv = memsearch_argv("hook", ctx.platform.name, "stop", "--worker")
    ctx.memsearch_dir.mkdir(parents=True, exist_ok=True)
    log = ctx.memsearch_dir / WORKER_LOG
    try:
        keep = log.stat().st_size < WORKER_LOG_MAX  # workers append; start over once it grows large
    except OSError:
        keep = True
    payload = json.dumps(data).encode("utf-8")
    pid = spawn_detached(argv, stdin_data=payload, log=log, append=keep, cwd=ctx.project_dir)
    if ctx.platform.keep_watch:  # the watch must outlive a host that exits now (``claude -p``)
        processes.hold_watch(ctx.memsearch_dir, ctx.memory_dir, processes.WatchUser.of(_worker_key(pid), pid))


def _worker_key(pid: int) -> str:
    return f"capture-{pid}"


def new_capture(ctx: HookContext) -> Capture | None:
    """The platform's capture of the turn that just ended; None when there is nothing to record or
    the journal already has it (a repeated Stop of the same turn gets no second summary)."""
    capture = ctx.platform.capture(ctx)
    if capture is None:
        return None
    probe = journal.JournalEntry(["-"], capture.anchor, capture.identity)
    if journal.find_duplicate(ctx.memory_dir, probe, ctx.now) is not None:
        return None
    return capture


def finish_detached(ctx: HookContext, capture: Capture | None) -> bool:
    """The detached worker's part: capture (when the hook left that to it), summarise, write, index,
    then let go of the watch it held. True when an entry was written."""
    import os

    try:
        if capture is None:
            capture = new_capture(ctx)
        return capture is not None and finish_capture(ctx, capture).written
    finally:
        if ctx.platform.keep_watch:
            processes.release_watch(ctx.memsearch_dir, ctx.memory_dir, _worker_key(os.getpid()))


def stop(ctx: HookContext) -> Reply:
    if ctx.input.stop_hook_active or missing_key(ctx.config, ctx.env):
        return Reply()
    if not ctx.plugin.summarize.enabled:
        return Reply()
    detach = ctx.platform.detach_capture and not ctx.flag(SYNC_ENV)
    if detach and ctx.platform.capture_in_worker:
        _detach(ctx, None)  # the host has not written the turn yet: the worker waits for it
        return Reply()
    capture = new_capture(ctx)
    if capture is None:
        return Reply()
    if detach:
        _detach(ctx, capture)
    else:
        finish_capture(ctx, capture)
    return Reply()


# --- session end ------------------------------------------------------------------------------


def session_end(ctx: HookContext) -> Reply:
    if ctx.platform.keep_watch and not ctx.flag(NO_WATCH_ENV):
        processes.release_watch(ctx.memsearch_dir, ctx.memory_dir, _session_key(ctx))
    return Reply()


#: Event name → handler. Platforms say which of these their host sends (``Platform.events``).
EVENTS: dict[str, Callable[[HookContext], Reply]] = {
    "session-start": session_start,
    "prompt-submit": prompt_submit,
    "stop": stop,
    "session-end": session_end,
}
