"""The OpenClaw row of the hook engine, driven as the plugin module drives it: real
``python -m memsearch hook openclaw <event>`` processes with OpenClaw's event JSON on stdin (with
``agent_end``'s ``messages``, as OpenClaw 2026.9.6 sends them), the transcript where OpenClaw keeps it
(the agent database since 2026.9, a session JSONL before), and a fake ``openclaw`` CLI first on PATH
that logs its argv and stdin. ``MEMSEARCH_HOOK_SYNC=1`` keeps the capture in the hook's process (the
real host runs it in a detached worker; tests/test_host_openclaw.py covers that path).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks"))

import hookkit
from hookkit import HookEnv, Store, hook_json

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).parent / "fixtures" / "hooks" / "openclaw"
SESSION = "oc-session-1"
TURN = "oc-u-2"
#: A zone far from UTC: the day file must follow the local date (the original used the UTC one).
FAR_ZONE = "Etc/GMT-14"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with hookkit.serving_store(tmp_path_factory.mktemp("openclawstore")) as served:
        yield served


@pytest.fixture
def hk(tmp_path: Path, store: Store) -> Iterator[HookEnv]:
    fake = ("openclaw", FIXTURES / "fake_openclaw.py")
    with hookkit.hook_env(tmp_path / "t", store, fake_cli=fake) as world:
        yield world


def session_path(hk: HookEnv, session: str = SESSION, source: Path = FIXTURES / "session.jsonl") -> Path:
    """The session file where OpenClaw keeps it for the ``main`` agent."""
    target = hk.home / ".openclaw" / "agents" / "main" / "sessions" / f"{session}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def agent_end(hk: HookEnv, session: str = SESSION, messages: list | None = None) -> str:
    event = {"sessionId": session, "agentId": "main", "workspaceDir": str(hk.project)}
    if messages is not None:
        event["messages"] = messages
    return json.dumps(event)


def stop(hk: HookEnv, stdin: str, **env: str):
    return hk.hook("openclaw", "stop", stdin, MEMSEARCH_HOOK_SYNC="1", **env)


def agent_db(hk: HookEnv, session: str, entries: list[dict]) -> Path:
    """An OpenClaw 2026.9 agent database holding ``entries`` (session-JSONL entries) for ``session``."""
    db = hk.home / ".openclaw" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as con:
        con.execute(
            "CREATE TABLE IF NOT EXISTS transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "event_json TEXT, created_at INTEGER NOT NULL, event_zstd BLOB, event_utf8_bytes INTEGER, "
            "navigation_json TEXT, PRIMARY KEY (session_id, seq))"
        )
        con.executemany(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES (?, ?, ?, ?)",
            [(session, n, json.dumps(e), 1_700_000_000_000 + n) for n, e in enumerate(entries)],
        )
    con.close()
    return db


def test_openclaw_end_to_end(hk: HookEnv) -> None:
    transcript = session_path(hk)
    proc = stop(hk, agent_end(hk), TZ=FAR_ZONE)
    assert hook_json(proc) == {}, proc.stderr
    (call,) = hk.agent_calls()
    assert call["argv"] == ["agent", "exec", "--message-file", "-"]
    assert "[User]: Add a retry with backoff to the webhook sender" in call["stdin"]
    assert call["env"]["MEMSEARCH_DISABLE"] == "1"
    today = dt.datetime.now(ZoneInfo(FAR_ZONE)).date().isoformat()
    journal = (hk.memory_dir / f"{today}.md").read_text(encoding="utf-8")
    assert journal.startswith(f"# {today}\n\n## Session ")
    anchor = f"<!-- session:{SESSION} transcript:{transcript} turn:{TURN} -->"
    assert anchor in journal
    assert "- User asked: Add a retry with backoff to the webhook sender" in journal
    assert "[plugins]" not in journal
    # A repeated agent_end for the same turn writes nothing more and asks no summariser.
    hook_json(stop(hk, agent_end(hk), TZ=FAR_ZONE))
    assert hk.journal().count(anchor) == 1 and len(hk.agent_calls()) == 1

    collection = hk.collection("openclaw")
    found = hk.memsearch(
        "search", "retry backoff webhook sender", "-j", "-k", "3", "--collection", collection
    )
    assert found.returncode == 0, found.stderr
    (hit,) = [h for h in json.loads(found.stdout) if "webhook sender" in h["content"]]
    expanded = hk.memsearch("expand", hit["chunk_hash"], "--collection", collection)
    assert expanded.returncode == 0, expanded.stderr
    assert anchor in expanded.stdout
    shown = hk.memsearch("transcript", str(transcript), "--turn", TURN, "--context", "1", "-j")
    assert shown.returncode == 0, shown.stderr
    turns = json.loads(shown.stdout)
    assert any(
        t["uuid"] == TURN and t["text"] == "Add a retry with backoff to the webhook sender" for t in turns
    )


def test_agent_end_messages_are_captured_and_anchored_in_the_agent_database(hk: HookEnv) -> None:
    """OpenClaw 2026.9.6: no session JSONL; the turn comes from agent_end's messages (bare message
    objects without ids) and the anchor names the agent database and the stored entry's id."""
    question, answer = "Which port does the webhook listener use?", "It listens on 8443."
    messages = [
        {"role": "user", "content": "an earlier question", "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "an earlier answer"}], "timestamp": 2},
        {"role": "user", "content": [{"type": "text", "text": question}], "timestamp": 3},
        {"role": "assistant", "content": [{"type": "text", "text": answer}], "timestamp": 4},
    ]
    stored = [{"type": "session", "version": 4, "id": "db-session"}] + [
        {"type": "message", "id": f"entry-{n}", "message": m} for n, m in enumerate(messages)
    ]
    db = agent_db(hk, "db-session", stored)
    agent_db(hk, "other-session", stored[:2])  # the database holds every session of the agent
    proc = stop(hk, agent_end(hk, "db-session", messages))
    assert hook_json(proc) == {}, proc.stderr
    (call,) = hk.agent_calls()
    assert f"[User]: {question}" in call["stdin"] and answer in call["stdin"]
    assert "an earlier question" not in call["stdin"]
    anchor = f"<!-- session:db-session transcript:{db} turn:entry-2 -->"
    assert anchor in hk.journal()
    shown = hk.memsearch("transcript", str(db), "--session", "db-session", "--turn", "entry-2", "-j")
    assert shown.returncode == 0, shown.stderr
    texts = [t["text"] for t in json.loads(shown.stdout)]
    assert question in texts and answer in texts


def test_agent_end_messages_without_a_stored_transcript(hk: HookEnv) -> None:
    messages = [
        {"role": "user", "content": "Rename the retry helper"},
        {"role": "assistant", "content": [{"type": "text", "text": "Renamed it to backoff_retry."}]},
    ]
    proc = stop(hk, agent_end(hk, "nowhere", messages), PATH=hookkit.SYSTEM_PATH)
    assert hook_json(proc) == {}, proc.stderr
    journal = hk.journal()
    assert "<!-- session:nowhere -->" in journal
    assert "- User asked: Rename the retry helper" in journal


def test_before_prompt_build_prepends_recent_memory(hk: HookEnv) -> None:
    empty = hook_json(hk.hook("openclaw", "session-start", agent_end(hk), MEMSEARCH_NO_WATCH="1"))
    assert "prependContext" not in empty and empty["systemMessage"].startswith("[memsearch v")
    shutil.copytree(hookkit.MEMORY, hk.memory_dir, dirs_exist_ok=True)
    reply = hook_json(hk.hook("openclaw", "session-start", agent_end(hk), MEMSEARCH_NO_WATCH="1"))
    context = reply["prependContext"]
    assert "\n- " in context and "\\n" not in context
    assert "memory_search" in context


def test_no_messages_and_no_transcript_records_nothing(hk: HookEnv) -> None:
    proc = stop(hk, agent_end(hk, "no-such-session"))
    assert hook_json(proc) == {}
    assert "no OpenClaw transcript was found" in proc.stderr
    assert not hk.memory_dir.exists() or not list(hk.memory_dir.glob("*.md"))


HOSTILE = (
    "Run $(touch {marker}) and `touch {marker}` then say \"done\" 'ok' $HOME\nsecond line; rm -rf nothing"
)


@pytest.mark.parametrize("summariser", ["openclaw", "extract"])
def test_shell_metacharacters_in_a_message_are_stored_as_text(
    hk: HookEnv, tmp_path: Path, summariser: str
) -> None:
    marker = tmp_path / f"pwned-{summariser}"
    message = HOSTILE.format(marker=marker)
    lines = [
        {"type": "message", "id": "evil-1", "message": {"role": "user", "content": message}},
        {
            "type": "message",
            "id": "evil-2",
            "message": {"role": "assistant", "content": "I will not run that."},
        },
    ]
    source = hk.root / "evil.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    session_path(hk, "evil-session", source)
    extra = {"PATH": hookkit.SYSTEM_PATH} if summariser == "extract" else {}
    proc = stop(hk, agent_end(hk, "evil-session"), **extra)
    assert hook_json(proc) == {}, proc.stderr
    assert not marker.exists()
    first_line = f"- User asked: Run $(touch {marker}) and `touch {marker}` then say \"done\" 'ok' $HOME"
    assert first_line in hk.journal()
    if summariser == "openclaw":
        (call,) = hk.agent_calls()
        assert f"[User]: {message}" in call["stdin"]  # on stdin: no shell, no argv parsing
    else:
        assert not hk.agent_calls()
    assert not marker.exists()
    assert os.path.exists(hk.memory_dir)
