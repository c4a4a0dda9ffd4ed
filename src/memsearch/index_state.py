"""``.index-state.json``: a diagnostics record of the last index/watch run, for plugin health checks.

Not used for incremental decisions (that is the indexer's manifest). Written only when the indexed
paths live under a ``.memsearch`` folder or ``MEMSEARCH_DIR`` is set, as the original does, so that
indexing an arbitrary folder leaves no stray files. Write failures are swallowed: diagnostics must
never fail the command they describe.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.files import atomic_write

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.index_report import IndexReport

STATE_FILE = ".index-state.json"
SCHEMA_VERSION = 1


def state_path_for(
    paths: Sequence[str], *, memsearch_dir: str | None = None, cwd: Path | None = None
) -> Path | None:
    """Where the state file goes for these paths, or None when none should be written."""
    explicit = memsearch_dir or os.environ.get("MEMSEARCH_DIR", "")
    if explicit:
        return Path(explicit).expanduser().resolve() / STATE_FILE
    base = cwd or Path.cwd()
    for raw in paths:
        p = Path(raw).expanduser()
        p = (p if p.is_absolute() else base / p).resolve()
        parts = p.parts
        if ".memsearch" in parts:
            return Path(*parts[: parts.index(".memsearch") + 1]) / STATE_FILE
    return None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def _load(path: Path) -> dict[str, Any]:
    from memsearch.engine.project_files import read_project_text

    try:  # as a project file: often in a cloned repository's .memsearch/ (a FIFO must not hang us)
        data = json.loads(read_project_text(path, path.parent))
    except ValueError:  # missing, refused (with a warning line) or damaged
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path | None, record: dict[str, Any]) -> None:
    if path is None:
        return
    with contextlib.suppress(OSError):  # diagnostics only: never fail the command for them
        atomic_write(path, json.dumps(record, indent=2, sort_keys=True) + "\n")


def _base(status: str, operation: str, paths: Sequence[str], cfg: MemSearchConfig) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "operation": operation,
        "updated_at": _now(),
        "paths": [str(p) for p in paths],
        "collection": cfg.milvus.collection,
        "milvus_uri": cfg.milvus.uri,
    }


def record_started(path: Path | None, operation: str, paths: Sequence[str], cfg: MemSearchConfig) -> None:
    """A run began; keeps only ``last_success_at`` from the previous record."""
    if path is None:
        return
    previous = _load(path)
    record = _base("running", operation, paths, cfg)
    record["last_started_at"] = record["updated_at"]
    if "last_success_at" in previous:
        record["last_success_at"] = previous["last_success_at"]
    _write(path, record)


def record_report(
    path: Path | None,
    operation: str,
    paths: Sequence[str],
    cfg: MemSearchConfig,
    report: IndexReport,
) -> None:
    """A run finished: ``ok`` or ``degraded`` with the failed files."""
    if path is None:
        return
    previous = _load(path)
    record = _base(report.status, operation, paths, cfg)
    now = record["updated_at"]
    record.update(
        last_started_at=previous.get("last_started_at", now),
        last_completed_at=now,
        indexed_chunks=report.indexed_chunks,
        total_files=report.total_files,
        indexed_files=report.indexed_files,
        failed_files=[f.to_dict() for f in report.failed_files],
        embed_seconds=report.embed_seconds,  # time in the model (make bench shows its share)
    )
    if report.failed_files:
        record["last_failed_at"] = now
        record["last_error"] = f"{len(report.failed_files)} file(s) failed during indexing."
        if "last_success_at" in previous:
            record["last_success_at"] = previous["last_success_at"]
    else:
        record["last_success_at"] = now
    _write(path, record)


def record_error(
    path: Path | None,
    operation: str,
    paths: Sequence[str],
    cfg: MemSearchConfig,
    exc: BaseException,
    *,
    status: str = "error",
    failed_files: Sequence[dict[str, str]] = (),
) -> None:
    """A run failed as a whole."""
    if path is None:
        return
    from memsearch.index_report import format_error

    previous = _load(path)
    record = _base(status, operation, paths, cfg)
    now = record["updated_at"]
    record.update(
        last_started_at=previous.get("last_started_at", now),
        last_completed_at=now,
        last_failed_at=now,
        last_error=format_error(exc),
        failed_files=list(failed_files),
    )
    if "last_success_at" in previous:
        record["last_success_at"] = previous["last_success_at"]
    _write(path, record)


@dataclass(frozen=True)
class IndexRun:
    """One run of ``operation`` over ``paths``, recorded in the state file at ``path`` (None: none).

    The one way the CLI, the watch and the hooks record a run: :meth:`started`, then :meth:`finished`
    with its report or :meth:`failed` with the error; :meth:`record` does all three around a call.
    """

    path: Path | None
    operation: str
    paths: Sequence[str]
    cfg: MemSearchConfig

    @classmethod
    def of(
        cls, operation: str, paths: Sequence[str], cfg: MemSearchConfig, *, memsearch_dir: str | None = None
    ) -> IndexRun:
        """A run whose state file is found from ``paths`` (see :func:`state_path_for`)."""
        return cls(state_path_for(paths, memsearch_dir=memsearch_dir), operation, tuple(paths), cfg)

    def started(self) -> None:
        record_started(self.path, self.operation, self.paths, self.cfg)

    def finished(self, report: IndexReport) -> None:
        record_report(self.path, self.operation, self.paths, self.cfg, report)

    def failed(self, exc: BaseException) -> None:
        record_error(self.path, self.operation, self.paths, self.cfg, exc)

    def record(self, work: Callable[[], IndexReport]) -> IndexReport:
        """Run ``work`` with the run recorded: started first, then its report or its error (which
        is re-raised)."""
        self.started()
        try:
            report = work()
        except Exception as exc:
            self.failed(exc)
            raise
        except KeyboardInterrupt:  # recorded as an error, not left "running" for ever
            from memsearch.errors import CommandInterruptedError

            self.failed(CommandInterruptedError("interrupted before the run finished"))
            raise
        self.finished(report)
        return report
