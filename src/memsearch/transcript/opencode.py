"""OpenCode's SQLite database (``~/.local/share/opencode/opencode.db``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from memsearch.errors import TranscriptReadError
from memsearch.transcript.content import clip, join_text, render_input
from memsearch.transcript.model import ToolCall, Turn
from memsearch.transcript.source import Source, choose_session

__all__ = ["parse_opencode"]


def _json_rows(rows: Iterable[tuple[str, Any]], bad: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for key, data in rows:
        try:
            obj = json.loads(data)
        except (TypeError, ValueError, RecursionError):  # not text, not JSON, nested thousands deep
            obj = None
        if isinstance(obj, dict):
            out.append((key, obj))
        else:
            bad.append(key)
    return out


def _opencode_part(turn: Turn, part: Mapping[str, Any]) -> None:
    kind = part.get("type")
    if kind == "text" and not part.get("synthetic") and isinstance(part.get("text"), str):
        turn.text = join_text(turn.text, part["text"].strip())
    elif kind == "file":
        mime = str(part.get("mime") or "")
        label = "image" if mime.startswith("image/") else "file"
        name = part.get("filename") or mime
        turn.text = join_text(turn.text, f"[{label}: {name}]" if name else f"[{label}]")
    elif kind == "tool":
        state = part.get("state")
        if not isinstance(state, Mapping):
            state = {}
        raw = state.get("output")
        output = f"[error] {state['error']}" if state.get("error") else raw if isinstance(raw, str) else ""
        turn.tools.append(
            ToolCall(str(part.get("tool") or "tool"), render_input(state.get("input")), clip(output))
        )


def parse_opencode(src: Source) -> list[Turn]:
    """OpenCode's SQLite database (``message`` and ``part`` tables, JSON in ``data``).

    One turn per user or assistant message, in ``time_created, id`` order. Text comes from
    non-synthetic ``text`` parts, tools from ``tool`` parts (input, clipped output or error); reasoning
    and step markers are not shown. The database is opened read-only.
    """
    import sqlite3

    uri = src.path.resolve().as_uri() + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise TranscriptReadError(f"cannot open OpenCode database {src.path}: {exc}") from exc
    try:
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise src.unknown_format(f"{src.path} is not a readable SQLite database ({exc})") from exc
        if not {"message", "part"} <= tables:
            raise src.unknown_format(f"{src.path} is a SQLite database without OpenCode's tables")
        try:
            newest_first = (
                "SELECT session_id, MAX(time_created) AS t FROM message GROUP BY session_id "
                "ORDER BY t DESC, session_id"
            )
            session = choose_session(src, con, newest_first, "OpenCode")
            if session is None:
                return []
            messages_rows = con.execute(
                "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id", (session,)
            ).fetchall()
            part_rows = con.execute(
                "SELECT p.message_id, p.data FROM part AS p JOIN message AS m ON p.message_id = m.id "
                "WHERE m.session_id = ? ORDER BY p.time_created, p.id",
                (session,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise TranscriptReadError(f"cannot read OpenCode database {src.path}: {exc}") from exc
    finally:
        con.close()
    bad: list[str] = []
    messages = _json_rows(messages_rows, bad)
    parts: dict[str, list[dict[str, Any]]] = {}
    for message_id, part in _json_rows(part_rows, bad):
        parts.setdefault(message_id, []).append(part)
    if bad:
        src.warnings.append(f"{src.path}: skipped {len(bad)} rows whose data is not a JSON object")
    turns: list[Turn] = []
    for message_id, data in messages:
        role = data.get("role")
        if role not in ("user", "assistant"):
            continue
        turn = Turn(str(role), message_id)
        for part in parts.get(message_id, []):
            _opencode_part(turn, part)
        if turn.text or turn.tools:
            turns.append(turn)
    return turns
