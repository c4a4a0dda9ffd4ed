"""From a captured turn to journal bullets: the summariser chain every platform shares.

Order: the provider configured in ``plugins.<platform>.summarize.provider`` (an
``[llm.providers.<name>]`` entry, through :func:`memsearch.compact.summarize_transcript`) when one is
set, then the host agent's own CLI (``claude -p``, ``codex exec``, ...), then a plain extract of the
user's question and the agent's final answer. The first that yields bullets wins.

Rules that hold for every summariser:

- the prompt and the turn travel on stdin or in argv elements, never through a shell, so ``$(...)``,
  backticks and quotes in a user's message stay text;
- the nested agent runs with ``MEMSEARCH_DISABLE=1`` (our hooks refuse to run inside it), with its
  own hooks switched off by the platform's flags, in an empty private folder, under a timeout that
  kills its whole process group;
- only ``- `` bullet lines of the answer are kept (a preamble or a closing remark is dropped), and
  each is folded to one line that cannot forge a heading or an anchor.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.agent.hooks.base import REASONS, Capture, HookContext
from memsearch.agent.spawn import quiet_env
from memsearch.engine.journal import sanitize_bullet

if TYPE_CHECKING:
    from memsearch.redact import Redactor
    from memsearch.transcript import Turn

__all__ = [
    "HostResult",
    "clean_summary",
    "clip_middle",
    "log",
    "nested_env",
    "plain_extract",
    "render_turn",
    "run_host",
    "summarize_capture",
    "summary_input",
    "summary_prompt",
]

#: The most bullets kept from one summary (the prompt asks for 2 to 10).
MAX_BULLETS = 20
#: Characters of the user's message and of the final answer kept by the plain extract.
EXTRACT_USER_CHARS = 300
EXTRACT_REPLY_CHARS = 800
#: Characters of a tool's command shown to the summariser (its output never is).
TOOL_CHARS = 200
#: Environment variables a nested agent must not inherit (Claude Code refuses to nest under them).
_NESTED_UNSET = ("CLAUDECODE",)


def log(message: str, then: str = "") -> None:
    """One line on stderr: hosts show it in their hook logs; stdout is reserved for the reply.
    ``then`` says what the hook does next. While a caller collects reasons, ``message`` goes to
    it instead: a command run by hand puts it in its own error rather than a hook's log line."""
    reasons = REASONS.get()
    if reasons is not None:
        reasons.append(message)
    else:
        print(f"memsearch hook: {message}" + (f"; {then}" if then else ""), file=sys.stderr)


# --- rendering a turn -------------------------------------------------------------------------


def render_turn(agent_name: str, user: Turn | None, replies: Sequence[Turn], final: str = "") -> str:
    """The turn as the summariser reads it: ``[User]:``, ``[<agent>]:`` and tool-call lines.

    Tool outputs are left out on purpose (they are long, noisy and may hold secrets); the commands
    stay, since the notes should name what was run. ``final`` is the host's last message when it
    is not already the last reply in the transcript.
    """
    lines = [f"=== Transcript of a conversation between User and {agent_name} ==="]
    if user is not None and user.text:
        lines.append(f"[User]: {user.text}")
    last_text = ""
    for turn in replies:
        if turn.text:
            lines.append(f"[{agent_name}]: {turn.text}")
            last_text = turn.text
        for tool in turn.tools:
            command = " ".join(tool.command.split())
            if len(command) > TOOL_CHARS:
                command = command[:TOOL_CHARS] + " …"
            lines.append(f"[{agent_name} ran {tool.name}]: {command}".rstrip())
    if final.strip() and final.strip() != last_text.strip():
        lines.append(f"[{agent_name} final]: {final.strip()}")
    return "\n".join(lines)


def clip_middle(text: str, max_chars: int) -> str:
    """``text`` cut to about ``max_chars`` by dropping its middle (the question and the outcome stay)."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    head = max_chars // 3
    tail = max_chars - head
    return f"{text[:head]}\n…[{len(text) - max_chars} characters left out]…\n{text[-tail:]}"


def redact_capture(redactor: Redactor, capture: Capture) -> tuple[Capture, bool]:
    """``capture`` with private spans and secrets taken out of what a summariser or the plain
    extract reads, and whether it had any text before. Counted once, under ``summary``: the
    user's and the agent's texts hold the same items as the rendered turn."""
    had_text = bool(capture.user_text.strip() or capture.reply_text.strip())
    redacted = replace(
        capture,
        transcript=redactor.text(capture.transcript, "summary"),
        user_text=redactor.redact(capture.user_text).text,
        reply_text=redactor.redact(capture.reply_text).text,
    )
    return redacted, had_text


# --- cleaning answers -------------------------------------------------------------------------


def clean_summary(text: str) -> list[str]:
    """The bullet lines of a summariser's answer, each made safe (see the module docstring)."""
    bullets: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith(("- ", "* ", "• ")):
            continue
        bullet = sanitize_bullet(line)
        if bullet:
            bullets.append(bullet)
        if len(bullets) >= MAX_BULLETS:
            break
    return bullets


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit].rstrip() + " …"


def plain_extract(capture: Capture, agent_name: str) -> list[str]:
    """Two bullets when no summariser answered: what the user asked and how the agent answered."""
    bullets = []
    if capture.user_text.strip():
        bullets.append(sanitize_bullet(f"User asked: {_one_line(capture.user_text, EXTRACT_USER_CHARS)}"))
    if capture.reply_text.strip():
        bullets.append(sanitize_bullet(f"{agent_name}: {_one_line(capture.reply_text, EXTRACT_REPLY_CHARS)}"))
    if not bullets:
        bullets.append(f"- {agent_name} turn recorded without text; see the anchor's transcript.")
    return [b for b in bullets if b]


# --- running the host's CLI -------------------------------------------------------------------


@dataclass(frozen=True)
class HostResult:
    """A finished host CLI run: its stdout, or why it is not usable (``reason``)."""

    stdout: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return not self.reason

    def answer(self, host: str) -> str | None:
        """The answer, or ``None`` (logged) so the chain tries the next summariser."""
        if not self.ok:
            log(f"{host} summariser failed: {self.reason}")
            return None
        return self.stdout


def host_cli(ctx: HookContext, name: str) -> str | None:
    """The host's CLI on the hook's PATH, or ``None`` (logged) so the chain tries the next one."""
    exe = shutil.which(name, path=ctx.env.get("PATH"))
    if exe is None:
        log(f"{name} is not on PATH", then="trying the next summariser")
    return exe


def run_summarizer(ctx: HookContext, argv: Sequence[str], *, stdin: str = "") -> str | None:
    """Run a host's summariser command in an empty private folder, as a nested agent."""
    with private_dir() as folder:
        timeout = ctx.platform.summarizer_timeout
        result = run_host(argv, stdin=stdin, env=nested_env(ctx), timeout=timeout, cwd=folder)
    return result.answer(Path(argv[0]).name)


def nested_env(ctx: HookContext, **extra: str) -> dict[str, str]:
    """The environment of a nested agent: ours, marked so our hooks inside it do nothing."""
    env = quiet_env({k: v for k, v in ctx.env.items() if k not in _NESTED_UNSET})
    env.update(extra)
    return env


def run_host(
    argv: Sequence[str],
    *,
    stdin: str = "",
    env: Mapping[str, str] | None = None,
    timeout: float = 110.0,
    cwd: str | os.PathLike[str] | None = None,
) -> HostResult:
    """Run a host CLI with ``stdin``; its whole process group is killed at the timeout."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return HostResult(reason=f"could not start {argv[0]}: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(stdin.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return HostResult(reason=f"{Path(argv[0]).name} timed out after {timeout:g} s")
    stdout = out.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        detail = " ".join(err.decode("utf-8", errors="replace").split())[:200]
        return HostResult(
            stdout,
            f"{Path(argv[0]).name} exited with status {proc.returncode}" + (f": {detail}" if detail else ""),
        )
    if not stdout.strip():
        return HostResult(reason=f"{Path(argv[0]).name} returned empty output")
    return HostResult(stdout)


@contextlib.contextmanager
def private_dir() -> Iterator[str]:
    """An empty folder to run a nested agent in: no project settings, hooks or instructions there."""
    with tempfile.TemporaryDirectory(prefix="memsearch-summary-") as folder:
        yield folder


# --- the chain --------------------------------------------------------------------------------


#: Overrides every platform's ``max_summary_chars`` (characters of a turn sent to a summariser).
MAX_CHARS_ENV = "MEMSEARCH_SUMMARY_MAX_CHARS"


def summary_input(ctx: HookContext, capture: Capture) -> str:
    """The rendered turn, cut to the platform's budget (or ``MEMSEARCH_SUMMARY_MAX_CHARS``)."""
    from memsearch.config.envvars import env_number

    budget = int(env_number(MAX_CHARS_ENV, ctx.env) or ctx.platform.max_summary_chars)
    return clip_middle(capture.transcript, budget)


def summary_prompt(ctx: HookContext) -> str:
    """The summarize instructions for this platform (a custom ``prompts.summarize`` file wins)."""
    from memsearch.errors import MemSearchError
    from memsearch.prompts import load_prompt

    agent = ctx.platform.agent_name
    try:
        return load_prompt("summarize", agent_name=agent, override_path=ctx.config.prompts.summarize or None)
    except MemSearchError as exc:
        log(f"{exc.one_line()} (using the built-in prompt)")
        return load_prompt("summarize", agent_name=agent)


def _log_call(ctx: HookContext, backend: str, prompt: str, answer: str | None, started: float) -> None:
    """The summary's model call in the recall log (tokens, never text)."""
    import time

    from memsearch.agent.recall_log import record_llm

    record_llm(
        ctx.config,
        ctx.collection,
        "summary",
        backend,
        prompt,
        answer,
        time.monotonic() - started,
        session=ctx.input.session_id,
        host=ctx.platform.name,
        env=ctx.env,
    )


def _from_provider(ctx: HookContext, capture: Capture) -> list[str]:
    import asyncio
    import time

    from memsearch.compact import summarize_transcript
    from memsearch.errors import MemSearchError

    text_in = summary_input(ctx, capture)
    started = time.monotonic()
    backend = f"provider:{ctx.plugin.summarize.provider.strip()}"
    try:
        text = asyncio.run(
            summarize_transcript(
                text_in,
                plugin=ctx.platform.name,
                agent_name=ctx.platform.agent_name,
                cfg=ctx.config,
            )
        )
    except MemSearchError as exc:
        _log_call(ctx, backend, text_in, None, started)
        log(f"summary provider failed: {exc.one_line()}")
        return []
    _log_call(ctx, backend, text_in, text, started)
    bullets = clean_summary(text)
    if not bullets:
        log("summary provider returned no bullet lines")
    return bullets


def _from_host(ctx: HookContext, capture: Capture) -> list[str]:
    summarizer = ctx.platform.native_summarizer
    if summarizer is None:
        return []
    import time

    prompt = f"{summary_prompt(ctx)}\n\nTranscript:\n{summary_input(ctx, capture)}"
    started = time.monotonic()
    text = summarizer(ctx, prompt)
    _log_call(ctx, f"native:{ctx.platform.name}", prompt, text, started)
    if text is None:
        return []
    bullets = clean_summary(text)
    if not bullets:
        log(f"{ctx.platform.agent_name} returned no bullet lines")
    return bullets


def summarize_capture(ctx: HookContext, capture: Capture) -> tuple[list[str], str]:
    """Bullets for ``capture`` and which summariser wrote them (``provider``, ``native``, ``extract``)."""
    provider = ctx.plugin.summarize.provider.strip()
    steps = [("native", _from_host)]
    if provider not in ("", "native"):
        steps.insert(0, ("provider", _from_provider))
    for name, step in steps:
        bullets = step(ctx, capture)
        if bullets:
            return bullets, name
    return plain_extract(capture, ctx.platform.agent_name), "extract"
