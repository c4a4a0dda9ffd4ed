"""Codex CLI: the adapter row, its rollout capture and its ``codex exec`` summariser.

Host facts this row encodes (checked against Codex 0.171.0): Codex sends SessionStart,
UserPromptSubmit, Stop and SessionEnd (also at the end of ``codex exec``), so SessionStart starts a
watch of the journal folder and SessionEnd stops it, as for Claude Code. Codex runs Stop
synchronously and may delete a transient rollout right after, so Stop reads the rollout at once and
hands the summary and the write to a detached worker. ``transcript_path`` may be null: the
question then comes from ``$CODEX_HOME/history.jsonl`` and the answer from
``last_assistant_message``. Codex runs only hooks the user has trusted (see
:mod:`memsearch.agent.hooks.codex_app`).

The anchor keeps Codex's format, ``session:<id> rollout:<path>``, plus a ``turn_id:<id>`` field
when the turn id is known — readers ignore fields they do not know, and it lets a repeated Stop of
the same turn be recognised (the original wrote a duplicate every time).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

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

__all__ = ["PLATFORM", "capture_rollout_turn", "codex_summarizer", "history_question", "project_dir"]

AGENT_NAME = "Codex"
DEFAULT_MODEL = "gpt-5.1-codex-mini"
#: Summariser input cap (characters), as in the original; ``MEMSEARCH_SUMMARY_MAX_CHARS`` overrides.
MAX_SUMMARY_CHARS = 8000
#: Bytes read from the end of ``history.jsonl`` when looking for the session's last prompt.
HISTORY_TAIL_BYTES = 2 * 1024 * 1024


def project_dir(hook_input: HookInput, env: Mapping[str, str]) -> Path:
    """``MEMSEARCH_PROJECT_DIR``, else the hook's ``cwd``, else the working directory — then its git root."""
    explicit = env.get("MEMSEARCH_PROJECT_DIR", "")
    if explicit and os.path.isdir(explicit):
        start = explicit
    elif hook_input.cwd and os.path.isdir(hook_input.cwd):
        start = hook_input.cwd
    else:
        start = os.getcwd()
    folder = Path(absolute_path(start))
    return find_git_root(folder) or folder


def _codex_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("CODEX_HOME") or Path.home() / ".codex").expanduser()


def history_question(env: Mapping[str, str], session_id: str) -> str:
    """The last prompt of ``session_id`` in Codex's ``history.jsonl`` ("" when there is none)."""
    path = _codex_home(env) / "history.jsonl"
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - HISTORY_TAIL_BYTES))
            data = fh.read()
    except OSError:
        return ""
    question = ""
    for raw in data.decode("utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue  # includes a line cut by the tail read
        if isinstance(entry, dict) and entry.get("session_id") == session_id:
            text = entry.get("text")
            if isinstance(text, str) and text.strip():
                question = text
    return question


def _session_from_rollout(path: str) -> str:
    return Path(path).name.removesuffix(".jsonl").removeprefix("rollout-") if path else ""


def capture_rollout_turn(ctx: HookContext) -> Capture | None:
    """The turn that just ended, from the rollout when Codex gives one, else from history + the
    final message; None when there is nothing to record."""
    from memsearch.errors import MemSearchError
    from memsearch.transcript import Turn, last_turn, read_transcript

    inp = ctx.input
    rollout = inp.transcript_path if inp.transcript_path and os.path.isfile(inp.transcript_path) else ""
    session = inp.session_id or _session_from_rollout(inp.transcript_path)
    user: Turn | None = None
    replies: list[Turn] = []
    if rollout:
        try:
            user, replies = last_turn(read_transcript(rollout).turns)
        except MemSearchError as exc:
            log(f"cannot read the rollout: {exc.one_line()}")
    if user is None:
        question = history_question(ctx.env, session) if session else ""
        user = Turn("user", inp.turn_id, question) if question else None
    final = inp.last_assistant_message
    texts = [t.text for t in replies if t.text]
    reply_text = final.strip() or (texts[-1] if texts else "")
    if user is None and not reply_text and not replies:
        return None
    turn_id = inp.turn_id or (user.uuid if user is not None else "")
    anchor = {"session": session, "rollout": os.path.abspath(rollout) if rollout else ""}
    if turn_id:
        anchor["turn_id"] = turn_id
    if not session:
        anchor = {}
    return Capture(
        transcript=render_turn(AGENT_NAME, user, replies, final),
        user_text=user.text if user is not None else "",
        reply_text=reply_text,
        anchor=anchor,
        identity=("session", "turn_id") if session and turn_id else (),
    )


def codex_summarizer(ctx: HookContext, prompt: str) -> str | None:
    """``codex exec`` reading the prompt from stdin, read-only, ephemeral, with hooks switched off.

    The answer is taken from ``--output-last-message`` (progress lines on stdout are not the
    answer), falling back to stdout.
    """
    exe = host_cli(ctx, "codex")
    if exe is None:
        return None
    model = ctx.plugin.summarize.model or ctx.platform.default_model
    with private_dir() as folder:
        answer = Path(folder) / "answer.txt"
        argv = [exe, "exec", "--ephemeral", "--skip-git-repo-check", "-s", "read-only"]
        argv += ["-c", "features.hooks=false", "-c", 'model_reasoning_effort="low"']
        argv += ["-m", model, "-o", str(answer), "-"]
        result = run_host(
            argv, stdin=prompt, env=nested_env(ctx), timeout=ctx.platform.summarizer_timeout, cwd=folder
        )
        try:
            text = answer.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
    return text if text.strip() else result.answer("codex")


def _install(plugin_dir: Path) -> str:
    from memsearch.agent.hooks.install import install_codex  # only the installer needs it

    return install_codex(plugin_dir)


def _doctor() -> str:
    from memsearch.agent.hooks.install import doctor_codex

    return doctor_codex()


PLATFORM = Platform(
    name="codex",
    agent_name=AGENT_NAME,
    events=CLAUDE_STYLE_EVENTS,
    read_input=HookInput.from_fields,
    project_dir=project_dir,
    render=render_hook_json,
    capture=capture_rollout_turn,
    native_summarizer=codex_summarizer,
    recall_hint=(
        "[memsearch] Notes from past sessions of this project are searchable: use $memory-recall "
        "when earlier decisions, fixes or context could help with this request."
    ),
    keep_watch=True,
    detach_capture=True,
    max_summary_chars=MAX_SUMMARY_CHARS,
    default_model=DEFAULT_MODEL,
    summarizer_timeout=90.0,
    installer=_install,
    doctor=_doctor,
)
