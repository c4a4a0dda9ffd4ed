"""The Codex app-server client against a stand-in ``codex`` on PATH (a fast test of the protocol
edges; whether the real Codex 0.171.0 trusts and runs the hooks is tests/test_host_codex.py's).

The stand-in speaks the app-server's stdio JSON-RPC: it answers ``initialize`` and ``hooks/list``,
and before answering ``hooks/list`` it asks the client a question of its own, as a server may; it
logs every line it reads.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from memsearch.agent.hooks.codex_app import CodexApp, asked
from memsearch.errors import CodexNoAnswerError

FAKE = """#!{python}
import json, os, sys
log = open(os.environ["FAKE_CODEX_LOG"], "a")
print("started", file=log, flush=True)
for line in sys.stdin:
    print(line.strip(), file=log, flush=True)
    message = json.loads(line)
    if message.get("method") == "initialize":
        print(json.dumps({{"id": message["id"], "result": {{}}}}), flush=True)
    elif message.get("method") == "hooks/list":
        print(json.dumps({{"id": 900, "method": "account/login", "params": {{}}}}), flush=True)
        answer = {{"data": [{{"hooks": [{{"key": "k", "eventName": "sessionStart", "command": "x",
                   "currentHash": "h", "trustStatus": "trusted"}}]}}]}}
        print(json.dumps({{"id": message["id"], "result": answer}}), flush=True)
"""


@pytest.fixture
def codex(tmp_path: Path) -> tuple[str, dict[str, str], Path]:
    script = tmp_path / "bin" / "codex"
    script.parent.mkdir()
    script.write_text(FAKE.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "codex.log"
    return str(script), {**os.environ, "FAKE_CODEX_LOG": str(log)}, log


def test_a_request_of_the_servers_own_is_answered_not_left_waiting(
    codex: tuple[str, dict[str, str], Path],
) -> None:
    path, env, log = codex
    with CodexApp(path, env, Path.cwd()) as app:
        (hook,) = app.hooks(Path.cwd())
    assert (hook.event, hook.trust, hook.runs) == ("SessionStart", "trusted", True)
    replies = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    (refusal,) = [r for r in replies if r.get("id") == 900]
    assert refusal["error"]["code"] == -32601 and "account/login" in refusal["error"]["message"]


def test_a_server_that_stops_answering_is_replaced_once(codex: tuple[str, dict[str, str], Path]) -> None:
    path, env, log = codex
    calls = []

    def work(app: CodexApp) -> int:
        calls.append(app)
        if len(calls) == 1:
            raise CodexNoAnswerError("codex app-server gave no answer to hooks/list within 30 s")
        return len(app.hooks(Path.cwd()))

    assert asked(path, env, Path.cwd(), work) == 1
    assert len(calls) == 2 and calls[0] is not calls[1]
    assert log.read_text().count("started") == 2  # a fresh app-server the second time

    def never(app: CodexApp) -> int:
        raise CodexNoAnswerError("no answer")

    with pytest.raises(CodexNoAnswerError):  # once more, not forever
        asked(path, env, Path.cwd(), never)
