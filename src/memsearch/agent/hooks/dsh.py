"""DeepSeek Harness (DSH): the adapter row, turn capture from DSH's session artifact, and
``dsh --profile headless`` as the summariser.

Host facts this row encodes (checked against DSH 0.1.0-rc.8, tests/test_host_dsh.py): DSH plugins are
Cordis plugins. The one in ``plugins/dsh`` (plain JavaScript) forwards two of DSH's events to
``memsearch hook dsh <event>`` with JSON on stdin, run in the session's folder:

- ``agent/pre-step`` at step 1 of a turn (a waterfall whose messages reach the model): the first turn
  the plugin sees of a session asks ``session-start`` (recent journals, PROJECT.md/USER.md,
  background index, due maintenance) and every turn asks ``prompt-submit`` (the recall hint);
  stdin ``{session_id, cwd, turn, messages}`` (``messages``: the ones entering the step; the
  person's are those whose ``source.kind`` is ``user``). The reply's ``context`` becomes one extra
  user message of the step.
- ``session/event`` with ``turn/end``: ``stop`` with ``{session_id, cwd, turn, db}``, ``db`` being the
  session's artifact as DSH's ``sessionPersistence.locate()`` names it. DSH writes events behind
  (batches within 200 ms, and at each step), so the turn may not be on disk yet: a detached worker
  waits for the artifact to show ``turn/end`` before it reads the turn. One-shot ``dsh --profile
  headless`` exits after the turn; it waits for the hook process (not for the worker).

The project is the session's folder (``cwd``, DSH's own workspace key; the original plugin used it
too), not its git root. The anchor is the original's ``session:<id> turn:<N> db:<artifact>``; day files
get a ``# YYYY-MM-DD`` title, dated by the local clock (the original used the UTC date). DSH sends no
session end in headless runs (``session/disposed`` did not fire there), so no watch is kept: session
start runs a one-shot background index, as for OpenCode and OpenClaw.

The native summariser is ``dsh --profile headless --patch <file> <prompt>`` in an empty private folder:
the patch keeps the nested session's artifact in that folder (deleted afterwards, so the user's
session list never fills with summaries), skips its title request, and switches off its tools (the
original gave the summariser every tool, in the project folder). ``MEMSEARCH_DISABLE=1`` and
``MEMSEARCH_DSH_SUMMARIZE=1`` (the original plugin's guard) keep both plugins inert inside it.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsearch.agent.hooks.base import Capture, HookContext, HookInput, Platform, plugin_reply
from memsearch.agent.hooks.collection import absolute_path
from memsearch.agent.hooks.summarize import clip_middle, log, nested_env, private_dir, render_turn, run_host

__all__ = [
    "PLATFORM",
    "capture_turn",
    "dsh_command",
    "dsh_summarizer",
    "project_dir",
    "read_input",
    "summary_patch",
]

AGENT_NAME = "DeepSeek Harness"
#: ``dsh`` as a command line (``DSH_CLI="node /opt/dsh/lib/bin.js"``), as the original plugin read it.
CLI_ENV = "DSH_CLI"
#: The profile whose one-shot agent writes the summaries.
SUMMARY_PROFILE = "headless"
#: The original plugin's recursion guard; set too, so that plugin stays out of our summariser.
ORIGINAL_GUARD_ENV = "MEMSEARCH_DSH_SUMMARIZE"
#: DSH 0.1.0-rc.8 takes the task only as one argument; Linux caps one argument at 128 KiB.
MAX_PROMPT_BYTES = 120_000
#: Rows of DSH 0.1.0-rc.8's tree the summariser's patch switches off: every model tool and the
#: session-title request. A row a DSH release lacks is only a warning of DSH's, not an error.
SUMMARY_DISABLED_ROWS = (
    "session-title-llm",
    "tool-bash",
    "tool-pwsh",
    "tool-jobs",
    "tool-fs",
    "tool-fs-search",
    "tool-skill",
    "tool-subagent-control",
    "tool-subagent-list-agents",
    "tool-subagent",
    "tool-subagent-fork",
    "tool-subagent-report",
    "tool-workflow",
    "tool-todo",
    "tool-goal",
    "tool-ralph",
    "tool-str-replace-editor",
    "tool-web",
)
#: Seconds the capture waits for DSH to write the turn's end into the artifact, and between looks.
ARTIFACT_WAIT = 30.0
ARTIFACT_POLL = 0.25


def read_input(data: Mapping[str, Any]) -> HookInput:
    """The plugin's stdin: ``session_id``, ``cwd``, ``turn`` (a number), ``db`` (the session's
    artifact) and, at a step, ``messages`` (DSH user messages; the prompt is the text of those the
    person typed)."""

    def text(name: str) -> str:
        value = data.get(name)
        return value if isinstance(value, str) else ""

    turn = data.get("turn")
    return HookInput(
        session_id=text("session_id"),
        transcript_path=text("db"),
        cwd=text("cwd"),
        prompt=text("prompt") or _typed_text(data.get("messages")),
        turn_id=str(turn) if isinstance(turn, int) and not isinstance(turn, bool) else "",
        raw=dict(data),
    )


def _typed_text(messages: Any) -> str:
    from memsearch.transcript.content import content_text

    parts = []
    for message in messages if isinstance(messages, list) else []:
        source = message.get("source") if isinstance(message, Mapping) else None
        if isinstance(source, Mapping) and source.get("kind") == "user":
            parts.append(content_text(message.get("content")).strip())
    return "\n".join(p for p in parts if p)


def project_dir(hook_input: HookInput, env: Mapping[str, str]) -> Path:
    """The session's folder (``cwd``), else the folder the command runs in."""
    start = hook_input.cwd if hook_input.cwd and os.path.isdir(hook_input.cwd) else os.getcwd()
    return Path(absolute_path(start))


def capture_turn(ctx: HookContext, wait: float = ARTIFACT_WAIT) -> Capture | None:
    """Turn ``turn`` of the session's artifact ``db``, once the artifact shows the turn's end (or
    after ``wait`` seconds, with what it holds). None when there is nothing the person typed."""
    from memsearch.errors import MemSearchError
    from memsearch.transcript.dsh import read_dsh_turn

    path, turn_id = ctx.input.transcript_path, ctx.input.turn_id
    if not path or not turn_id:
        log("the turn's end came without a session artifact (db) or a turn number; nothing to capture")
        return None
    deadline = time.monotonic() + wait
    while True:
        try:
            turn, warnings = read_dsh_turn(path, int(turn_id)) if os.path.isfile(path) else (None, [])
        except MemSearchError as exc:
            log(f"cannot read the DSH session artifact: {exc.one_line()}")
            return None
        if (turn is not None and turn.ended) or time.monotonic() >= deadline:
            break
        time.sleep(ARTIFACT_POLL)
    for warning in warnings:
        log(warning)
    if turn is None or turn.user is None:
        if turn is None:
            log(f"turn {turn_id} is not in {path} after {wait:g} s; nothing to capture")
        return None
    texts = [t.text for t in turn.replies if t.role == "assistant" and t.text]
    return Capture(
        transcript=render_turn(AGENT_NAME, turn.user, turn.replies),
        user_text=turn.user.text,
        reply_text=texts[-1] if texts else "",
        anchor={"session": ctx.input.session_id, "turn": turn_id, "db": os.path.abspath(path)},
        identity=("session", "turn"),
    )


def dsh_command(ctx: HookContext) -> list[str] | None:
    """``$DSH_CLI`` split like a shell would, else ``dsh`` on PATH; None (logged) when there is none."""
    import shutil

    explicit = ctx.env.get(CLI_ENV, "").strip()
    if explicit:
        try:
            argv = shlex.split(explicit)
        except ValueError as exc:
            log(f"{CLI_ENV} is not a command line ({exc})", then="trying the next summariser")
            return None
        return argv or None
    exe = shutil.which("dsh", path=ctx.env.get("PATH"))
    if exe is None:
        log("dsh is not on PATH", then="trying the next summariser")
        return None
    return [exe]


def summary_patch(folder: str) -> list[dict[str, Any]]:
    """The summariser's patch rows (a JSON list is a valid DSH patch file, JSON being YAML)."""
    rows: list[dict[str, Any]] = [
        {"id": "session-persistence-jsonl", "config": {"root": os.path.join(folder, "sessions")}}
    ]
    return rows + [{"id": row, "disabled": True} for row in SUMMARY_DISABLED_ROWS]


def _fit_argument(prompt: str) -> str:
    """``prompt`` cut in the middle until it fits one command-line argument."""
    while len(prompt.encode("utf-8")) > MAX_PROMPT_BYTES:
        prompt = clip_middle(prompt, int(len(prompt) * 0.8))
    return prompt


def dsh_summarizer(ctx: HookContext, prompt: str) -> str | None:
    """One headless DSH turn on ``prompt`` (one argument, never shell text), isolated as the module
    docstring says; its final answer, or None (logged)."""
    argv = dsh_command(ctx)
    if argv is None:
        return None
    env = nested_env(ctx, **{ORIGINAL_GUARD_ENV: "1"})
    with private_dir() as folder:
        patch = Path(folder) / "memsearch-summary.patch.yml"
        patch.write_text(json.dumps(summary_patch(folder)), encoding="utf-8")
        argv += ["--profile", SUMMARY_PROFILE, "--patch", str(patch), _fit_argument(prompt)]
        result = run_host(argv, env=env, timeout=ctx.platform.summarizer_timeout, cwd=folder)
    return result.answer("dsh")


PLATFORM = Platform(
    name="dsh",
    agent_name=AGENT_NAME,
    events={"session-start": "agent/pre-step", "prompt-submit": "agent/pre-step", "stop": "turn/end"},
    read_input=read_input,
    project_dir=project_dir,
    render=plugin_reply("context"),  # added to the step as one user message
    capture=capture_turn,
    native_summarizer=dsh_summarizer,
    recall_hint=(
        "[memsearch] Notes from past sessions of this project are searchable: load the memory-recall "
        "skill when earlier decisions, fixes or context could help with this request."
    ),
    title=True,
    # turn/end comes before DSH has written the turn (and one-shot DSH exits right after it): the
    # hook hands over at once and a detached worker reads, summarises, writes and indexes.
    detach_capture=True,
    capture_in_worker=True,
    max_summary_chars=30_000,
    summarizer_timeout=120.0,
)
