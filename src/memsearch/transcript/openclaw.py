"""OpenClaw: session JSONL, the same entries in its agent SQLite database, and the bare
messages its ``agent_end`` hook receives."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memsearch.errors import TranscriptReadError
from memsearch.transcript.content import clip, content_text, image_placeholder, join_text, render_input
from memsearch.transcript.model import ToolCall, Turn
from memsearch.transcript.source import Entry, Source, choose_session, zstd_decompress

__all__ = [
    "OPENCLAW_EVENTS",
    "is_openclaw_entry",
    "openclaw_message_turns",
    "parse_openclaw",
    "parse_openclaw_db",
]


def is_openclaw_entry(entry: Mapping[str, Any]) -> bool:
    message = entry.get("message")
    return entry.get("type") == "message" and isinstance(message, Mapping) and "role" in message


def parse_openclaw(src: Source) -> list[Turn]:
    """OpenClaw session JSONL (and the same entries read from its SQLite database).

    Both shapes are read: tool calls as ``toolCall`` blocks (input in ``input``, ``parameters`` or
    ``arguments``) with results as ``toolResult`` blocks in the same message, and results as separate
    messages of role ``toolResult`` matched to their call by ``toolCallId``.
    """
    turns: list[Turn] = []
    pending: dict[str, ToolCall] = {}
    last: ToolCall | None = None
    for _, entry in src.entries:
        message = entry.get("message")
        if entry.get("type") != "message" or not isinstance(message, Mapping):
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "toolResult":
            call = pending.get(str(message.get("toolCallId"))) or last
            if call is not None:
                out = content_text(content)
                call.output = clip(f"[error] {out}" if message.get("isError") else out)
            continue
        if role not in ("user", "assistant"):
            continue
        turn = Turn(str(role), str(entry.get("id") or ""))
        if isinstance(content, str):
            turn.text = content.strip()
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                turn.text = join_text(turn.text, block["text"])
            elif kind == "image":
                turn.text = join_text(turn.text, image_placeholder(block))
            elif kind == "toolCall":
                name = block.get("name") or block.get("toolName") or "tool"
                raw = next((block[k] for k in ("input", "parameters", "arguments") if k in block), None)
                last = ToolCall(str(name), render_input(raw))
                turn.tools.append(last)
                if block.get("id"):
                    pending[str(block["id"])] = last
            elif kind == "toolResult" and last is not None:
                raw_out = block.get("text") if block.get("text") is not None else block.get("content")
                last.output = clip(content_text(raw_out))
        turn.text = turn.text.strip()
        if turn.text or turn.tools:
            turns.append(turn)
    return turns


def openclaw_message_turns(messages: Iterable[Any]) -> list[Turn]:
    """Turns of the bare message objects an OpenClaw ``agent_end`` hook receives (``{role, content}``,
    no entry ids): parsed like the entries of a session transcript."""
    entries: list[Entry] = [(n, {"type": "message", "message": m}) for n, m in enumerate(messages, 1)]
    return parse_openclaw(Source(Path(), entries, None, []))


#: The table OpenClaw (2026.9.x) keeps session transcripts in, in ``openclaw-agent.sqlite``.
OPENCLAW_EVENTS = "transcript_events"


def parse_openclaw_db(src: Source) -> list[Turn]:
    """OpenClaw's agent database (``agents/<id>/agent/openclaw-agent.sqlite``), read-only.

    Each row of ``transcript_events`` is one entry of the session-JSONL format, as JSON text or, for
    entries of 1 KiB and more, zstd-compressed (``event_zstd``); rows are read in ``seq`` order and
    parsed like the JSONL file.
    """
    import sqlite3

    try:
        con = sqlite3.connect(src.path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TranscriptReadError(f"cannot open OpenClaw database {src.path}: {exc}") from exc
    try:
        newest_first = (
            f"SELECT session_id, MAX(created_at) AS t FROM {OPENCLAW_EVENTS} GROUP BY session_id "
            "ORDER BY t DESC, session_id"
        )
        session = choose_session(src, con, newest_first, "OpenClaw")
        if session is None:
            return []
        rows = con.execute(
            f"SELECT seq, event_json, event_zstd FROM {OPENCLAW_EVENTS} WHERE session_id = ? ORDER BY seq",
            (session,),
        ).fetchall()
    except sqlite3.Error as exc:
        raise TranscriptReadError(f"cannot read OpenClaw database {src.path}: {exc}") from exc
    finally:
        con.close()
    bad: list[str] = []
    for k, (seq, text, packed) in enumerate(rows, 1):
        try:
            raw = text if text is not None else zstd_decompress(packed).decode("utf-8", errors="replace")
            entry = json.loads(raw)
        except Exception:  # a damaged row: skip it, as a malformed JSONL line is skipped
            entry = None
        if isinstance(entry, dict):
            # seq is the entry's "line"; a damaged row may have none (then its place in the order)
            src.entries.append((seq if isinstance(seq, int) else k, entry))
        else:
            bad.append(str(seq))
    if bad:
        src.warnings.append(
            f"{src.path}: skipped {len(bad)} unreadable transcript rows (first: seq {bad[0]})"
        )
    return parse_openclaw(src)
