"""The library side of ``memsearch expand``: from a stored chunk back to its text on disk.

This module owns chunk-hash validation, the three ways of widening a chunk (its whole section, N
lines of context, or exactly its own lines), and recognising the HTML anchor comments the agent
plugins write under each journal turn (docs/platforms/*.md show each host's), so a caller can go on to the
transcript. Looking the chunk up in the store and printing are the CLI's job.

A section is reported exactly as the original 0.4.23 reports it (from the chunk's heading up to
the next heading of the same or a higher rank, blank lines included), so both tools print the
same text. Where the original was wrong we differ: a preamble chunk expands to the text before
the first heading (not the rest of the file), headings are found exactly as the chunker finds
them (never inside code fences), and every platform's anchor is recognised, not only Claude
Code's (docs/compatibility.md).
"""

from __future__ import annotations

import bisect
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsearch.chunker import Heading, find_headings, split_lines
from memsearch.errors import (
    ChunkNotFoundError,
    InvalidChunkHashError,
    InvalidExpandOptionError,
    SourceFileNotFoundError,
    SourceReadError,
    StaleChunkError,
)
from memsearch.scanner import read_markdown

__all__ = [
    "Anchor",
    "Expansion",
    "InvalidExpandOptionError",
    "SourceReadError",
    "StaleChunkError",
    "anchor_host",
    "expand_chunk",
    "parse_anchor",
    "validate_chunk_hash",
]

_HEX = frozenset("0123456789abcdef")
_MAX_HASH_LEN = 64  # a full SHA-256; stored chunk hashes are the first 16 hex digits of one
_COMMENT_RE = re.compile(r"<!--(.*?)-->", re.DOTALL)


# --- chunk hashes ---------------------------------------------------------------------------


def validate_chunk_hash(value: str) -> str:
    """The hash, stripped and lower-cased, if it is 1–64 hex digits.

    Checked before it reaches a store filter, so odd input can never change the query.
    """
    candidate = value.strip().lower()
    if not candidate or len(candidate) > _MAX_HASH_LEN or not set(candidate) <= _HEX:
        raise InvalidChunkHashError(
            f"'{value}' is not a chunk hash: expected hexadecimal like 57f026237c0da79b",
            hint="copy it from the `Chunk:` line of a `memsearch search` hit (chunk_hash in --json-output)",
        )
    return candidate


def chunk_not_found(chunk_hash: str) -> ChunkNotFoundError:
    """The answer for a hash no stored chunk has (the store's owner may be another process)."""
    return ChunkNotFoundError(
        f"Chunk not found: {chunk_hash}",
        hint="run `memsearch search` to get current chunk hashes (hashes change when a file is edited)",
    )


# --- anchors --------------------------------------------------------------------------------

_ANCHOR_FIELDS = ("session", "turn", "transcript", "rollout", "db")
_OPTIONAL_VALUE_FIELDS = frozenset({"rollout"})  # Codex writes `rollout:` with no path at times

# Which platform wrote an anchor, told by its set of fields (each host's anchor has its own).
_ANCHOR_KINDS: dict[frozenset[str], str] = {
    frozenset({"session", "turn", "transcript"}): "claude-code",
    frozenset({"session", "rollout"}): "codex",
    frozenset({"session", "transcript"}): "openclaw",
    frozenset({"session", "turn", "db"}): "opencode",
    frozenset({"session", "db"}): "opencode-legacy",
}
# OpenCode and DSH write the same fields; DSH's turn is a turn number, OpenCode's a message id.
_INTEGER_TURN_KINDS = {"opencode": "dsh"}
# OpenClaw's anchor holds its turn too (``session transcript turn``, as Claude Code's): its
# transcript is an OpenClaw agent's database, ``<state>/agents/<agent>/agent/openclaw-agent.sqlite``
# (2026.9), or its session file, ``<state>/agents/<agent>/sessions/<id>.jsonl`` (before).
_OPENCLAW_TRANSCRIPT = re.compile(
    r"[/\\]agents[/\\][^/\\]+[/\\](?:sessions[/\\][^/\\]+|agent[/\\]openclaw-agent\.sqlite)$"
)
#: The anchor the MCP ``remember`` tool writes (no conversation: a note the model was asked to keep).
REMEMBER_ANCHOR = {"via": "mcp"}


def _kind(fields: Mapping[str, str]) -> str | None:
    """Which host wrote anchor ``fields`` (the anchor kinds of :class:`Anchor`), None when no host's."""
    kind = _ANCHOR_KINDS.get(frozenset(k for k in fields if k in _ANCHOR_FIELDS))
    if kind is None:
        return None
    if fields.get("turn", "").isdigit():
        kind = _INTEGER_TURN_KINDS.get(kind, kind)
    if kind == "claude-code" and _OPENCLAW_TRANSCRIPT.search(fields.get("transcript", "")):
        kind = "openclaw"
    return kind


def anchor_host(fields: Mapping[str, str]) -> str:
    """The host whose capture wrote a journal entry with these anchor fields: ``claude-code``,
    ``codex``, ``opencode``, ``openclaw``, ``dsh``, ``mcp`` (the ``remember`` tool), or "" when
    the fields name none (a hand-written entry). Told from the fields each host writes and, where
    two hosts write the same fields, from their values (docs/platforms/*.md)."""
    if fields.get("via") == REMEMBER_ANCHOR["via"]:
        return "mcp"
    kind = _kind(fields)
    return {"opencode-legacy": "opencode"}.get(kind or "", kind or "")


@dataclass(frozen=True)
class Anchor:
    """A journal turn's pointer back to its session (and transcript, rollout or database).

    ``kind`` is one of ``claude-code``, ``codex``, ``openclaw``, ``opencode``,
    ``opencode-legacy``, ``dsh``. All values are kept as the strings written (DSH's turn too).
    """

    kind: str
    session: str
    turn: str | None = None
    transcript: str | None = None
    rollout: str | None = None
    db: str | None = None

    def to_dict(self) -> dict[str, str]:
        """The fields this anchor has, session first.

        For Claude Code anchors that is exactly ``{session, turn, transcript}``, the original's
        ``--json-output`` shape.
        """
        return {name: value for name in _ANCHOR_FIELDS if (value := getattr(self, name)) is not None}


def _anchor_from_comment(body: str) -> Anchor | None:
    fields: dict[str, str] = {}
    for token in body.split():
        key, sep, value = token.partition(":")
        if not sep or not key.isidentifier():
            return None  # prose, not a key:value anchor
        if key not in _ANCHOR_FIELDS:
            continue  # a field some newer plugin added; does not change the kind
        if key in fields or (not value and key not in _OPTIONAL_VALUE_FIELDS):
            return None
        fields[key] = value
    kind = _kind(fields)
    if kind is None:
        return None
    return Anchor(kind=kind, **fields)


def parse_anchor(text: str) -> Anchor | None:
    """The first anchor comment in ``text`` (fields in any order), or ``None``."""
    for match in _COMMENT_RE.finditer(text):
        anchor = _anchor_from_comment(match.group(1))
        if anchor is not None:
            return anchor
    return None


# --- expansion ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expansion:
    """Expanded text of a chunk. ``start_line``/``end_line`` are 1-based, inclusive, and are
    exactly the lines in ``content``. ``warning`` reports invalid UTF-8 in the source."""

    chunk_hash: str
    source: str
    heading: str
    start_line: int
    end_line: int
    content: str
    anchor: Anchor | None = None
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The original's ``expand --json-output`` keys, in its order; ``anchor`` only when found."""
        data: dict[str, Any] = {
            "chunk_hash": self.chunk_hash,
            "source": self.source,
            "heading": self.heading,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "content": self.content,
        }
        if self.anchor is not None:
            data["anchor"] = self.anchor.to_dict()
        return data


def _section_range(
    n_lines: int, headings: list[Heading], start: int, level: int, *, subsections: bool = True
) -> tuple[int, int]:
    """0-based ``[begin, end)`` of the section holding the chunk that starts at index ``start``.

    It begins at the nearest heading at or above ``start`` with the chunk's level and runs to the
    next heading of the same or a higher rank, so subsections are included; with
    ``subsections=False`` it stops at the next heading of any level (the chunker's section).
    """
    if level <= 0:
        return 0, headings[0].index if headings else n_lines
    indices = [h.index for h in headings]
    begin = start
    for k in range(bisect.bisect_right(indices, start) - 1, -1, -1):
        if headings[k].level == level:
            begin = headings[k].index
            break
    end = n_lines
    for h in headings[bisect.bisect_right(indices, begin) :]:
        if h.level <= level or not subsections:
            end = h.index
            break
    return begin, end


def _read_source(source: str) -> tuple[list[str], str | None]:
    """The file's lines as they may leave memsearch: the whole file redacted first (a ``<private>``
    block or a key block may begin above the section shown), line numbers unchanged."""
    from memsearch import exits

    try:
        decoded = read_markdown(Path(source).expanduser())
    except FileNotFoundError:
        from memsearch.engine.index_scan import gone_hint

        raise SourceFileNotFoundError(f"Source file not found: {source}", hint=gone_hint(source)) from None
    except OSError as exc:
        raise SourceReadError(
            f"Cannot read {source}: {exc.strerror or exc}",
            hint="check the file's permissions, then try again",
        ) from None
    return split_lines(exits.out(decoded.text, "expand")), decoded.warning


def expand_chunk(
    chunk: Mapping[str, Any], *, section: bool = True, context_lines: int | None = None
) -> Expansion:
    """Re-read a chunk's source and return the requested span around it.

    ``chunk`` is a store row (``chunk_hash, source, heading, heading_level, start_line,
    end_line``). ``context_lines=N`` returns the chunk's lines plus N lines either side and
    overrides ``section``; ``section=True`` returns the whole section (subsections included; a
    preamble chunk gives the text before the first heading); ``section=False`` returns exactly the
    chunk's own lines. Blank lines inside the span stay in it (a section runs up to the next
    heading), exactly as the original reports the range, so both tools print the same text.
    """
    if context_lines is not None and context_lines < 0:
        raise InvalidExpandOptionError(
            f"context lines must be zero or more, got {context_lines}",
            hint="pass --lines N with N >= 0",
        )
    source = str(chunk["source"])
    start_line = int(chunk.get("start_line") or 1)
    end_line = max(start_line, int(chunk.get("end_line") or start_line))
    level = int(chunk.get("heading_level") or 0)
    lines, warning = _read_source(source)
    n = len(lines)
    if start_line > n:
        raise StaleChunkError(
            f"Chunk lines {start_line}-{end_line} are past the end of {source} ({n} lines)",
            hint=f"the file changed since it was indexed: `memsearch index {shlex.quote(source)}` "
            "brings its chunks up to date",
        )
    own = (start_line - 1, min(end_line, n))
    headings = find_headings(lines)
    if context_lines is not None:
        span = (max(0, own[0] - context_lines), min(n, own[1] + context_lines))
    elif section:
        span = _section_range(n, headings, own[0], level)
        if not span[0] <= own[0] < span[1]:  # the file changed under a preamble chunk
            span = own
    else:
        span = own
    begin, end = span
    content = "\n".join(lines[begin:end])
    # The anchor of the chunk's own section (its journal turn) wins: context lines can reach into
    # neighbouring turns, whose anchors must not be reported for this chunk. Only a whole-section
    # expansion falls back to the rest of what it returns (its subsections).
    own_begin, own_end = _section_range(n, headings, own[0], level, subsections=False)
    if not own_begin <= own[0] < own_end:
        own_begin, own_end = own
    anchor = parse_anchor("\n".join(lines[own_begin:own_end]))
    if anchor is None and section and context_lines is None:
        anchor = parse_anchor(content)
    from memsearch import exits

    return Expansion(
        chunk_hash=str(chunk.get("chunk_hash", "")),
        source=source,
        heading=exits.out(str(chunk.get("heading") or ""), "expand"),
        start_line=begin + 1,
        end_line=end,
        content=content,
        anchor=anchor,
        warning=warning,
    )
