"""Codex rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from memsearch.transcript.content import clip, join_text, render_input
from memsearch.transcript.model import ToolCall, Turn
from memsearch.transcript.source import Source

__all__ = ["is_codex_entry", "parse_codex"]


_CODEX_TYPES = ("event_msg", "response_item", "session_meta", "turn_context")
#: Codex 0.171.0 prefixes ``exec_command`` outputs with ``Chunk ID: …`` … ``Output:`` lines.
_CODEX_EXEC_HEADER = re.compile(r"\AChunk ID: [^\n]*\n(?:[^\n]*\n)*?Output:\n")


def is_codex_entry(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") in _CODEX_TYPES and isinstance(entry.get("payload"), Mapping)


def _codex_output(raw: Any) -> str:
    """A tool output: Codex often stores ``{"output": ..., "metadata": ...}`` as a JSON string."""
    if isinstance(raw, str):
        try:
            decoded = json.loads(raw)
        except ValueError:
            return _CODEX_EXEC_HEADER.sub("", raw, count=1)
        if isinstance(decoded, Mapping) and isinstance(output := decoded.get("output"), str):
            return output
        return raw
    if isinstance(raw, Mapping) and isinstance(content := raw.get("content"), str):
        return content
    return json.dumps(raw, ensure_ascii=False)


class _CodexState:
    """Turn assembly for a rollout; see :func:`parse_codex` for the id scheme."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.pending: dict[str, ToolCall] = {}
        self.assistant: Turn | None = None
        self.turn_id: str | None = None
        self.user_seen = False
        self.replies = 0

    def start_task(self, turn_id: Any) -> None:
        tid = str(turn_id) if turn_id else None
        if tid is not None and tid == self.turn_id:
            return  # turn_context repeating the task's id
        self.turn_id, self.user_seen, self.replies, self.assistant = tid, False, 0, None

    def end_task(self) -> None:
        self.assistant = None  # what follows belongs to no reply of this task

    def user(self, line: int, text: str) -> None:
        uuid = self.turn_id if self.turn_id and not self.user_seen else f"L{line}"
        self.user_seen = True
        self.assistant = None
        self.turns.append(Turn("user", uuid, text))

    def reply(self, line: int) -> Turn:
        if self.assistant is None:
            self.replies += 1
            uuid = f"{self.turn_id}.{self.replies}" if self.turn_id else f"L{line}"
            self.assistant = Turn("assistant", uuid)
            self.turns.append(self.assistant)
        return self.assistant

    def call(self, line: int, call_id: Any, tool: ToolCall) -> None:
        self.reply(line).tools.append(tool)
        if call_id:
            self.pending[str(call_id)] = tool

    def result(self, call_id: Any, output: Any) -> None:
        tool = self.pending.get(str(call_id))
        if tool is not None:
            tool.output = clip(_codex_output(output))


def _codex_user(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    text = str(p.get("message") or "").strip()
    images = [i for i in (p.get("images") or []) if i] + [i for i in (p.get("local_images") or []) if i]
    text = "\n".join([text, *("[image]" for _ in images)]).strip()
    if text:
        state.user(line, text)


def _codex_agent(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    message = str(p.get("message") or "")
    if message.strip():
        turn = state.reply(line)
        turn.text = join_text(turn.text, message)


def _codex_function_call(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    args = p.get("arguments")
    if isinstance(args, str):
        with contextlib.suppress(ValueError):  # not JSON: show the raw string
            args = json.loads(args)
    state.call(line, p.get("call_id"), ToolCall(str(p.get("name") or "tool"), render_input(args)))


def _codex_custom_call(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    state.call(line, p.get("call_id"), ToolCall(str(p.get("name") or "tool"), render_input(p.get("input"))))


def _codex_web_search(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    action = p.get("action")
    query = action.get("query") if isinstance(action, Mapping) else None
    state.call(line, None, ToolCall("web_search", str(query or "")))


def _codex_output_item(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    state.result(p.get("call_id"), p.get("output"))


def _codex_item_text(content: Any) -> str:
    """Text of an ``item_completed`` item's content (blocks typed ``text`` or ``Text``; images as
    placeholders)."""
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = str(block.get("type") or "").lower()
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif "image" in kind:
            parts.append("[image]")
    return "\n".join(p for p in parts if p).strip()


def _codex_item(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    """Codex 0.171.0: ``event_msg`` ``item_completed`` with a ``UserMessage`` or ``AgentMessage``."""
    item = p.get("item")
    if not isinstance(item, Mapping):
        return
    text = _codex_item_text(item.get("content"))
    if not text:
        return
    if item.get("type") == "UserMessage":
        state.user(line, text)
    elif item.get("type") == "AgentMessage":
        turn = state.reply(line)
        turn.text = join_text(turn.text, text)


def _codex_response_message(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    """A ``response_item`` message, for rollouts that have neither message events nor completed
    items. User messages that are one wrapped block (``<environment_context>…``) are context the
    harness added, not what the user typed."""
    text = _codex_item_text(
        [{**b, "type": "text"} for b in p.get("content") or [] if isinstance(b, Mapping) and "text" in b]
    )
    if not text:
        return
    if p.get("role") == "user" and not (text.startswith("<") and text.endswith(">")):
        state.user(line, text)
    elif p.get("role") == "assistant":
        turn = state.reply(line)
        turn.text = join_text(turn.text, text)


_CodexHandler = Callable[[_CodexState, int, Mapping[str, Any]], None]

#: Where a rollout keeps the conversation's messages, newest Codex last; a rollout is read from the
#: first of these it contains (versions that wrote two of them would otherwise show each twice).
#: Codex up to ~0.1xx wrote ``user_message``/``agent_message`` events; Codex 0.171.0 writes none and
#: keeps the messages in ``item_completed`` events (and in ``response_item`` messages, whose user
#: role also carries the harness's context blocks, hence last).
_CODEX_MESSAGE_SOURCES: tuple[dict[tuple[str, str], _CodexHandler], ...] = (
    {("event_msg", "user_message"): _codex_user, ("event_msg", "agent_message"): _codex_agent},
    {("event_msg", "item_completed"): _codex_item},
    {("response_item", "message"): _codex_response_message},
)

# (entry type, payload type) → handler; everything else (reasoning, token counts, ...) carries
# nothing the transcript shows. The message handlers are added per rollout (see above).
_CODEX_HANDLERS: dict[tuple[str, str], _CodexHandler] = {
    ("event_msg", "task_started"): lambda s, _line, p: s.start_task(p.get("turn_id")),
    ("event_msg", "task_complete"): lambda s, _line, _p: s.end_task(),
    ("response_item", "function_call"): _codex_function_call,
    ("response_item", "function_call_output"): _codex_output_item,
    ("response_item", "custom_tool_call"): _codex_custom_call,
    ("response_item", "custom_tool_call_output"): _codex_output_item,
    ("response_item", "web_search_call"): _codex_web_search,
}


def parse_codex(src: Source) -> list[Turn]:
    """Codex rollout JSONL.

    The original gave Codex turns no id. Ids here are stable across runs: when the rollout records
    Codex's own turn id (``task_started``/``turn_context`` ``turn_id``), the user prompt of that task
    gets it and the assistant turns ``<turn_id>.1``, ``.2``, ...; older rollouts without one get
    ``L<line>``, the line number of the entry that opened the turn (rollouts are append-only).
    """
    state = _CodexState()
    kinds = {
        (str(entry.get("type")), str(payload.get("type")))
        for _line, entry in src.entries
        if isinstance(payload := entry.get("payload"), Mapping)
    }
    messages = next((source for source in _CODEX_MESSAGE_SOURCES if kinds & source.keys()), {})
    handlers = {**_CODEX_HANDLERS, **messages}
    for line, entry in src.entries:
        payload = entry.get("payload")
        if not isinstance(payload, Mapping):
            continue
        if entry.get("type") == "turn_context":
            if payload.get("turn_id"):
                state.start_task(payload["turn_id"])
            continue
        handler = handlers.get((str(entry.get("type")), str(payload.get("type"))))
        if handler is not None:
            handler(state, line, payload)
    return [t for t in state.turns if t.text or t.tools]
