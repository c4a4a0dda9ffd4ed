"""OpenClaw: the adapter row, its turn capture and its ``openclaw agent exec`` summariser.

Host facts this row encodes (checked against OpenClaw 2026.9.6): OpenClaw plugins are JavaScript
modules that register tools and listen to typed hooks. The plugin module in ``plugins/openclaw``
passes ``before_prompt_build`` (may return ``{prependContext}``) and ``agent_end`` (the run is over;
the event carries the run's ``messages``) to ``memsearch hook openclaw <event>`` as JSON on stdin
(``sessionId``, ``agentId``, ``workspaceDir``, and ``messages`` for ``agent_end``); everything else
happens here.

- The project is the agent's workspace (``workspaceDir``; the plugin module runs every command in
  it, so actions such as ``collection`` agree with the hooks).
- The turn comes from ``agent_end``'s ``messages``, so capture needs no file. The anchor points at
  the transcript OpenClaw keeps: since 2026.9 the agent database
  ``<state>/agents/<agent>/agent/openclaw-agent.sqlite`` (table ``transcript_events``; ``<state>``
  is ``$OPENCLAW_STATE_DIR`` or ``~/.openclaw``), before that the session file
  ``<state>/agents/<agent>/sessions/<session>.jsonl``; both are read by :mod:`memsearch.transcript`
  (the database with ``--session``). Without messages (an older host), the turn is read from there.
- Day files get a ``# YYYY-MM-DD`` title, dated by the *local* clock (the original named the file
  by the UTC date but stamped local times, so entries near midnight landed in the wrong day).
- The anchor keeps OpenClaw's ``session:<id> transcript:<path>`` and adds ``turn:<id>`` (the
  transcript entry id of the user message), which identifies the turn for dedup and for
  ``memsearch transcript --turn``.
- The native summariser is ``openclaw agent exec --message-file -``: one isolated headless turn with
  a temporary state folder (no session of the user's grows with summaries), the prompt on stdin.
  The original built a ``bash -c`` string, so ``$(...)`` in a user's message ran on the user's
  machine; here no shell and no argv parsing ever sees the prompt.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.agent.hooks.base import Capture, HookContext, HookInput, Platform, plugin_reply
from memsearch.agent.hooks.collection import absolute_path
from memsearch.agent.hooks.summarize import host_cli, log, render_turn, run_summarizer

if TYPE_CHECKING:
    from memsearch.transcript import Turn

__all__ = [
    "PLATFORM",
    "agent_db",
    "capture_session_turn",
    "openclaw_summarizer",
    "project_dir",
    "read_input",
    "session_file",
    "state_dir",
]

AGENT_NAME = "OpenClaw"
DEFAULT_AGENT = "main"


#: Where OpenClaw keeps its state when not in ``~/.openclaw``.
STATE_DIR_ENV = "OPENCLAW_STATE_DIR"
#: The agent database, under ``<state>/agents/<agent>/agent/`` (OpenClaw 2026.9).
AGENT_DB = "openclaw-agent.sqlite"


def state_dir(env: Mapping[str, str]) -> Path:
    """``$OPENCLAW_STATE_DIR``, else ``~/.openclaw``: the folder holding ``agents/``."""
    explicit = env.get(STATE_DIR_ENV, "").strip()
    if explicit:
        return Path(absolute_path(explicit))
    return Path(env.get("HOME") or Path.home()) / ".openclaw"


def read_input(data: Mapping[str, Any]) -> HookInput:
    """OpenClaw's camelCase event fields (``sessionId``, ``workspaceDir``) or our snake_case ones."""

    def text(*names: str) -> str:
        for name in names:
            value = data.get(name)
            if isinstance(value, str) and value:
                return value
        return ""

    return HookInput(
        session_id=text("session_id", "sessionId"),
        transcript_path=text("transcript_path", "sessionFile"),
        cwd=text("cwd", "workspaceDir"),
        prompt=text("prompt"),
        raw=dict(data),
    )


def _agent(hook_input: HookInput) -> str:
    value = hook_input.raw.get("agent_id") or hook_input.raw.get("agentId")
    agent = value if isinstance(value, str) and value.strip() else DEFAULT_AGENT
    return agent.replace("/", "_")


def project_dir(hook_input: HookInput, env: Mapping[str, str]) -> Path:
    """The agent's workspace: ``workspaceDir`` when the event names it, else the folder the plugin
    ran the hook in (the plugin module runs every command in the workspace)."""
    start = hook_input.cwd if hook_input.cwd and os.path.isdir(hook_input.cwd) else os.getcwd()
    return Path(absolute_path(start))


def session_file(hook_input: HookInput, env: Mapping[str, str]) -> Path | None:
    """Where OpenClaw before 2026.9 kept this session's JSONL (an explicit path wins); None without
    a session."""
    if hook_input.transcript_path:
        return Path(absolute_path(hook_input.transcript_path))
    if not hook_input.session_id or "/" in hook_input.session_id:
        return None
    return state_dir(env) / "agents" / _agent(hook_input) / "sessions" / f"{hook_input.session_id}.jsonl"


def agent_db(hook_input: HookInput, env: Mapping[str, str]) -> Path:
    """The agent database holding every session's transcript (OpenClaw 2026.9)."""
    return state_dir(env) / "agents" / _agent(hook_input) / "agent" / AGENT_DB


def _stored_turns(ctx: HookContext) -> tuple[Path | None, list[Turn]]:
    """The transcript OpenClaw stored for this session (its path, or None) and its turns.

    The agent database wins over a session JSONL (OpenClaw 2026.9 writes only the database); an
    unreadable transcript is logged and gives no turns, the path still serves as the anchor.
    """
    from memsearch.errors import MemSearchError
    from memsearch.transcript import read_transcript

    db, jsonl = agent_db(ctx.input, ctx.env), session_file(ctx.input, ctx.env)
    session = ctx.input.session_id or None
    if ctx.input.transcript_path:  # an explicit path: a session JSONL, or a database (then by session)
        candidates = [(jsonl, None if str(jsonl).endswith(".jsonl") else session)]
    else:
        candidates = [(db, session), (jsonl, None)]
    for path, which in candidates:
        if path is None or not path.is_file() or (path == db and not which):
            continue
        try:
            return path, read_transcript(path, session=which).turns
        except MemSearchError as exc:
            log(f"cannot read the OpenClaw transcript {path}: {exc.one_line()}")
            return path, []
    return None, []


def _turn_id(user: Turn, stored: list[Turn]) -> str:
    """The stored transcript's id of ``user`` (the newest user entry with the same text)."""
    if user.uuid:
        return user.uuid
    text = user.text.strip()
    return next((t.uuid for t in reversed(stored) if t.role == "user" and t.text.strip() == text), "")


def capture_session_turn(ctx: HookContext) -> Capture | None:
    """The last user message and the agent's replies after it: from ``agent_end``'s ``messages``,
    else from the stored transcript; the anchor names the stored transcript and the turn's id there."""
    from memsearch.transcript import last_turn, openclaw_message_turns

    messages = ctx.input.raw.get("messages")
    path, stored = _stored_turns(ctx)
    given = openclaw_message_turns(messages) if isinstance(messages, list) and messages else []
    user, replies = last_turn(given or stored)
    if user is None:
        if not given and path is None:
            log("agent_end carried no messages and no OpenClaw transcript was found; nothing to capture")
        return None
    texts = [t.text for t in replies if t.text]
    turn = _turn_id(user, stored)
    anchor = {"session": ctx.input.session_id or (path.name.removesuffix(".jsonl") if path else "")}
    if path is not None:
        anchor["transcript"] = str(path)
    if turn:
        anchor["turn"] = turn
    return Capture(
        transcript=render_turn(AGENT_NAME, user, replies),
        user_text=user.text,
        reply_text=texts[-1] if texts else "",
        anchor=anchor,
        identity=("session", "turn") if turn else (),
    )


def openclaw_summarizer(ctx: HookContext, prompt: str) -> str | None:
    """``openclaw agent exec --message-file -`` with the prompt on stdin (no shell, no argv parsing).

    ``agent exec`` runs one isolated headless turn in a temporary state folder, so the user's own
    sessions never see the prompt and no summariser session grows with every summary. The nested run
    has ``MEMSEARCH_DISABLE=1`` and ``MEMSEARCH_NO_WATCH=1``, so this plugin does not capture it.
    """
    exe = host_cli(ctx, "openclaw")
    if exe is None:
        return None
    argv = [exe, "agent", "exec", "--message-file", "-"]
    model = ctx.plugin.summarize.model or ctx.platform.default_model
    if model:
        argv += ["--model", model]
    return run_summarizer(ctx, argv, stdin=prompt)


PLATFORM = Platform(
    name="openclaw",
    agent_name=AGENT_NAME,
    events={"session-start": "before_prompt_build", "stop": "agent_end"},
    read_input=read_input,
    project_dir=project_dir,
    # what OpenClaw adds to the prompt of the run
    render=plugin_reply("prependContext", frozenset({"before_prompt_build"})),
    capture=capture_session_turn,
    native_summarizer=openclaw_summarizer,
    recall_hint=(
        "[memsearch] Notes from past sessions of this workspace are searchable: call memory_search, "
        "then memory_get and memory_transcript, when earlier decisions or context could help."
    ),
    title=True,
    # agent_end must not wait for the summary: OpenClaw gives its handlers 30 s and `openclaw agent
    # --local` exits after the reply, so a detached worker summarises, writes and indexes.
    detach_capture=True,
    summarizer_timeout=60.0,
)
