"""A local fake LLM API: one threaded HTTP server on 127.0.0.1 speaking the three chat shapes.

Why: the LLM backends are tested over real HTTP (the real ``openai`` SDK, the real stdlib client for
Anthropic and Gemini) without an API key or the internet. The server answers

- ``POST /v1/chat/completions``                    OpenAI and OpenAI-compatible servers
- ``POST /v1/messages``                            Anthropic Messages API
- ``POST /v1beta/models/<model>:generateContent``  Gemini

with canned text: the next of ``replies`` if any is queued, else ``default_reply``. It records every
request (path, lower-cased headers, JSON body) and can be told to fail with ``fail(status, body,
times)``. ``anthropic_content`` / ``gemini_answer`` replace the whole answer payload for tests of odd
shapes. Use the ``fake_llm`` fixture; ``.url`` is the server root.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from fake_servers import JsonHandler, serving

__all__ = ["FakeLLMServer", "LLMRequest", "fake_llm"]


@dataclass
class LLMRequest:
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def prompt(self) -> str:
        """The user message text, whichever API shape carried it."""
        if "contents" in self.body:
            return "".join(p["text"] for p in self.body["contents"][0]["parts"])
        content = self.body["messages"][0]["content"]
        return content if isinstance(content, str) else "".join(b["text"] for b in content)


@dataclass
class FakeLLMServer:
    """The server's state; tests queue replies, read ``requests`` and steer failures."""

    default_reply: str = "- User asked for a summary.\n- The agent wrote one."
    replies: list[str] = field(default_factory=list)
    requests: list[LLMRequest] = field(default_factory=list)
    #: If set, the Anthropic answer's ``content`` list (to test thinking-only answers and the like).
    anthropic_content: list[dict[str, Any]] | None = None
    #: If set, the whole Gemini answer payload.
    gemini_answer: dict[str, Any] | None = None
    url: str = ""
    _failure: tuple[int, bytes, int] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, *texts: str) -> None:
        """Queue the texts of the next answers (then ``default_reply`` again)."""
        with self._lock:
            self.replies.extend(texts)

    def fail(self, status: int, body: str = '{"error": {"message": "nope"}}', times: int = -1) -> None:
        """Answer ``times`` requests (-1: all) with HTTP ``status``."""
        with self._lock:
            self._failure = (status, body.encode(), times)

    @property
    def prompts(self) -> list[str]:
        return [r.prompt for r in self.requests]

    def _next_failure(self) -> tuple[int, bytes] | None:
        with self._lock:
            if self._failure is None:
                return None
            status, body, times = self._failure
            if times > 0:
                self._failure = (status, body, times - 1) if times > 1 else None
            return status, body

    def _next_text(self) -> str:
        with self._lock:
            return self.replies.pop(0) if self.replies else self.default_reply

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/chat/completions"):
            return {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": self._next_text()},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        if path.endswith("/messages"):
            content = self.anthropic_content
            if content is None:
                content = [{"type": "text", "text": self._next_text()}]
            return {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        if path.endswith(":generateContent"):
            if self.gemini_answer is not None:
                return self.gemini_answer
            return {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": self._next_text()}]},
                        "finishReason": "STOP",
                    }
                ]
            }
        raise KeyError(path)


def _handler(state: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            state.requests.append(LLMRequest(self.path, headers, body))
            failure = state._next_failure()
            if failure is not None:
                self._send(*failure)
                return
            try:
                answer = state.answer(self.path.split("?", 1)[0], body)
            except KeyError as exc:
                self._send(404, json.dumps({"error": f"no route {exc}"}).encode())
                return
            self._send(200, json.dumps(answer).encode())

    return Handler


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A running fake LLM server on 127.0.0.1 (random free port); ``.url`` is its root."""
    state = FakeLLMServer()
    with serving(_handler(state), "fake-llm-api") as url:
        state.url = url
        yield state
