"""What one ``index`` run did: :class:`IndexReport`, its per-file :class:`IndexFailure`, and
:func:`format_error` for the one line a report keeps of an exception.

The original memsearch 0.4.23 exposes these under this module's name; ours carry more (what was
deleted, changed and removed, warnings, whether the store was opened at all), and
``memsearch.engine.indexer`` imports them from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memsearch.errors import MemSearchError


@dataclass(frozen=True)
class IndexFailure:
    """One file that could not be indexed, and why."""

    path: str
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}


@dataclass(frozen=True)
class IndexReport:
    """What one ``index`` run did. ``indexed_chunks`` counts chunks embedded in *this* run."""

    indexed_chunks: int
    total_files: int
    indexed_files: int
    failed_files: tuple[IndexFailure, ...] = ()
    deleted_chunks: int = 0
    changed_files: int = 0
    removed_files: int = 0
    warnings: tuple[str, ...] = ()
    #: True when the manifest showed nothing had changed and the store was not opened.
    unchanged: bool = False
    #: Seconds this run waited for the embedder (model and cache); the rest is overhead (the bench
    #: prints both).
    embed_seconds: float = 0.0
    #: Paths given that do not exist and under which the index held nothing (a typo, most likely;
    #: a missing path it held files under has them removed, and a warning says so).
    missing_paths: tuple[str, ...] = ()
    #: Chunks given their second vector by the multilingual leg in this run (``engine.multilingual``).
    multilingual_embedded: int = 0

    @property
    def status(self) -> str:
        return "degraded" if self.failed_files else "ok"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexReport:
        """A report from its ``dataclasses.asdict`` form (what the memory service sends)."""
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in known}  # (a service of another version)
        fields["failed_files"] = tuple(IndexFailure(**f) for f in fields.get("failed_files", ()))
        fields["warnings"] = tuple(fields.get("warnings", ()))
        fields["missing_paths"] = tuple(fields.get("missing_paths", ()))
        return cls(**fields)


def format_error(exc: BaseException, limit: int = 2000) -> str:
    """``Type: message`` for reports; our own errors read better without the class name."""
    text = exc.one_line() if isinstance(exc, MemSearchError) else f"{type(exc).__name__}: {exc}"
    suffix = "... [truncated]"
    return text if len(text) <= limit else text[: limit - len(suffix)] + suffix
