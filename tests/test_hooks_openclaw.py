"""The OpenClaw row of the hook engine, driven as the plugin module drives it: real
``python -m memsearch hook openclaw <event>`` processes with OpenClaw's event JSON on stdin, a session
JSONL where OpenClaw keeps it, and a fake ``openclaw`` CLI first on PATH that logs its argv.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
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


def agent_end(hk: HookEnv, session: str = SESSION) -> str:
    return json.dumps({"sessionId": session, "agentId": "main", "workspaceDir": str(hk.project)})


def test_openclaw_end_to_end(hk: HookEnv) -> None:
    transcript = session_path(hk)
    proc = hk.hook("openclaw", "stop", agent_end(hk), TZ=FAR_ZONE)
    assert hook_json(proc) == {}, proc.stderr
    (call,) = hk.agent_calls()
    assert call["argv"][:5] == ["agent", "--local", "--session-id", "memsearch-summarize", "-m"]
    assert "[User]: Add a retry with backoff to the webhook sender" in call["argv"][5]
    assert call["env"]["MEMSEARCH_DISABLE"] == "1"
    today = dt.datetime.now(ZoneInfo(FAR_ZONE)).date().isoformat()
    journal = (hk.memory_dir / f"{today}.md").read_text(encoding="utf-8")
    assert journal.startswith(f"# {today}\n\n## Session ")
    anchor = f"<!-- session:{SESSION} transcript:{transcript} turn:{TURN} -->"
    assert anchor in journal
    assert "- User asked: Add a retry with backoff to the webhook sender" in journal
    assert "[plugins]" not in journal
    # A repeated agent_end for the same turn writes nothing more and asks no summariser.
    hook_json(hk.hook("openclaw", "stop", agent_end(hk), TZ=FAR_ZONE))
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


def test_before_agent_start_prepends_recent_memory(hk: HookEnv) -> None:
    empty = hook_json(hk.hook("openclaw", "session-start", agent_end(hk), MEMSEARCH_NO_WATCH="1"))
    assert "prependContext" not in empty and empty["systemMessage"].startswith("[memsearch v")
    shutil.copytree(hookkit.MEMORY, hk.memory_dir, dirs_exist_ok=True)
    reply = hook_json(hk.hook("openclaw", "session-start", agent_end(hk), MEMSEARCH_NO_WATCH="1"))
    context = reply["prependContext"]
    assert "\n- " in context and "\\n" not in context
    assert "memory_search" in context


def test_missing_session_file_records_nothing(hk: HookEnv) -> None:
    proc = hk.hook("openclaw", "stop", agent_end(hk, "no-such-session"))
    assert hook_json(proc) == {}
    assert "no OpenClaw session file" in proc.stderr
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
    proc = hk.hook("openclaw", "stop", agent_end(hk, "evil-session"), **extra)
    assert hook_json(proc) == {}, proc.stderr
    assert not marker.exists()
    first_line = f"- User asked: Run $(touch {marker}) and `touch {marker}` then say \"done\" 'ok' $HOME"
    assert first_line in hk.journal()
    if summariser == "openclaw":
        (call,) = hk.agent_calls()
        assert f"[User]: {message}" in call["argv"][-1]  # one argv element, the newline a newline
    else:
        assert not hk.agent_calls()
    assert not marker.exists()
    assert os.path.exists(hk.memory_dir)
