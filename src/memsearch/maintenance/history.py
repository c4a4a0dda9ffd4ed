"""What maintenance changed in PROJECT.md and USER.md, run by run, and taking a change back.

A background task rewrites a file people and agents read at every session start, unseen. So each
rewrite is recorded with the text before and after it, and waits for review: ``keep`` marks it
reviewed, ``revert`` puts the text before it back (only while the file still holds what that run
wrote: a later run or a person's edit is never overwritten), and both are one step of
``memsearch maintenance history|keep|revert`` or of the console's inbox.

The text before a rewrite is recorded as memsearch keeps any text, without ``<private>`` spans and
secrets (a PROJECT.md written by hand may hold a key): a revert puts that text back.

Why the records live in ``~/.memsearch/maintenance-runs/<key of the memory folder>/`` and not in
the project: a revert writes a record's text into PROJECT.md, which every session then reads, so
a record must be memsearch's own (a private folder: nothing a cloned repository ships can plant
one). Each record is one JSON file named ``<UTC time>-<task>.json``; the newest
:data:`KEPT_RUNS` per task are kept.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import MaintenanceError

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig

__all__ = [
    "KEPT_RUNS",
    "MaintenanceRun",
    "decide",
    "list_runs",
    "record_run",
    "reindex",
    "revert",
    "runs_folder",
    "unified_diff",
]

#: Records kept per task (older ones are deleted when a new one is written).
KEPT_RUNS = 20
#: The most bytes read from one record (two files of MAX_OUTPUT_CHARS and the fields).
_MAX_RECORD_BYTES = 1 << 20
_ID = re.compile(r"^\d{8}T\d{6}\d{6}Z-[a-z_]{1,40}$")
STATUSES = ("new", "kept", "reverted")


@dataclass(frozen=True)
class MaintenanceRun:
    """One rewrite: ``before`` is "" when the run created the file."""

    id: str
    task: str
    platform: str
    file: str
    at: str
    reason: str
    before: str
    after: str
    status: str = "new"
    decided_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """Everything but the texts (``maintenance history --json-output``): the diff's size."""
        data = {k: v for k, v in asdict(self).items() if k not in ("before", "after")}
        lines = unified_diff(self).splitlines()
        data["added"] = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
        data["removed"] = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
        return data


def runs_folder(memsearch_dir: Path) -> Path:
    """Where the rewrites of this memory folder's files are recorded (a private folder of ours)."""
    from memsearch.config.files import memsearch_home

    key = hashlib.sha256(os.path.realpath(memsearch_dir).encode("utf-8", "surrogateescape")).hexdigest()
    return memsearch_home() / "maintenance-runs" / key[:24]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def record_run(
    memsearch_dir: Path, task: str, platform: str, file: Path, before: str, after: str, reason: str
) -> MaintenanceRun:
    """Record a rewrite of ``file`` (the text before and after), then drop the task's oldest
    records beyond :data:`KEPT_RUNS`."""
    from memsearch import private

    now = _now()
    run = MaintenanceRun(
        id=f"{now.strftime('%Y%m%dT%H%M%S%f')}Z-{task}",
        task=task,
        platform=platform,
        file=str(file),
        at=now.isoformat(timespec="seconds").replace("+00:00", "Z"),
        reason=reason,
        before=before,
        after=after,
    )
    folder = private.private_dir(runs_folder(memsearch_dir))
    _write(folder, run)
    mine = sorted(p for p in folder.glob(f"*-{task}.json") if _ID.match(p.stem))
    for old in mine[:-KEPT_RUNS]:
        with contextlib.suppress(OSError):
            old.unlink()
    return run


def _write(folder: Path, run: MaintenanceRun) -> None:
    from memsearch import private

    private.write_private(folder / f"{run.id}.json", json.dumps(run.to_dict(), ensure_ascii=False))


def _read(path: Path) -> MaintenanceRun | None:
    """A record, when it is a regular file of ours holding one; None otherwise."""
    from memsearch import private

    try:
        data = json.loads(private.read_private(path, limit=_MAX_RECORD_BYTES).decode("utf-8"))
        run = MaintenanceRun(**{k: str(data[k]) for k in MaintenanceRun.__dataclass_fields__ if k in data})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return run if run.id == path.stem and run.status in STATUSES else None


def list_runs(memsearch_dir: Path, *, status: Sequence[str] = STATUSES) -> list[MaintenanceRun]:
    """The recorded rewrites of this memory folder's files, newest first."""
    folder = runs_folder(memsearch_dir)
    try:
        names = sorted((p for p in folder.glob("*.json") if _ID.match(p.stem)), reverse=True)
    except OSError:
        return []
    runs = (_read(p) for p in names)
    return [r for r in runs if r is not None and r.status in status]


def _find(memsearch_dir: Path, run_id: str) -> MaintenanceRun:
    run = _read(runs_folder(memsearch_dir) / f"{run_id}.json") if _ID.match(run_id) else None
    if run is None:
        raise MaintenanceError(
            f"no maintenance run {run_id!r} is recorded for {memsearch_dir}",
            hint="`memsearch maintenance history` lists the runs and their ids",
        )
    return run


def decide(memsearch_dir: Path, run_id: str, status: str) -> MaintenanceRun:
    """Mark run ``run_id`` ``kept`` (reviewed, the file stays as it wrote it) or ``reverted``."""
    from memsearch import private

    run = replace(
        _find(memsearch_dir, run_id),
        status=status,
        decided_at=_now().isoformat(timespec="seconds").replace("+00:00", "Z"),
    )
    _write(private.private_dir(runs_folder(memsearch_dir)), run)
    return run


def revert(memsearch_dir: Path, run_id: str) -> MaintenanceRun:
    """Put back the text the file had before run ``run_id`` (a file the run created is removed),
    while the file still holds exactly what the run wrote; MaintenanceError otherwise (nothing is
    changed). Whoever reverts reindexes the file (it is memory the hooks index)."""
    from memsearch.engine.project_files import read_project_text
    from memsearch.maintenance.common import write_text

    run = _find(memsearch_dir, run_id)
    path = Path(run.file)
    if run.status == "reverted":
        raise MaintenanceError(f"run {run_id} was reverted already", hint="nothing to do")
    now = read_project_text(path, path.parent) if os.path.lexists(path) else ""
    if now != run.after:
        raise MaintenanceError(
            f"{path.name} changed since run {run_id} wrote it; nothing was reverted",
            hint="revert the newer run first, or edit the file by hand",
        )
    if run.before:
        write_text(path, run.before)
    else:
        path.unlink()
    return decide(memsearch_dir, run_id, "reverted")


def reindex(cfg: MemSearchConfig, run: MaintenanceRun, description: str) -> None:
    """The index after a revert, through the store's owner: the file's text as it is now, or its
    chunks gone with it (a memory of its own whose path is the file, as the maintenance run
    indexes what it rewrote)."""
    from memsearch.engine.memory import open_memory

    path = Path(run.file)
    with open_memory(cfg, [str(path)], description=description) as memory:
        if path.exists():
            memory.index_file(path)
        else:
            memory.remove_file(path)


def unified_diff(run: MaintenanceRun) -> str:
    """The run's change as a unified diff (``a/`` before, ``b/`` after)."""
    import difflib

    name = Path(run.file).name
    lines = difflib.unified_diff(
        run.before.splitlines(keepends=True),
        run.after.splitlines(keepends=True),
        f"a/{name}",
        f"b/{name}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
