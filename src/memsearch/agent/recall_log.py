"""The recall log: what memory did in each session, kept on this machine for ``stats --recall``.

Why: recall that silently never fires is the common failure of agent memory (a hint the model never
read, no search in hundreds of sessions), and nobody notices without numbers. So each project's
collection has a small append-only log of JSON lines: the tokens memsearch injected (session start,
each prompt), the prompts whose auto-inject found nothing at or above the strong-match floor and
so injected nothing (``skip``), the searches the model made (CLI ``search`` from a recall skill,
the MCP ``search`` tool) with their hit counts, the hits it expanded (``expand``, ``transcript``),
the journal entries captured, and the model calls memsearch made itself (``llm``: turn summaries,
maintenance tasks, with their tokens; never their text). ``memsearch stats --recall`` sums it per
session and flags the sessions where memory was never consulted
(:mod:`memsearch.agent.recall_report`).

Privacy: the log never leaves the machine. It lives in ``~/.memsearch/recall/<collection>.jsonl``
(a private 0700 folder, the file 0600, opened without following links, appended under a lock so
concurrent processes lose no line), rotated to ``.1`` once it passes :data:`MAX_BYTES` (at most
two files). A query is stored only after the exits' redaction (:mod:`memsearch.exits`, always on)
took secrets and ``<private>`` spans out, and cut to :data:`QUERY_CHARS`. ``[telemetry] recall = false`` or
``MEMSEARCH_RECALL_LOG=0`` switches it off (nothing is written). Writing never raises: a full disk
must not stop a hook or a search.

Attribution: a hook knows its session and host. A ``memsearch`` command the model runs learns them
from ``MEMSEARCH_SESSION`` / ``MEMSEARCH_HOST``, which the session-start hook exports to the agent's
shell where the host allows it (Claude Code's ``CLAUDE_ENV_FILE``), or from the host's own variable
(Codex's ``CODEX_THREAD_ID``). Without them an event is the "unknown" session's (other hosts'
shells, an MCP server no host variable reaches, a person at a terminal).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "COLLECTION_ENV",
    "ENV_SWITCH",
    "HOST_ENV",
    "SESSION_ENV",
    "SessionRecall",
    "enabled",
    "export_session",
    "read_events",
    "record",
    "record_llm",
    "summarise",
]

ENV_SWITCH = "MEMSEARCH_RECALL_LOG"
SESSION_ENV = "MEMSEARCH_SESSION"
HOST_ENV = "MEMSEARCH_HOST"
#: The collection ``memsearch transcript`` (which opens no store) logs under.
COLLECTION_ENV = "MEMSEARCH_RECALL_COLLECTION"
#: Where Claude Code lets a SessionStart hook export variables to the session's Bash commands.
CLAUDE_ENV_FILE = "CLAUDE_ENV_FILE"
#: Size at which the log moves to ``<name>.1`` (replacing the older one) and starts over.
MAX_BYTES = 1 << 20
#: Characters of a (redacted) query kept.
QUERY_CHARS = 200
UNKNOWN = "unknown"
_FOLDER = "recall"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_SESSION_OK = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def enabled(cfg: Any, env: Mapping[str, str] | None = None) -> bool:
    """Whether the log is on: ``telemetry.recall`` and ``MEMSEARCH_RECALL_LOG`` (a false value wins)."""
    from memsearch.config.envvars import env_flag

    on = bool(getattr(getattr(cfg, "telemetry", None), "recall", True))
    try:
        return on and env_flag(ENV_SWITCH, env, default=True)
    except ValueError:
        return False


def log_path(collection: str) -> Path:
    from memsearch.config.files import memsearch_home

    name = _UNSAFE.sub("_", collection)[:120] or "default"
    return memsearch_home() / _FOLDER / f"{name}.jsonl"


#: Variables a host itself gives the commands its model runs, naming the session its hooks get as
#: ``session_id``: (variable, host). Codex 0.171.0 sets ``CODEX_THREAD_ID`` in every shell command.
HOST_SESSION_VARIABLES: tuple[tuple[str, str], ...] = (("CODEX_THREAD_ID", "codex"),)


def caller(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The session and host a command runs for ("" unknown): the variables the session-start hook
    exported (:func:`export_session`), else a host's own (:data:`HOST_SESSION_VARIABLES`)."""
    env = os.environ if env is None else env
    session = env.get(SESSION_ENV, "").strip()
    host = env.get(HOST_ENV, "").strip()
    if not session:
        for variable, name in HOST_SESSION_VARIABLES:
            session = env.get(variable, "").strip()
            if session:
                host = host or name
                break
    return (session if _SESSION_OK.match(session) else ""), (host if _SESSION_OK.match(host) else "")


def record(
    cfg: Any,
    collection: str,
    event: str,
    *,
    session: str | None = None,
    host: str | None = None,
    env: Mapping[str, str] | None = None,
    query: str | None = None,
    **fields: Any,
) -> None:
    """Append one event (``inject``, ``skip``, ``search``, ``expand``, ``capture``) to ``collection``'s log.
    ``session``/``host`` default to the caller's (:func:`caller`). Never raises."""
    try:
        if not enabled(cfg, env):
            return
        known_session, known_host = caller(env)
        line: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "event": event,
            "session": session or known_session,
            "host": host or known_host,
            **fields,
        }
        if query is not None:
            from memsearch import exits

            line["query"] = exits.out(query, "recall-log", cfg)[:QUERY_CHARS]
        _append(log_path(collection), json.dumps(line, ensure_ascii=False) + "\n")
    except Exception:  # telemetry must never stop a hook or a search
        return


def record_llm(
    cfg: Any,
    collection: str,
    purpose: str,
    backend: str,
    prompt: str,
    answer: str | None,
    seconds: float,
    **fields: Any,
) -> None:
    """Log one model call memsearch made itself (``purpose``: ``summary``, ``maintenance:<task>``;
    ``backend``: the provider or host CLI) with its prompt's and answer's tokens, counted with the
    token budget's tokenizer (the host's own is unknown here). ``answer`` None: the call failed.
    Nothing of the texts is kept. Never raises."""
    try:
        if not enabled(cfg, fields.get("env")):
            return
        from memsearch.agent.context_budget import count_tokens

        record(
            cfg,
            collection,
            "llm",
            purpose=purpose,
            backend=backend,
            prompt_tokens=count_tokens(prompt),
            answer_tokens=count_tokens(answer or ""),
            seconds=round(seconds, 3),
            ok=answer is not None,
            **fields,
        )
    except Exception:  # telemetry must never stop a summary or a maintenance run
        return


def _append(path: Path, text: str) -> None:
    """Append ``text`` under the log's lock (one ``write``), rotating first when it is too big."""
    from memsearch import private
    from memsearch.files import lock_file

    private.private_dir(path.parent)
    with lock_file(path.with_name(path.name + ".lock")):
        fd = private.open_ours(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            if os.fstat(fd).st_size >= MAX_BYTES:
                os.close(fd)
                fd = -1
                os.replace(path, path.with_name(path.name + ".1"))
                fd = private.open_ours(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, text.encode("utf-8"))
        finally:
            if fd >= 0:
                os.close(fd)


def read_events(collection: str, since: float = 0.0) -> list[dict[str, Any]]:
    """The logged events of ``collection`` at or after ``since`` (epoch seconds), oldest first; the
    rotated file included. Lines that are not JSON objects are skipped."""
    from memsearch import private

    path = log_path(collection)
    events: list[dict[str, Any]] = []
    for part in (path.with_name(path.name + ".1"), path):
        try:
            data = private.read_private(part, limit=2 * MAX_BYTES)
        except OSError:
            continue
        for raw in data.decode("utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                item = json.loads(raw)
                if isinstance(item, dict) and float(item.get("ts", 0)) >= since:
                    events.append(item)
    events.sort(key=lambda e: float(e.get("ts", 0)))
    return events


@dataclass
class SessionRecall:
    """One session's numbers (``stats --recall``)."""

    session: str
    host: str
    started: float
    injected_tokens: int = 0
    injections: int = 0
    #: Prompts the auto-inject searched for and found nothing strong enough to inject.
    skips: int = 0
    searches: int = 0
    hits: int = 0
    expands: int = 0
    captures: int = 0

    @property
    def consulted(self) -> bool:
        return bool(self.searches or self.expands)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "consulted": self.consulted}


_COUNTERS = {
    "search": "searches",
    "expand": "expands",
    "capture": "captures",
    "inject": "injections",
    "skip": "skips",
}


def summarise(events: list[dict[str, Any]]) -> list[SessionRecall]:
    """Per session (in order of first event), what was injected, searched, expanded and captured.
    Other events (an ``llm`` call of a summary or of maintenance) are no session's recall."""
    sessions: dict[str, SessionRecall] = {}
    for event in events:
        counter = _COUNTERS.get(str(event.get("event")))
        if counter is None:
            continue
        key = str(event.get("session") or "") or UNKNOWN
        row = sessions.get(key)
        if row is None:
            row = sessions[key] = SessionRecall(key, "", float(event.get("ts", 0)))
        row.host = row.host or str(event.get("host") or "")
        setattr(row, counter, getattr(row, counter) + 1)
        if counter == "injections":
            row.injected_tokens += int(event.get("tokens") or 0)
        if counter == "searches":
            row.hits += int(event.get("hits") or 0)
    return list(sessions.values())


def export_session(env: Mapping[str, str], session: str, host: str, collection: str) -> None:
    """Tell the agent's shell which session and host it is, where the host has a way
    (``CLAUDE_ENV_FILE``: lines Claude Code sources before each Bash command). Never raises."""
    target = env.get(CLAUDE_ENV_FILE, "")
    if not target or not all(_SESSION_OK.match(value) for value in (session, host, collection)):
        return
    from memsearch import files

    with contextlib.suppress(OSError):
        fd = files.open_own(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            line = f"export {SESSION_ENV}={session} {HOST_ENV}={host} {COLLECTION_ENV}={collection}\n"
            os.write(fd, line.encode())
        finally:
            os.close(fd)
