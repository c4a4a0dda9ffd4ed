"""Running the tasks: under the lock, each due task asks its model, applies the answer and records
the outcome in the state file; a failure is recorded, never raised."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import MemSearchError
from memsearch.maintenance.common import root_of
from memsearch.maintenance.model import ask_model
from memsearch.maintenance.prompt import build_prompt, parse_answer
from memsearch.maintenance.session import index_files
from memsearch.maintenance.state import (
    check_due,
    input_digest,
    input_stamp,
    load_state,
    run_lock,
    save_state,
    state_key,
    task_paths,
    task_settings,
    utc_now,
    utc_stamp,
)
from memsearch.maintenance.tasks import TASKS, Outcome, Task, TaskRun

if TYPE_CHECKING:
    from memsearch.agent.hooks.base import HookContext
    from memsearch.config import PluginMaintenanceTaskConfig, PluginMemoryToSkillConfig

    TaskSettings = PluginMaintenanceTaskConfig | PluginMemoryToSkillConfig


# --- running ----------------------------------------------------------------------------------

#: Replaces the model step (tests and callers that bring their own model).
Asker = Callable[[TaskRun, Callable[[bool, int], str]], str]


def run_tasks(
    ctx: HookContext,
    *,
    only: Sequence[str] | None = None,
    force: bool = False,
    explicit: bool = False,
    ask: Asker | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Outcome]:
    """Run the due tasks of ``ctx``'s platform (``only`` some); never raises for a task's failure.

    ``explicit`` (a task named on the command line) runs it even when disabled; ``force`` ignores
    the interval and the digest. Files written are indexed afterwards, like a journal.
    """
    names = [n for n in TASKS if only is None or n in only]
    if not explicit and not any(task_settings(ctx, n).enabled for n in names):
        return [Outcome(n, "disabled") for n in names]  # nothing to do: touch no file
    with run_lock(ctx.memsearch_dir) as locked:
        if not locked:
            return [Outcome(n, "locked", "another maintenance run is in progress") for n in names]
        state = load_state(ctx.memsearch_dir)
        outcomes = [
            _run_one(ctx, TASKS[n], state, force=force, explicit=explicit, ask=ask or ask_model)
            for n in names
        ]
    written = [Path(p) for o in outcomes if o.action == "replace" for p in o.changed]
    if written:
        index_files(ctx, written, log=log)
    return outcomes


def _log_call(run: TaskRun, prompt: str, answer: str | None, started: float) -> None:
    """The task's model call in the recall log (tokens, never text)."""
    from memsearch.agent.recall_log import record_llm

    ctx = run.ctx
    record_llm(
        ctx.config,
        ctx.collection,
        f"maintenance:{run.task.name}",
        run.settings.provider or "native",
        prompt,
        answer,
        time.monotonic() - started,
        host=ctx.platform.name,
        env=ctx.env,
    )


def _run_one(
    ctx: HookContext, task: Task, state: dict[str, dict[str, Any]], *, force: bool, explicit: bool, ask: Asker
) -> Outcome:
    settings = task_settings(ctx, task.name)
    if not settings.enabled and not explicit:
        return Outcome(task.name, "disabled")
    input_dir, output = task_paths(ctx, task, settings)
    root = root_of(ctx, input_dir, folder=True)
    digest = input_digest(input_dir, root)
    key = state_key(ctx.platform.name, task.name)
    entry = state.get(key, {})
    due, why = check_due(settings, entry, digest, force=force)
    if not due:
        return Outcome(task.name, "skip", why)
    stamp = input_stamp(input_dir, root)
    run = TaskRun(task, ctx, settings, input_dir, output, digest)
    prompts: list[str] = []

    def prompt_for(tools: bool, limit: int) -> str:
        prompts.append(build_prompt(run, tools=tools, limit=limit))
        return prompts[-1]

    started = time.monotonic()
    raw: str | None = None
    try:
        try:
            raw = ask(run, prompt_for)
        finally:
            _log_call(run, "".join(prompts[-1:]), raw, started)
        outcome = task.apply(run, parse_answer(raw, task.answer_key))
    except Exception as exc:  # recorded and retried later; a maintenance failure never escapes
        detail = exc.one_line() if isinstance(exc, MemSearchError) else f"{type(exc).__name__}: {exc}"
        now = utc_stamp(utc_now())
        state[key] = {
            **entry,
            "last_checked_at": now,
            "last_failed_at": now,
            "failed_input_digest": digest,
            "last_action": "error",
            "last_error": detail[:2000],
            "output_file": str(output),
        }
        save_state(ctx.memsearch_dir, state)
        return Outcome(task.name, "error", detail)
    now = utc_stamp(utc_now())
    state[key] = {
        "last_checked_at": now,
        "last_success_at": now,
        "last_input_digest": digest,
        "last_input_stamp": stamp,
        "last_action": outcome.action,
        "output_file": str(output),
    }
    save_state(ctx.memsearch_dir, state)
    return outcome
