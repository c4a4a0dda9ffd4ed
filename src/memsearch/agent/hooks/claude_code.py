"""Claude Code: the adapter row, its last-turn capture and its ``claude -p`` summariser.

Host facts this row encodes: hooks get ``session_id``, ``transcript_path`` and ``cwd`` on stdin and
answer with ``systemMessage`` / ``hookSpecificOutput.additionalContext``. The session id in anchors
is the transcript's file name, the turn id the uuid of the last real user message.

What Claude Code 2.1.197 does, seen by running it (tests/test_host_claude_code.py):

- ``claude -p`` exits right after the turn: it kills an ``async`` hook still running, and with one
  pending it ran no SessionEnd hook either. So Stop is a plain (synchronous) hook that returns at
  once and leaves the work to a detached worker, which holds the watch while it writes.
- The transcript is written after the Stop hook has returned (in ``claude -p`` the file does not
  exist yet when Stop runs): the worker, not the hook, reads the turn, waiting until the transcript
  shows Stop's ``last_assistant_message``.
- SessionEnd hooks get about 1.5 s, whatever their ``timeout`` says, and are killed then: the
  session-end hook only forgets the session and signals the watch, it never waits on anything slow.
- A session that ends without SessionEnd (killed, crashed) leaves the watch to stop by itself once
  no live ``claude`` uses it (see :mod:`memsearch.agent.hooks.processes`).
- Hooks run as ``/bin/sh -c 'bash run.sh <event>'`` children of the ``claude`` process, which is how
  the watch knows which process a session is (:func:`memsearch.agent.hooks.processes.host_process`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.agent.hooks.base import (
    CLAUDE_STYLE_EVENTS,
    Capture,
    HookContext,
    HookInput,
    Platform,
    find_git_root,
    render_hook_json,
)
from memsearch.agent.hooks.collection import absolute_path
from memsearch.agent.hooks.summarize import host_cli, log, nested_env, private_dir, render_turn, run_host

if TYPE_CHECKING:
    from memsearch.transcript import Turn

__all__ = ["PLATFORM", "capture_last_turn", "claude_summarizer", "project_dir"]

AGENT_NAME = "Claude Code"
DEFAULT_MODEL = "haiku"
#: Keeps the user's hooks (and this plugin's) out of the nested ``claude -p``; passed only when
#: ``claude --help`` lists ``--settings`` (older releases would refuse an unknown flag).
NO_HOOKS_SETTINGS = json.dumps({"disableAllHooks": True})
#: Seconds the capture waits for the turn to appear in the transcript, and between looks: Claude
#: Code 2.1.197 writes the transcript after the Stop hook has returned (``claude -p`` creates the
#: file only then), so the detached worker reads it, not the hook.
TRANSCRIPT_WAIT = 20.0
TRANSCRIPT_POLL = 0.2


def project_dir(hook_input: HookInput, env: Mapping[str, str]) -> Path:
    """The git root of the session's folder; else ``CLAUDE_PROJECT_DIR``; else that folder."""
    cwd = hook_input.cwd if hook_input.cwd and os.path.isdir(hook_input.cwd) else os.getcwd()
    start = Path(absolute_path(cwd))
    root = find_git_root(start)
    if root is not None:
        return root
    explicit = env.get("CLAUDE_PROJECT_DIR", "")
    if explicit and os.path.isdir(explicit):
        return Path(absolute_path(explicit))
    return start


def _turn_written(user: Turn | None, replies: Sequence[Turn], final: str) -> bool:
    """Whether the transcript's last turn is the one Stop reported (its final answer is there)."""
    if user is None:
        return False
    return not final or any(final in t.text for t in replies)


def capture_last_turn(ctx: HookContext, wait: float = TRANSCRIPT_WAIT) -> Capture | None:
    """The last user prompt of the session and Claude's replies to it, with the anchor fields.

    Waits up to ``wait`` seconds for the transcript to hold the turn Stop reported (its
    ``last_assistant_message``); after that, whatever the transcript holds, with Stop's final
    answer added when the transcript lacks it.
    """
    from memsearch.errors import MemSearchError
    from memsearch.transcript import last_turn, read_transcript

    path = ctx.input.transcript_path
    final = ctx.input.last_assistant_message.strip()
    if not path:
        return None
    deadline = time.monotonic() + wait
    user: Turn | None = None
    replies: list[Turn] = []
    while True:
        if os.path.isfile(path):
            try:
                user, replies = last_turn(read_transcript(path).turns)
            except MemSearchError as exc:
                log(f"cannot read the transcript: {exc.one_line()}")
                return None
        if _turn_written(user, replies, final) or time.monotonic() >= deadline:
            break
        time.sleep(TRANSCRIPT_POLL)
    written = _turn_written(user, replies, final)
    if not written:
        log(f"the transcript did not show the turn within {wait:g} s; using what Stop reported")
        if not final:
            return None
    texts = [t.text for t in replies if t.text] if written else []
    anchor = {
        "session": Path(path).name.removesuffix(".jsonl"),
        "turn": user.uuid if user is not None and written else "",
        "transcript": os.path.abspath(path),
    }
    return Capture(
        transcript=render_turn(AGENT_NAME, user if written else None, replies if written else [], final),
        user_text=user.text if user is not None and written else "",
        reply_text=texts[-1] if texts else final,
        anchor={k: v for k, v in anchor.items() if v},
        identity=("session", "turn") if anchor["turn"] else (),
    )


def claude_summarizer(ctx: HookContext, prompt: str) -> str | None:
    """``claude -p`` on the prompt (stdin), with no tools, no MCP servers and no hooks.

    ``--strict-mcp-config`` with no ``--mcp-config`` loads no MCP server; ``--tools ""`` gives the
    model nothing to run; ``--settings {"disableAllHooks": true}`` (and ``--safe-mode`` where this
    release has it) keeps every hook out, ours included; ``MEMSEARCH_DISABLE=1`` makes our hooks
    refuse even if some still fired; ``CLAUDECODE`` is removed so the nested CLI agrees to start.
    """
    exe = host_cli(ctx, "claude")
    if exe is None:
        return None
    env = nested_env(ctx)
    with private_dir() as folder:
        help_text = run_host([exe, "--help"], env=env, timeout=15, cwd=folder).stdout
        argv = [exe, "-p"]
        if "--safe-mode" in help_text:
            argv.append("--safe-mode")
        argv += [
            "--strict-mcp-config",
            "--tools",
            "",
            "--model",
            ctx.plugin.summarize.model or ctx.platform.default_model,
        ]
        argv += ["--no-session-persistence", "--no-chrome"]
        if "--settings" in help_text:
            argv += ["--settings", NO_HOOKS_SETTINGS]
        result = run_host(argv, stdin=prompt, env=env, timeout=ctx.platform.summarizer_timeout, cwd=folder)
    return result.answer("claude")


PLATFORM = Platform(
    name="claude-code",
    agent_name=AGENT_NAME,
    events=CLAUDE_STYLE_EVENTS,
    read_input=HookInput.from_fields,
    project_dir=project_dir,
    render=render_hook_json,
    capture=capture_last_turn,
    native_summarizer=claude_summarizer,
    recall_hint=(
        "[memsearch] Notes from past sessions of this project are searchable: use the memory-recall "
        "skill when earlier decisions, fixes or context could help with this request."
    ),
    keep_watch=True,
    detach_capture=True,
    capture_in_worker=True,
    default_model=DEFAULT_MODEL,
)
