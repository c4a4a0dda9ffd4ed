"""OpenCode: the adapter row, turn capture from OpenCode's SQLite database, and ``opencode run``.

Host facts this row encodes: OpenCode plugins are JavaScript modules
with tools and an ``experimental.chat.system.transform`` hook, but no "turn finished" hook that
hands over a transcript. So the plugin module in ``plugins/opencode`` asks
``memsearch hook opencode session-start`` for the memory to put in the system prompt, and a capture
daemon (:mod:`memsearch.agent.hooks.opencode_daemon`) polls OpenCode's database for finished turns.

- The project is the folder the plugin runs the command in (OpenCode's worktree); ``MEMSEARCH_DIR``
  is honoured like on every other platform (the original OpenCode plugin ignored it).
- A turn is a user message and the assistant messages after it; its anchor is
  ``session:<ses_...> turn:<user message id> db:<absolute database path>``, the original's format.
- The native summariser is ``opencode run`` with the prompt as one argv element, run in an empty
  private folder with ``MEMSEARCH_NO_WATCH=1`` and ``MEMSEARCH_DISABLE=1`` (this plugin then stays
  out of the nested session).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsearch.agent.hooks.base import Capture, HookContext, HookInput, Platform, plugin_reply
from memsearch.agent.hooks.collection import absolute_path
from memsearch.agent.hooks.summarize import host_cli, log, render_turn, run_summarizer

__all__ = [
    "PLATFORM",
    "capture_turn",
    "opencode_summarizer",
    "project_dir",
]

AGENT_NAME = "OpenCode"


def project_dir(hook_input: HookInput, env: Mapping[str, str]) -> Path:
    """The worktree the plugin names in ``cwd``, else the folder the command runs in."""
    start = hook_input.cwd if hook_input.cwd and os.path.isdir(hook_input.cwd) else os.getcwd()
    return Path(absolute_path(start))


def capture_turn(ctx: HookContext) -> Capture | None:
    """The turn named by ``session_id`` and ``turn_id`` (a user message id) in the database ``db``.

    The daemon finds which turns are finished; this only reads one from the database (read-only).
    """
    from memsearch.agent.hooks.opencode_daemon import default_db
    from memsearch.errors import MemSearchError
    from memsearch.transcript import read_transcript

    raw = ctx.input.raw
    session, turn_id = ctx.input.session_id, ctx.input.turn_id
    db = str(raw.get("db") or default_db(ctx.env))
    if not session or not turn_id or not os.path.isfile(db):
        return None
    try:
        turns = read_transcript(db, session=session).turns
    except MemSearchError as exc:
        log(f"cannot read the OpenCode database: {exc.one_line()}")
        return None
    start = next((i for i, t in enumerate(turns) if t.role == "user" and t.uuid == turn_id), None)
    if start is None:
        return None
    user = turns[start]
    replies = []
    for turn in turns[start + 1 :]:
        if turn.role == "user":
            break
        replies.append(turn)
    texts = [t.text for t in replies if t.text]
    return Capture(
        transcript=render_turn(AGENT_NAME, user, replies),
        user_text=user.text,
        reply_text=texts[-1] if texts else "",
        anchor={"session": session, "turn": turn_id, "db": os.path.abspath(db)},
        identity=("session", "turn"),
    )


def opencode_summarizer(ctx: HookContext, prompt: str) -> str | None:
    """``opencode run [-m model] <prompt>``: the prompt is one argv element, never shell text."""
    exe = host_cli(ctx, "opencode")
    if exe is None:
        return None
    argv = [exe, "run"]
    model = ctx.plugin.summarize.model or ctx.platform.default_model
    if model:
        argv += ["-m", model]
    argv.append(prompt)
    return run_summarizer(ctx, argv)


def _daemon(platform: Platform, options: Mapping[str, Any]) -> str:
    """The capture daemon for the current folder (runs until OpenCode exits)."""
    from memsearch.agent.hooks.opencode_daemon import daemon_action  # only the daemon needs it

    return daemon_action(platform, options)


PLATFORM = Platform(
    name="opencode",
    agent_name=AGENT_NAME,
    events={"session-start": "experimental.chat.system.transform", "stop": "capture"},
    read_input=HookInput.from_fields,
    project_dir=project_dir,
    render=plugin_reply("system"),  # merged into OpenCode's system prompt
    capture=capture_turn,
    native_summarizer=opencode_summarizer,
    recall_hint=(
        "[memsearch] Notes from past sessions of this project are searchable: call memory_search, "
        "then memory_get and memory_transcript, when earlier decisions or context could help."
    ),
    title=True,
    summarizer_timeout=60.0,
    actions={"daemon": _daemon},
)
