"""OpenClaw: the adapter row, its session-JSONL capture and its ``openclaw agent`` summariser.

Host facts this row encodes (reference-plugins §3, §9.3): OpenClaw plugins are JavaScript modules
that register tools and listen to ``before_agent_start`` (may return ``{prependContext}``) and
``agent_end`` (the turn is over). The plugin module in ``plugins/openclaw`` passes both events to
``memsearch hook openclaw <event>`` as JSON on stdin (``sessionId``, ``agentId``, ``workspaceDir``);
everything else happens here.

- The project is the agent's workspace (``workspaceDir``; the plugin module runs every command in
  it, so actions such as ``collection`` agree with the hooks).
- The turn comes from the session file ``~/.openclaw/agents/<agent>/sessions/<session>.jsonl``,
  parsed by :mod:`memsearch.transcript`.
- Day files get a ``# YYYY-MM-DD`` title, dated by the *local* clock (the original named the file
  by the UTC date but stamped local times, so entries near midnight landed in the wrong day).
- The anchor keeps OpenClaw's ``session:<id> transcript:<path>`` and adds ``turn:<id>`` at the end,
  which identifies the turn for dedup and for ``memsearch transcript --turn``.
- The native summariser is ``openclaw agent --local`` with the message as one argv element: the
  original built a ``bash -c`` string, so ``$(...)`` in a user's message ran on the user's machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsearch.hooks.base import Capture, HookContext, HookInput, Platform, Reply, dumps
from memsearch.hooks.collection import absolute_path
from memsearch.hooks.summarize import host_cli, log, render_turn, run_summarizer

__all__ = [
    "PLATFORM",
    "capture_session_turn",
    "openclaw_summarizer",
    "project_dir",
    "read_input",
    "render_reply",
    "session_file",
]

AGENT_NAME = "OpenClaw"
DEFAULT_AGENT = "main"
#: The summariser's own OpenClaw session, so the user's sessions never see its prompt.
SUMMARY_SESSION = "memsearch-summarize"


def _openclaw_home(env: Mapping[str, str]) -> Path:
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
    """Where OpenClaw keeps this session's JSONL (an explicit path wins); None without a session."""
    if hook_input.transcript_path:
        return Path(absolute_path(hook_input.transcript_path))
    if not hook_input.session_id or "/" in hook_input.session_id:
        return None
    return _openclaw_home(env) / "agents" / _agent(hook_input) / "sessions" / f"{hook_input.session_id}.jsonl"


def capture_session_turn(ctx: HookContext) -> Capture | None:
    """The last user message of the session file and the agent's replies after it."""
    from memsearch.errors import MemSearchError
    from memsearch.transcript import last_turn, read_transcript

    path = session_file(ctx.input, ctx.env)
    if path is None or not path.is_file():
        if path is not None:
            log(f"no OpenClaw session file at {path}; nothing to capture")
        return None
    try:
        user, replies = last_turn(read_transcript(path).turns)
    except MemSearchError as exc:
        log(f"cannot read the session file: {exc.one_line()}")
        return None
    if user is None:
        return None
    texts = [t.text for t in replies if t.text]
    session = ctx.input.session_id or path.name.removesuffix(".jsonl")
    anchor = {"session": session, "transcript": str(path)}
    if user.uuid:
        anchor["turn"] = user.uuid
    return Capture(
        transcript=render_turn(AGENT_NAME, user, replies),
        user_text=user.text,
        reply_text=texts[-1] if texts else "",
        anchor=anchor,
        identity=("session", "turn") if user.uuid else (),
    )


def openclaw_summarizer(ctx: HookContext, prompt: str) -> str | None:
    """``openclaw agent --local`` with the prompt as one argv element (no shell ever sees it).

    OpenClaw takes the message only as ``-m``; an argv element carries ``$(...)``, backticks, quotes
    and newlines as plain text. The run uses its own session id, an empty private folder and
    ``MEMSEARCH_DISABLE=1`` so this plugin does not capture the summariser's own turn.
    """
    exe = host_cli(ctx, "openclaw")
    if exe is None:
        return None
    argv = [exe, "agent", "--local", "--session-id", SUMMARY_SESSION]
    model = ctx.plugin.summarize.model or ctx.platform.default_model
    if model:
        argv += ["--model", model]
    argv += ["-m", prompt]
    return run_summarizer(ctx, argv)


def render_reply(host_event: str, reply: Reply) -> str:
    """``{"prependContext": ...}`` for ``before_agent_start`` (what OpenClaw adds to the prompt), and
    the status line as ``systemMessage`` for the plugin to log; ``{}`` when there is nothing."""
    out: dict[str, str] = {}
    if reply.context and host_event == "before_agent_start":
        out["prependContext"] = reply.context
    if reply.message:
        out["systemMessage"] = reply.message
    return dumps(out)


PLATFORM = Platform(
    name="openclaw",
    agent_name=AGENT_NAME,
    events={"session-start": "before_agent_start", "stop": "agent_end"},
    read_input=read_input,
    project_dir=project_dir,
    render=render_reply,
    capture=capture_session_turn,
    native_summarizer=openclaw_summarizer,
    recall_hint=(
        "[memsearch] Notes from past sessions of this workspace are searchable: call memory_search, "
        "then memory_get and memory_transcript, when earlier decisions or context could help."
    ),
    title=True,
    summarizer_timeout=60.0,
)
