"""DeepSeek Harness (DSH) session artifacts: one file per session,
``~/.dsh/sessions/--<project>--/<session>/session.jsonl.zstd`` (zstd frames, DSH's default; the
reader in :mod:`.source` decompresses them) or ``session.jsonl``.

What DSH 0.1.0-rc.8 writes, seen in its artifacts: a header line ``{"type": "session", "id", "cwd",
...}``, then one event per line, ``{"type", "seq", "time", "data"}``. A turn runs from
``turn/start`` to ``turn/end`` (``data.turn``, counted from 1 in each session); inside it,
``user/message`` (``data.source.kind`` is ``user`` for what the person typed, ``plugin`` for what
plugins add, such as DSH's runtime context or memsearch's own hint), ``assistant/message`` (text
and ``tool-call`` blocks in ``data.message.content``), ``tool/result`` (``tool-result`` blocks
matched to their call by ``toolCallId``), and streaming rows (``assistant/chunk``, packed
``*-chunks``) that repeat what the messages hold and are not read.

Turn ids: the first message the person typed in DSH turn ``N`` gets the id ``N`` (what journal
anchors write as ``turn:N``); other messages keep DSH's message id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsearch.transcript.content import clip, content_text, render_input
from memsearch.transcript.model import ToolCall, Turn
from memsearch.transcript.source import Entry, Source, check_path, read_jsonl

__all__ = ["DshTurn", "is_dsh_entry", "parse_dsh", "read_dsh_turn"]


def is_dsh_entry(entry: Mapping[str, Any]) -> bool:
    """A DSH event line: a ``kind/name`` type, a numbered ``seq`` and a ``data`` object."""
    kind = entry.get("type")
    return (
        isinstance(kind, str)
        and "/" in kind
        and isinstance(entry.get("seq"), int)
        and isinstance(entry.get("data"), Mapping)
    )


@dataclass
class DshTurn:
    """One DSH turn (``turn/start`` to ``turn/end``): the person's message and the agent's."""

    number: int
    user: Turn | None = None
    replies: list[Turn] = field(default_factory=list)
    ended: bool = False


def _assistant(data: Mapping[str, Any], calls: dict[str, ToolCall]) -> Turn | None:
    message = data.get("message")
    if not isinstance(message, Mapping):
        return None
    turn = Turn("assistant", str(message.get("id") or ""))
    content = message.get("content")
    turn.text = content_text(content).strip()
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping) or block.get("type") != "tool-call":
            continue
        raw = block.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            arguments = raw
        call = ToolCall(str(block.get("name") or "tool"), render_input(arguments))
        turn.tools.append(call)
        if block.get("id"):
            calls[str(block["id"])] = call
    return turn if turn.text or turn.tools else None


def _results(data: Mapping[str, Any], calls: dict[str, ToolCall]) -> None:
    message = data.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and block.get("type") == "tool-result":
            call = calls.get(str(block.get("toolCallId")))
            if call is not None:
                out = content_text(block.get("content"))
                call.output = clip(f"[error] {out}" if block.get("isError") else out)


def dsh_turns(entries: list[Entry]) -> list[DshTurn]:
    """The turns of a session's events, in order (messages outside any turn are not shown)."""
    turns: list[DshTurn] = []
    calls: dict[str, ToolCall] = {}
    current: DshTurn | None = None
    for _, entry in entries:
        kind, data = entry.get("type"), entry.get("data")
        if not isinstance(data, Mapping):
            continue
        if kind == "turn/start" and isinstance(data.get("turn"), int):
            current = DshTurn(data["turn"])
            turns.append(current)
        elif current is None:
            continue
        elif kind == "turn/end" and data.get("turn") == current.number:
            current.ended = True
        elif kind == "user/message":
            source = data.get("source")
            text = content_text(data.get("content")).strip()
            if not isinstance(source, Mapping) or source.get("kind") != "user" or not text:
                continue  # what plugins add (runtime context, skills list, memsearch's hint)
            if current.user is None:
                current.user = Turn("user", str(current.number), text, aliases=[str(data.get("id") or "")])
            else:  # a message typed while the turn ran: shown in order, under its own id
                current.replies.append(Turn("user", str(data.get("id") or ""), text))
        elif kind == "assistant/message":
            reply = _assistant(data, calls)
            if reply is not None:
                current.replies.append(reply)
        elif kind == "tool/result":
            _results(data, calls)
    return turns


def parse_dsh(src: Source) -> list[Turn]:
    """A DSH session artifact: per turn, the person's message then each step's reply (its text and
    tool calls with clipped output); what plugins inject and the streaming rows are left out."""
    out: list[Turn] = []
    for turn in dsh_turns(src.entries):
        if turn.user is not None:
            out.append(turn.user)
        out.extend(turn.replies)
    return out


def read_dsh_turn(path: str | Path, number: int) -> tuple[DshTurn | None, list[str]]:
    """Turn ``number`` of the DSH artifact at ``path`` (None while the file does not hold it yet),
    and the warnings of the read (a frame or line still being written)."""
    warnings: list[str] = []
    entries, _ = read_jsonl(check_path(path), warnings)
    found = [t for t in dsh_turns(entries) if t.number == number]
    return (found[-1] if found else None), warnings
