"""The format table: name → how to recognise the format and how to parse it.

Adding a format is one module with a parser (and a JSONL entry detector or SQLite magic) and one
row here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memsearch.transcript.claude_code import is_claude_entry, parse_claude
from memsearch.transcript.codex import is_codex_entry, parse_codex
from memsearch.transcript.dsh import is_dsh_entry, parse_dsh
from memsearch.transcript.model import Turn
from memsearch.transcript.openclaw import (
    OPENCLAW_EVENTS,
    is_openclaw_entry,
    parse_openclaw,
    parse_openclaw_db,
)
from memsearch.transcript.opencode import parse_opencode
from memsearch.transcript.source import SQLITE_MAGIC, Source

__all__ = ["FORMATS", "TranscriptFormat"]


@dataclass(frozen=True)
class TranscriptFormat:
    """How to recognise one format and how to parse it.

    ``magic`` recognises binary formats by their first bytes; ``entry_matches`` recognises a JSONL
    format by one entry. ``has_sessions`` marks containers of many sessions (``--session``).
    """

    label: str
    parse: Callable[[Source], list[Turn]]
    magic: bytes | None = None
    entry_matches: Callable[[Mapping[str, Any]], bool] | None = None
    has_sessions: bool = False
    #: For a SQLite format: tables the database must have (tried before formats that name none).
    tables: frozenset[str] = frozenset()


#: Format name → detector and parser. JSONL detectors are tried in this order on each entry (the
#: original's order: Codex, OpenClaw, Claude Code).
FORMATS: dict[str, TranscriptFormat] = {
    "openclaw-db": TranscriptFormat(
        "OpenClaw agent SQLite",
        parse_openclaw_db,
        magic=SQLITE_MAGIC,
        has_sessions=True,
        tables=frozenset({OPENCLAW_EVENTS}),
    ),
    "opencode": TranscriptFormat("OpenCode SQLite", parse_opencode, magic=SQLITE_MAGIC, has_sessions=True),
    "codex": TranscriptFormat("Codex rollout JSONL", parse_codex, entry_matches=is_codex_entry),
    "openclaw": TranscriptFormat("OpenClaw session JSONL", parse_openclaw, entry_matches=is_openclaw_entry),
    "claude": TranscriptFormat("Claude Code session JSONL", parse_claude, entry_matches=is_claude_entry),
    "dsh": TranscriptFormat("DeepSeek Harness session JSONL", parse_dsh, entry_matches=is_dsh_entry),
}
