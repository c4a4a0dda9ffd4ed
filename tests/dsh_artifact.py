"""DeepSeek Harness session artifacts for tests, in the shapes DSH 0.1.0-rc.8 writes (seen in the
artifacts of tests/test_host_dsh.py's runs): a header line, then one event a line; compressed as DSH
does, one zstd frame per written batch (the header alone in the first frame).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

Event = dict[str, Any]


def header(session: str, cwd: str) -> Event:
    return {"type": "session", "version": 0, "id": session, "createdAt": 1796191431077, "cwd": cwd}


class Log:
    """Events of one session with DSH's running ``seq`` numbers."""

    def __init__(self) -> None:
        self.seq: Iterator[int] = itertools.count()
        self.events: list[Event] = []

    def add(self, kind: str, data: dict[str, Any]) -> Event:
        event = {"type": kind, "seq": next(self.seq), "time": 1796191432000, "data": data}
        self.events.append(event)
        return event

    def user(self, text: str, kind: str = "user", message_id: str = "") -> None:
        source: dict[str, Any] = {"kind": kind}
        if kind == "plugin":
            source.update(plugin="@deepseek-ai/dsh-system-prompt", form="snapshot", sections=[])
        content = [{"type": "text", "text": text}]
        self.add("user/message", {"content": content, "source": source, "role": "user", "id": message_id})

    def turn(
        self,
        number: int,
        question: str,
        answer: str,
        tools: Iterable[tuple[str, dict[str, Any], str]] = (),
        ended: bool = True,
    ) -> None:
        """One turn: the person's question (after DSH's runtime-context message), a step per tool
        call ``(name, arguments, output)`` with its result, then the answer; ``turn/end`` if ended."""
        self.add("turn/start", {"turn": number})
        self.add("step/start", {"turn": number, "step": 1})
        self.user(question, message_id=f"user-{number}")
        self.user("Current runtime context. This snapshot supersedes earlier ones.", kind="plugin")
        step = 1
        for index, (name, arguments, output) in enumerate(tools):
            call = f"call_{number}_{index}"
            block = {"type": "tool-call", "id": call, "name": name, "arguments": json.dumps(arguments)}
            self._assistant(number, step, [block], f"tool-step-{number}-{index}")
            self.add("assistant/chunk", {"turn": number, "step": step, "chunk": {"type": "usage"}})
            self.add("tool/call", {"turn": number, "step": step, "callId": call, "name": name})
            text = [{"type": "text", "text": output}]
            result = {"type": "tool-result", "toolCallId": call, "content": text}
            message = {"source": {"kind": "tool", "callId": call}, "content": [result], "role": "user"}
            self.add("tool/result", {"turn": number, "step": step, "message": message})
            step += 1
        self._assistant(number, step, [{"type": "text", "text": answer}], f"answer-{number}")
        if ended:
            self.add("turn/end", {"turn": number, "reason": {"kind": "completed"}})

    def _assistant(self, number: int, step: int, content: list[dict[str, Any]], message_id: str) -> None:
        message = {"role": "assistant", "content": content, "source": {"kind": "model"}, "id": message_id}
        self.add("assistant/message", {"turn": number, "step": step, "message": message})


def lines(events: Iterable[Event]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode("utf-8")


def write(path: Path, first: Event, batches: Iterable[list[Event]], compress: bool = True) -> Path:
    """The artifact at ``path``: the header, then each batch (its own zstd frame when compressed)."""
    from backports import zstd  # memsearch's own dependency on Python < 3.14

    path.parent.mkdir(parents=True, exist_ok=True)
    chunks = [lines([first]), *(lines(batch) for batch in batches)]
    path.write_bytes(b"".join(zstd.compress(c) for c in chunks) if compress else b"".join(chunks))
    return path
