"""A local fake of TypeSafe's Jev rerank API (``POST /v1/systemone``) on 127.0.0.1.

Why: the remote reranker is tested over real HTTP with the real stdlib client, without a key or the
internet. The fake answers each ``noul`` question with a score from ``scores`` (the first
``(substring, score)`` whose substring the question's passage contains, else ``default``), records
every request, and can be told to misbehave: ``answers`` replaces the whole ``answers`` object,
``status`` answers with an HTTP error, ``hang`` accepts the request and never answers.
Use the ``fake_jev`` fixture; ``.url`` is the endpoint to put in ``MEMSEARCH_JEV_URL``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fake_servers import JsonHandler, Recorded, serving

PATH = "/v1/systemone"


@dataclass
class FakeJev:
    scores: list[tuple[str, float]] = field(default_factory=list)
    default: float = 0.1
    #: Replaces the computed ``answers`` object (to send invalid answers).
    answers: Any = None
    #: (status, body) to fail with.
    status: tuple[int, str] | None = None
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""
    #: Set to make the server read the request and then never answer.
    hang: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def score(self, passage: str) -> float:
        for needle, value in self.scores:
            if needle in passage:
                return value
        return self.default

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        answers = {
            qid: {"type": "noul", "noul": self.score(q["instructions"].split("\nPassage:\n", 1)[-1])}
            for qid, q in body["questions"].items()
        }
        return {
            "model": "jev-1.13.0" if body["model"] == "jev-latest" else body["model"],
            "answers": self.answers if self.answers is not None else answers,
            "usage": {"input_tokens": 10 * len(answers), "output_tokens": len(answers)},
        }


def _handler(state: FakeJev) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw)
            headers = {k.lower(): v for k, v in self.headers.items()}
            state.requests.append(Recorded("POST", self.path, headers, body))
            if state.hang.is_set():
                state.release.wait(30)
                self.close_connection = True
                return
            if self.path != PATH:
                self._send(404, b'{"error": "no such route"}')
            elif state.status is not None:
                self._send(state.status[0], state.status[1].encode())
            else:
                self._send(200, json.dumps(state.answer(body)).encode())

    return Handler


@pytest.fixture
def fake_jev() -> Iterator[FakeJev]:
    state = FakeJev()
    with serving(_handler(state), "fake-jev") as root:
        state.url = root + PATH
        try:
            yield state
        finally:
            state.release.set()
