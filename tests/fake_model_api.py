"""A local fake model API that the real host CLIs talk to, in the three wire shapes they use.

Why: the real-host tests run Claude Code, Codex, OpenCode and OpenClaw themselves; only the model
behind them is fake (it costs money and needs the internet). One threaded HTTP server on
127.0.0.1 answers

- ``POST .../messages``          Anthropic Messages (Claude Code; streaming SSE or plain JSON)
- ``POST .../chat/completions``  OpenAI chat completions (streaming SSE or plain JSON)
- ``POST .../responses``         OpenAI Responses (Codex; streaming SSE or plain JSON)
- ``POST .../messages/count_tokens`` and ``GET .../models``: the odd start-up calls

Every request is normalised into a :class:`ModelCall` (system text, messages, tool names) and
logged, so a test can ask what reached the model (``api.saw("...")``, ``api.calls``). What the
model answers is decided by rules (``api.on(match, Answer(...))``), first match wins; without a
matching rule it echoes: after a tool result it reports the result, otherwise it acknowledges the
user's last words. Paths it does not know are logged in ``api.unknown`` and answered 404.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from fake_servers import JsonHandler, serving


@dataclass
class Message:
    """One message in a conversation, whatever the wire shape: text, a tool call or a tool result."""

    role: str
    text: str = ""
    tool_call: str = ""  # the tool's name, on an assistant message that calls one
    tool_result: str | None = None  # the tool's output, on the message that returns it


@dataclass
class ModelCall:
    """One request to the model, normalised."""

    protocol: str  # "anthropic" | "chat" | "responses"
    path: str
    model: str
    system: str
    messages: list[Message]
    tools: list[str]
    stream: bool
    body: dict[str, Any]

    @property
    def after_tool(self) -> bool:
        """Whether the conversation ends with a tool's result (the model should now answer).

        Messages with the role ``system`` after it do not count: Claude Code 2.1.197 sends its hook
        context and reminders as such messages, after the tool result."""
        spoken = [m for m in self.messages if m.role != "system"]
        return bool(spoken) and spoken[-1].tool_result is not None

    @property
    def user_text(self) -> str:
        """The text of the last user message that has text."""
        for message in reversed(self.messages):
            if message.role == "user" and message.text:
                return message.text
        return ""

    @property
    def everything(self) -> str:
        """All the text the model was given (system, messages, tool results), for ``in`` tests."""
        parts = [self.system]
        for message in self.messages:
            parts += [message.text, message.tool_result or ""]
        return "\n".join(parts)


@dataclass
class Answer:
    """What the fake model says: text, or a call of one tool with arguments."""

    text: str = ""
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


Match = Callable[[ModelCall], bool]
Reply = Answer | Callable[[ModelCall], Answer]


def default_answer(call: ModelCall) -> Answer:
    if call.after_tool:
        result = next(m.tool_result for m in reversed(call.messages) if m.tool_result is not None)
        return Answer(text=f"The tool returned: {(result or '')[:1500]}")
    return Answer(text=f"Done. You said: {call.user_text[:200]}")


@dataclass
class FakeModelAPI:
    """The server's state: the request log and the rules that pick answers."""

    url: str = ""
    calls: list[ModelCall] = field(default_factory=list)
    unknown: list[tuple[str, str]] = field(default_factory=list)
    rules: list[tuple[Match, Reply]] = field(default_factory=list)
    models: tuple[str, ...] = ("fake-model",)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, match: str | Match, reply: Reply) -> None:
        """Answer ``reply`` when ``match`` holds; a string matches the user's last text."""
        test: Match = (lambda call: match in call.user_text) if isinstance(match, str) else match
        with self._lock:
            self.rules.append((test, reply))

    def saw(self, text: str) -> bool:
        """Whether any request so far carried ``text`` anywhere the model reads."""
        return any(text in call.everything for call in self.snapshot())

    def snapshot(self) -> list[ModelCall]:
        with self._lock:
            return list(self.calls)

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def answer(self, call: ModelCall) -> Answer:
        with self._lock:
            self.calls.append(call)
            rules = list(self.rules)
        for test, reply in rules:
            if test(call):
                return reply(call) if callable(reply) else reply
        return default_answer(call)


# --- reading the three request shapes -----------------------------------------------------------


def _text_of(content: Any) -> str:
    """Text of a content field: a string, or a list of blocks with ``text`` (any block type)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text_of(block.get("text", block.get("content", "")))
            for block in content
            if isinstance(block, dict)
        )
    return ""


def _anthropic_messages(body: dict[str, Any]) -> list[Message]:
    out: list[Message] = []
    for message in body.get("messages", []):
        role, content = message.get("role", ""), message.get("content", "")
        if isinstance(content, str):
            out.append(Message(role, content))
            continue
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        calls = [b.get("name", "") for b in content if b.get("type") == "tool_use"]
        results = [_text_of(b.get("content", "")) for b in content if b.get("type") == "tool_result"]
        if texts or not (calls or results):
            out.append(Message(role, "\n".join(texts)))
        out += [Message(role, tool_call=name) for name in calls]
        out += [Message(role, tool_result=result) for result in results]
    return out


def _chat_messages(body: dict[str, Any]) -> list[Message]:
    out: list[Message] = []
    for message in body.get("messages", []):
        role = message.get("role", "")
        if role == "tool":
            out.append(Message(role, tool_result=_text_of(message.get("content", ""))))
            continue
        out.append(Message(role, _text_of(message.get("content") or "")))
        out += [
            Message(role, tool_call=c.get("function", {}).get("name", ""))
            for c in message.get("tool_calls") or []
        ]
    return out


def _responses_messages(body: dict[str, Any]) -> list[Message]:
    items = body.get("input", [])
    if isinstance(items, str):
        return [Message("user", items)]
    out: list[Message] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            out.append(Message(item.get("role", ""), _text_of(item.get("content", ""))))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            name = item.get("name", kind)
            out.append(Message("assistant", tool_call=_namespaced(item.get("namespace"), name)))
        elif kind.endswith("_output"):
            output = item.get("output", "")
            out.append(Message("tool", tool_result=output if isinstance(output, str) else _text_of(output)))
    return out


#: Between a namespace and a tool's name in the names this fake uses (a Responses API tool name
#: cannot hold a dot): Codex 0.171 offers an MCP server's tools as a ``namespace`` tool
#: (``mcp__memsearch``) holding functions (``search``), listed here as ``mcp__memsearch.search``.
NAMESPACE_SEP = "."


def _namespaced(namespace: str | None, name: str) -> str:
    return f"{namespace}{NAMESPACE_SEP}{name}" if namespace else name


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        names.append(function.get("name") or tool.get("type", ""))
        if tool.get("type") == "namespace":
            names += [_namespaced(tool.get("name"), inner.get("name", "")) for inner in tool.get("tools", [])]
    return names


def read_call(path: str, body: dict[str, Any]) -> ModelCall:
    """Normalise a request body of any of the three shapes."""
    if path.endswith("/messages"):
        protocol, system, messages = "anthropic", _text_of(body.get("system", "")), _anthropic_messages(body)
    elif path.endswith("/chat/completions"):
        protocol, messages = "chat", _chat_messages(body)
        system = "\n".join(m.text for m in messages if m.role in ("system", "developer"))
    else:
        protocol, messages = "responses", _responses_messages(body)
        system = "\n".join(
            [body.get("instructions") or ""] + [m.text for m in messages if m.role in ("system", "developer")]
        )
    return ModelCall(
        protocol,
        path,
        body.get("model", ""),
        system,
        messages,
        _tool_names(body),
        bool(body.get("stream")),
        body,
    )


# --- writing the three answer shapes ------------------------------------------------------------

Event = tuple[str, dict[str, Any]]  # (SSE event name or "", data)


def _anthropic(answer: Answer, model: str, n: int) -> tuple[dict[str, Any], list[Event]]:
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if answer.tool:
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_{n:04d}",
            "name": answer.tool,
            "input": answer.arguments,
        }
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(answer.arguments)}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": answer.text}
        start, delta, stop = (
            {"type": "text", "text": ""},
            {"type": "text_delta", "text": answer.text},
            "end_turn",
        )
    message = {
        "id": f"msg_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[Event] = [
        (
            "message_start",
            {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
        ),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return message, events


def _chat(answer: Answer, model: str, n: int) -> tuple[dict[str, Any], list[Event]]:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if answer.tool:
        calls = [
            {
                "index": 0,
                "id": f"call_{n:04d}",
                "type": "function",
                "function": {"name": answer.tool, "arguments": json.dumps(answer.arguments)},
            }
        ]
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
        finish, delta = "tool_calls", {"role": "assistant", "content": None, "tool_calls": calls}
    else:
        message = {"role": "assistant", "content": answer.text}
        finish, delta = "stop", {"role": "assistant", "content": answer.text}
    base = {"id": f"chatcmpl-{n:04d}", "created": 1700000000, "model": model}
    full = {
        **base,
        "object": "chat.completion",
        "usage": usage,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    chunk = {**base, "object": "chat.completion.chunk"}
    events: list[Event] = [
        ("", {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
        ("", {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}),
    ]
    return full, events


def _responses(answer: Answer, model: str, n: int) -> tuple[dict[str, Any], list[Event]]:
    if answer.tool:
        item: dict[str, Any] = {
            "id": f"fc_{n:04d}",
            "type": "function_call",
            "status": "completed",
            "call_id": f"call_{n:04d}",
            "name": answer.tool,
            "arguments": json.dumps(answer.arguments),
        }
        namespace, sep, name = answer.tool.rpartition(NAMESPACE_SEP)
        if sep:  # a function of a namespace tool
            item.update(namespace=namespace, name=name)
        pending = {**item, "status": "in_progress", "arguments": ""}
        middle: list[Event] = [
            (
                "response.function_call_arguments.done",
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item["id"],
                    "output_index": 0,
                    "arguments": item["arguments"],
                },
            )
        ]
    else:
        part = {"type": "output_text", "text": answer.text, "annotations": []}
        item = {
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        pending = {**item, "status": "in_progress", "content": []}
        where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        middle = [
            (
                "response.content_part.added",
                {"type": "response.content_part.added", **where, "part": {**part, "text": ""}},
            ),
            (
                "response.output_text.delta",
                {"type": "response.output_text.delta", **where, "delta": answer.text},
            ),
            (
                "response.output_text.done",
                {"type": "response.output_text.done", **where, "text": answer.text},
            ),
            ("response.content_part.done", {"type": "response.content_part.done", **where, "part": part}),
        ]
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    response = {
        "id": f"resp_{n:04d}",
        "object": "response",
        "created_at": 1700000000,
        "model": model,
        "status": "completed",
        "output": [item],
        "usage": usage,
    }
    events: list[Event] = [
        (
            "response.created",
            {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
        ),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": pending},
        ),
        *middle,
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]
    for number, (_, data) in enumerate(events):
        data["sequence_number"] = number
    return response, events


WRITERS = {"anthropic": _anthropic, "chat": _chat, "responses": _responses}
MODEL_PATHS = ("/messages", "/chat/completions", "/responses")


def _handler(api: FakeModelAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if not path.endswith("/models"):
                api.unknown.append(("GET", self.path))
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            data = [
                {
                    "id": m,
                    "object": "model",
                    "type": "model",
                    "display_name": m,
                    "created": 0,
                    "created_at": "2025-01-01T00:00:00Z",
                    "owned_by": "fake",
                }
                for m in api.models
            ]
            self._send(
                200,
                json.dumps(
                    {
                        "object": "list",
                        "data": data,
                        "has_more": False,
                        "first_id": api.models[0],
                        "last_id": api.models[-1],
                    }
                ).encode(),
            )

        def do_POST(self) -> None:
            path = self.path.split("?")[0]
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if path.endswith("/count_tokens"):
                self._send(200, b'{"input_tokens": 10}')
                return
            if not path.endswith(MODEL_PATHS):
                api.unknown.append(("POST", self.path))
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, b'{"error": {"message": "body is not JSON"}}')
                return
            call = read_call(path, body)
            answer = api.answer(call)
            full, events = WRITERS[call.protocol](answer, call.model or api.models[0], api.next_id())
            if call.stream:
                self._stream(events, sentinel=call.protocol == "chat")
            else:
                self._send(200, json.dumps(full).encode())

        def _stream(self, events: list[Event], sentinel: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for name, data in events:
                    head = f"event: {name}\n" if name else ""
                    self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
                if sentinel:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


@contextlib.contextmanager
def running_model_api() -> Iterator[FakeModelAPI]:
    api = FakeModelAPI()
    with serving(_handler(api), "fake-model-api") as url:
        api.url = url
        yield api


@pytest.fixture
def model_api() -> Iterator[FakeModelAPI]:
    """A fresh fake model API on 127.0.0.1; ``model_api.url`` is its root (add ``/v1`` as needed)."""
    with running_model_api() as api:
        yield api
