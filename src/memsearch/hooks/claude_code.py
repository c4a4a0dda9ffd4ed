"""Claude Code: the adapter row, its last-turn capture and its ``claude -p`` summariser.

Host facts this row encodes (reference-plugins §1, §9.1): hooks get ``session_id``,
``transcript_path`` and ``cwd`` on stdin and answer with ``systemMessage`` /
``hookSpecificOutput.additionalContext``; Stop runs asynchronously and SessionEnd exists, so the
watch started at SessionStart lives exactly as long as the sessions that use it. The session id in
anchors is the transcript's file name (as the original wrote it), the turn id the uuid of the last
real user message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from memsearch.hooks.base import Capture, HookContext, HookInput, Platform, find_git_root, render_hook_json
from memsearch.hooks.collection import absolute_path
from memsearch.hooks.summarize import host_cli, log, nested_env, private_dir, render_turn, run_host

__all__ = ["PLATFORM", "capture_last_turn", "claude_summarizer", "project_dir"]

AGENT_NAME = "Claude Code"
DEFAULT_MODEL = "haiku"
#: Keeps the user's hooks (and this plugin's) out of the nested ``claude -p``; passed only when
#: ``claude --help`` lists ``--settings`` (older releases would refuse an unknown flag).
NO_HOOKS_SETTINGS = json.dumps({"disableAllHooks": True})


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


def capture_last_turn(ctx: HookContext) -> Capture | None:
    """The last user prompt of the session and Claude's replies to it, with the anchor fields."""
    from memsearch.errors import MemSearchError
    from memsearch.transcript import last_turn, read_transcript

    path = ctx.input.transcript_path
    if not path or not os.path.isfile(path):
        return None
    try:
        transcript = read_transcript(path)
    except MemSearchError as exc:
        log(f"cannot read the transcript: {exc.one_line()}")
        return None
    user, replies = last_turn(transcript.turns)
    if user is None:
        return None
    texts = [t.text for t in replies if t.text]
    anchor = {
        "session": Path(path).name.removesuffix(".jsonl"),
        "turn": user.uuid,
        "transcript": os.path.abspath(path),
    }
    return Capture(
        transcript=render_turn(AGENT_NAME, user, replies),
        user_text=user.text,
        reply_text=texts[-1] if texts else "",
        anchor={k: v for k, v in anchor.items() if v},
        identity=("session", "turn") if user.uuid else (),
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
    events={
        "session-start": "SessionStart",
        "prompt-submit": "UserPromptSubmit",
        "stop": "Stop",
        "session-end": "SessionEnd",
    },
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
    default_model=DEFAULT_MODEL,
)
