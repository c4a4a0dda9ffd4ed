"""When a task is due: its paths, the journals' digest, the state file, and the run lock (one
maintenance run per memory folder)."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.engine.project_files import (
    MAX_JOURNAL_BYTES,
    project_files,
    read_project_bytes,
    read_project_text,
)
from memsearch.files import try_lock
from memsearch.maintenance.common import LOCK_FILE, RETRY_AFTER_HOURS, STATE_FILE, write_text

if TYPE_CHECKING:
    from memsearch.agent.hooks.base import HookContext
    from memsearch.config import PluginMaintenanceTaskConfig, PluginMemoryToSkillConfig

    TaskSettings = PluginMaintenanceTaskConfig | PluginMemoryToSkillConfig
    from memsearch.maintenance.tasks import Task


# --- paths, digest, state ---------------------------------------------------------------------


def resolve_path(raw: str, project_dir: Path, memsearch_dir: Path) -> Path:
    """A configured ``input_dir``/``output_file``: ``.memsearch/...`` is inside the memory folder in
    use (so a shared ``MEMSEARCH_DIR`` gets its own PROJECT.md), other relative paths are under the
    project, ``~`` is expanded."""
    text = raw.strip()
    if text.rstrip("/") == ".memsearch":
        return memsearch_dir
    if text.startswith(".memsearch/"):
        return memsearch_dir / text[len(".memsearch/") :]
    path = Path(text).expanduser()
    return path if path.is_absolute() else project_dir / path


def task_settings(ctx: HookContext, name: str) -> TaskSettings:
    settings: TaskSettings = getattr(ctx.plugin, name)
    return settings


def task_paths(ctx: HookContext, task: Task, settings: TaskSettings) -> tuple[Path, Path]:
    """The task's input folder and its output (a file, or the candidate store)."""
    input_dir = resolve_path(settings.input_dir or ".memsearch/memory", ctx.project_dir, ctx.memsearch_dir)
    if task.answer_key == "skills":
        from memsearch import skills

        return input_dir, skills.candidates_root(ctx.memsearch_dir)
    raw = getattr(settings, "output_file", "") or task.default_output
    return input_dir, resolve_path(raw, ctx.project_dir, ctx.memsearch_dir)


def journal_paths(input_dir: Path, root: Path | None = None) -> list[Path]:
    """The markdown files under ``input_dir`` a task reads, by name: regular files inside ``root``
    (default ``input_dir``) only; a symbolic link or a FIFO a repository shipped is skipped with a
    warning (:mod:`memsearch.engine.project_files`)."""
    if not input_dir.is_dir():
        return []
    try:
        found = sorted(input_dir.rglob("*.md"))
    except OSError:
        return []
    return project_files(found, root or input_dir)


def input_digest(input_dir: Path, root: Path | None = None) -> str:
    """A digest of every journal under ``input_dir`` (names and bytes): the journals changed
    exactly when it changes. A touched but unchanged file keeps it."""
    digest = hashlib.sha256()
    if not input_dir.is_dir():
        return "sha256:empty"
    for path in journal_paths(input_dir, root):
        data = read_project_bytes(path, root or input_dir, max_bytes=MAX_JOURNAL_BYTES)
        if data is None:
            continue
        digest.update(f"{path.relative_to(input_dir).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return f"sha256:{digest.hexdigest()}"


def input_stamp(input_dir: Path, root: Path | None = None) -> str:
    """A cheap fingerprint of the journals (names, sizes, modification times; no reading): when it
    equals the one recorded at the last success, the journals are untouched and the hook need not
    hash them."""
    digest = hashlib.sha256()
    for path in journal_paths(input_dir, root):
        with contextlib.suppress(OSError):
            st = path.lstat()
            digest.update(
                f"{path.relative_to(input_dir).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode()
            )
    return f"stat:{digest.hexdigest()}"


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def utc_stamp(when: dt.datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)


def load_state(memsearch_dir: Path) -> dict[str, dict[str, Any]]:
    """The state file; a missing or damaged one counts as empty (every task is then due)."""
    try:
        data = json.loads(read_project_text(memsearch_dir / STATE_FILE, memsearch_dir))
    except ValueError:  # "" (missing, or refused with a warning: a FIFO, a link) or damaged
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def save_state(memsearch_dir: Path, state: Mapping[str, Any]) -> None:
    write_text(memsearch_dir / STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n")


def state_key(platform: str, task: str) -> str:
    return f"{platform}.{task}"


def check_due(
    settings: TaskSettings,
    entry: Mapping[str, Any],
    digest: str | None,
    *,
    now: dt.datetime | None = None,
    force: bool = False,
) -> tuple[bool, str]:
    """Whether a task should run now, and why (or why not). ``digest`` None skips the journal
    check (the hook's first, cheap look)."""
    if force:
        return True, "forced"
    now = now or utc_now()
    if digest is not None and entry.get("last_input_digest") == digest:
        return False, "journals unchanged since the last run"
    interval = max(0, settings.min_interval_hours)
    succeeded = _parse_time(entry.get("last_success_at"))
    failed = _parse_time(entry.get("last_failed_at"))
    if failed is not None and (succeeded is None or failed > succeeded):
        wait = min(float(interval), RETRY_AFTER_HOURS)
        if now - failed < dt.timedelta(hours=wait):
            return False, f"the last attempt failed; retrying {wait:g} h after it"
        return True, "retrying after a failure"
    if succeeded is None:
        return True, "never run"
    if now - succeeded < dt.timedelta(hours=interval):
        return False, f"ran less than {interval} h ago"
    return True, "due"


@contextlib.contextmanager
def run_lock(memsearch_dir: Path) -> Iterator[bool]:
    """Hold the memory folder's maintenance lock; yields False (at once) when another process has
    it. A ``flock`` dies with its holder, so a crashed run never leaves the tasks locked."""
    memsearch_dir.mkdir(parents=True, exist_ok=True)
    fd = try_lock(memsearch_dir / LOCK_FILE)  # a planted FIFO or link is refused (OSError)
    if fd is None:
        yield False
        return
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield True
    finally:
        os.close(fd)
