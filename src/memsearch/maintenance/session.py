"""The session-start side: which tasks are due (cheaply), starting a detached run, PROJECT.md and
USER.md as context for the model, and indexing the files a run rewrote."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.errors import MemSearchError
from memsearch.maintenance.common import (
    CONTEXT_CHARS,
    LOCK_FILE,
    LOG_FILE,
    LOG_MAX,
    read_text,
    root_of,
)
from memsearch.maintenance.state import (
    check_due,
    input_digest,
    input_stamp,
    load_state,
    state_key,
    task_paths,
    task_settings,
)
from memsearch.maintenance.tasks import TASKS

if TYPE_CHECKING:
    from memsearch.agent.hooks.base import HookContext
    from memsearch.config import PluginMaintenanceTaskConfig, PluginMemoryToSkillConfig

    TaskSettings = PluginMaintenanceTaskConfig | PluginMemoryToSkillConfig


def index_files(ctx: HookContext, files: Sequence[Path], log: Callable[[str], None] | None = None) -> None:
    """Index rewritten PROJECT.md/USER.md like a journal (at the store's owner). A failure is
    logged, never raised: the file is written and the next run retries."""
    from memsearch.engine.memory import open_memory

    say = log or (lambda message: None)
    paths = [str(f) for f in files]
    try:
        description = ctx.description()
        with open_memory(ctx.config, paths, description=description) as memory:
            memory.index_with_report()
    except Exception as exc:
        detail = exc.one_line() if isinstance(exc, MemSearchError) else f"{type(exc).__name__}: {exc}"
        say(f"{', '.join(f.name for f in files)} written but not indexed: {detail}")


# --- the session-start hook -------------------------------------------------------------------


def due_tasks(ctx: HookContext) -> list[str]:
    """The tasks of ``ctx``'s platform that would run now (enabled, interval passed, journals
    changed). Reads the config, the state file and the journals; runs nothing."""
    state = load_state(ctx.memsearch_dir)
    names = []
    for task in TASKS.values():
        settings = task_settings(ctx, task.name)
        if not settings.enabled:
            continue
        entry = state.get(state_key(ctx.platform.name, task.name), {})
        if not check_due(settings, entry, None)[0]:
            continue  # the interval has not passed: no need to read the journals
        input_dir, _ = task_paths(ctx, task, settings)
        root = root_of(ctx, input_dir, folder=True)
        if entry.get("last_action") != "error" and entry.get("last_input_stamp") == input_stamp(
            input_dir, root
        ):
            continue  # the journals are untouched since the last success: no need to hash them
        if check_due(settings, entry, input_digest(input_dir, root))[0]:
            names.append(task.name)
    return names


def run_in_progress(memsearch_dir: Path) -> bool:
    """Whether a maintenance run holds the memory folder's lock right now (probed, never written)."""
    from memsearch.files import lock_is_held

    return lock_is_held(memsearch_dir / LOCK_FILE)


def start_due_tasks(ctx: HookContext) -> int | None:
    """Start a detached ``memsearch maintenance run --hook-worker`` when a task is due and no run
    is in progress; its pid, or None. The hook does not wait for it."""
    from memsearch.agent.spawn import memsearch_argv, spawn_detached

    if not due_tasks(ctx) or run_in_progress(ctx.memsearch_dir):
        return None
    log = ctx.memsearch_dir / LOG_FILE
    try:
        keep = log.stat().st_size < LOG_MAX
    except OSError:
        keep = True
    argv = memsearch_argv("maintenance", "run", "--platform", ctx.platform.name, "--hook-worker")
    payload = json.dumps(ctx.to_json()).encode("utf-8")
    return spawn_detached(argv, stdin_data=payload, log=log, append=keep, cwd=ctx.project_dir)


def session_context(ctx: HookContext, budget: int = CONTEXT_CHARS) -> str:
    """PROJECT.md and USER.md (where ``project_review``/``user_profile`` write them) for the model,
    each framed as data (:mod:`memsearch.agent.framing`), together within ``budget`` characters; a cut
    file says where the rest is. "" when neither exists. Each is read only when it is a regular
    file inside the project (never a symbolic link a repository shipped, never a FIFO)."""
    from memsearch import exits
    from memsearch.agent.framing import frame

    files: list[tuple[str, Path, str]] = []
    for name in ("project_review", "user_profile"):
        task = TASKS[name]
        _, path = task_paths(ctx, task, task_settings(ctx, name))
        text = exits.out(read_text(path, root_of(ctx, path)), "journal", ctx.config).strip()
        if text:
            files.append((Path(task.default_output).name, path, text))
    parts: list[str] = []
    left = budget
    for index, (label, path, text) in enumerate(files):
        share = left // (len(files) - index)
        head = f"[memsearch] {label} ({path}):\n"
        room = share - len(head) - len(frame("", label))
        if room <= 0:
            continue
        if len(text) > room:
            tail = f"\n…(cut; the whole file is {path})"
            cut = text[: max(0, room - len(tail))]
            cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
            text = cut.rstrip() + tail
        part = head + frame(text, label)
        parts.append(part)
        left -= len(part)
    return "\n\n".join(parts)
