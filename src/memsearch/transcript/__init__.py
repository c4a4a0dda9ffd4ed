"""Agent session transcripts → a list of turns: the L3 step of progressive disclosure.

This package owns reading the transcripts the agents write — Claude Code session JSONL, Codex
rollout JSONL, OpenClaw session JSONL or agent database, OpenCode's SQLite database, and DeepSeek
Harness session JSONL (zstd-compressed or not) — into one small model
(:class:`Turn` with :class:`ToolCall` s), picking the turns around an id, and rendering them as text or
JSON for ``memsearch transcript``. The agent plugins reuse it (:func:`last_turn`) to extract the turn
they summarise, so the parsing lives once, here. Its modules follow the steps: :mod:`.model`
(turns and picking them), :mod:`.source` (reading a file leniently), one module per format
(:mod:`.claude_code`, :mod:`.codex`, :mod:`.openclaw`, :mod:`.opencode`, :mod:`.dsh`), :mod:`.formats` (the
table), :mod:`.reading` (detecting and parsing) and :mod:`.render`; every name is importable from
``memsearch.transcript`` as before.

Formats are a table (:data:`FORMATS`: name → detector + parser). A format is recognised by the file's
magic bytes and tables (SQLite) or by the first JSONL entry that one of the entry detectors accepts, in table
order; nothing recognised raises :class:`~memsearch.errors.UnknownTranscriptFormatError` (exit 3, so a
caller can fall back to reading the file itself).

Transcripts are read by agents while the agent may still be writing them, and may hold bytes that are
not UTF-8. Each line is decoded on its own with replacement, a half-written final line is skipped, and
both are reported as warnings on the returned :class:`Transcript` instead of failing the whole read.
"""

from __future__ import annotations

from memsearch.errors import (
    OpenCodeSessionError,
    SessionNotApplicableError,
    TranscriptError,
    TranscriptNotFoundError,
    TranscriptReadError,
    TurnNotFoundError,
    UnknownTranscriptFormatError,
)
from memsearch.transcript.content import MAX_OUTPUT_CHARS
from memsearch.transcript.formats import FORMATS, TranscriptFormat
from memsearch.transcript.model import ToolCall, Transcript, Turn, find_turn, last_turn, select_turns
from memsearch.transcript.openclaw import openclaw_message_turns
from memsearch.transcript.reading import detect_format, parse_transcript, read_transcript
from memsearch.transcript.render import MAX_RENDER_CHARS, format_turns, turns_to_json
from memsearch.transcript.source import UNKNOWN_FORMAT_MESSAGE

__all__ = [
    "FORMATS",
    "MAX_OUTPUT_CHARS",
    "MAX_RENDER_CHARS",
    "UNKNOWN_FORMAT_MESSAGE",
    "OpenCodeSessionError",
    "SessionNotApplicableError",
    "ToolCall",
    "Transcript",
    "TranscriptError",
    "TranscriptFormat",
    "TranscriptNotFoundError",
    "TranscriptReadError",
    "Turn",
    "TurnNotFoundError",
    "UnknownTranscriptFormat",
    "detect_format",
    "find_turn",
    "format_turns",
    "last_turn",
    "openclaw_message_turns",
    "parse_transcript",
    "read_transcript",
    "select_turns",
    "turns_to_json",
]

#: The original's exception name, kept for callers that import it.
UnknownTranscriptFormat = UnknownTranscriptFormatError
