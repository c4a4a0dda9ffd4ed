"""The OpenCode capture daemon and hook row, driven as real processes: an OpenCode SQLite database
built in the test (OpenCode's schema), ``python -m memsearch.agent.hooks.opencode_daemon
--once`` run in the project folder, and a fake ``opencode`` CLI first on PATH that logs its argv.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks"))
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks" / "opencode"))

import hookkit
from hookkit import HookEnv, Store, hook_json
from opencode_db import OpenCodeDB

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).parent / "fixtures" / "hooks" / "opencode"
SID = "ses_01JTESTSESSION"
HOSTILE = "Run $(touch {marker}) and `touch {marker}` then say \"done\" 'ok' $HOME\nsecond line"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with hookkit.serving_store(tmp_path_factory.mktemp("opencodestore")) as served:
        yield served


@pytest.fixture
def hk(tmp_path: Path, store: Store) -> Iterator[HookEnv]:
    quiet = {"MEMSEARCH_OPENCODE_TAIL_QUIET_MS": "0"}
    fake = ("opencode", FIXTURES / "fake_opencode.py")
    with hookkit.hook_env(tmp_path / "t", store, fake_cli=fake, extra_env=quiet) as world:
        yield world


@pytest.fixture
def db(hk: HookEnv) -> OpenCodeDB:
    """Two finished turns of one session in the project, and one session of another project."""
    data = OpenCodeDB(hk.root / "opencode.db")
    data.session(SID, hk.project)
    data.message(SID, "msg_u1", "user", "Rename the invoice CLI flag --out to --output")
    data.message(SID, "msg_a1", "assistant", "Renamed it in cli.py.", parentID="msg_u1", finish="stop")
    data.message(SID, "msg_u2", "user", "Add a retry with backoff to the webhook sender")
    data.message(SID, "msg_a2", "assistant", "", parentID="msg_u2", finish="tool-calls")
    data.message(
        SID, "msg_a3", "assistant", "Retries five times with backoff now.", parentID="msg_a2", finish="stop"
    )
    data.session("ses_other", hk.root / "billing-old")
    data.message("ses_other", "msg_x1", "user", "Something from a project with a similar name")
    data.message("ses_other", "msg_x2", "assistant", "Done.", finish="stop")
    return data


def daemon_once(hk: HookEnv, db: OpenCodeDB, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memsearch.agent.hooks.opencode_daemon", "--once", "--db", str(db.path)],
        capture_output=True,
        text=True,
        cwd=hk.project,
        env=hk.env(**extra),
        timeout=120,
    )


def test_opencode_end_to_end(hk: HookEnv, db: OpenCodeDB) -> None:
    proc = daemon_once(hk, db)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"
    today = dt.date.today().isoformat()
    journal = (hk.memory_dir / f"{today}.md").read_text(encoding="utf-8")
    assert journal.startswith(f"# {today}\n\n## Session ")
    anchor = f"<!-- session:{SID} turn:msg_u2 db:{db.path} -->"
    assert f"<!-- session:{SID} turn:msg_u1 db:{db.path} -->" in journal and anchor in journal
    assert "- User asked: Add a retry with backoff to the webhook sender" in journal
    assert "Here are the notes" not in journal and "similar name" not in journal
    calls = hk.agent_calls()
    assert [c["argv"][0] for c in calls] == ["run", "run"]
    assert all(c["env"]["MEMSEARCH_DISABLE"] == "1" for c in calls)
    assert (hk.memsearch_dir / "opencode-turns.db").is_file()
    # The next pass finds nothing new: the checkpoint moved past both turns.
    again = daemon_once(hk, db)
    assert again.stdout.strip() == "0" and len(hk.agent_calls()) == 2

    collection = hk.collection("opencode")
    found = hk.memsearch(
        "search", "retry backoff webhook sender", "-j", "-k", "3", "--collection", collection
    )
    assert found.returncode == 0, found.stderr
    (hit,) = [h for h in json.loads(found.stdout) if "webhook sender" in h["content"]]
    expanded = hk.memsearch("expand", hit["chunk_hash"], "--collection", collection)
    assert expanded.returncode == 0, expanded.stderr
    assert anchor in expanded.stdout
    shown = hk.memsearch("transcript", str(db.path), "--session", SID, "--turn", "msg_u2", "-j")
    assert shown.returncode == 0, shown.stderr
    assert any(t["uuid"] == "msg_u2" and "webhook sender" in t["text"] for t in json.loads(shown.stdout))


def test_unfinished_tail_turn_waits(hk: HookEnv, tmp_path: Path) -> None:
    data = OpenCodeDB(tmp_path / "oc.db")
    data.session(SID, hk.project)
    data.message(SID, "msg_u1", "user", "Profile the report generator")
    data.message(SID, "msg_a1", "assistant", "Looking at it.", finish="tool-calls")
    assert daemon_once(hk, data).stdout.strip() == "0"
    data.finish("msg_a1", "stop")
    assert daemon_once(hk, data).stdout.strip() == "1"
    # A finished answer still changing within the quiet window is not captured yet.
    data.clock = int(time.time() * 1000) - 10_000
    data.message(SID, "msg_u2", "user", "Now cache the totals please")
    data.message(SID, "msg_a2", "assistant", "Cached.", finish="stop")
    assert daemon_once(hk, data, MEMSEARCH_OPENCODE_TAIL_QUIET_MS=str(3_600_000)).stdout.strip() == "0"


def test_memsearch_dir_is_honoured(hk: HookEnv, db: OpenCodeDB, tmp_path: Path) -> None:
    shared = tmp_path / "shared-memory"
    proc = daemon_once(hk, db, MEMSEARCH_DIR=str(shared), MEMSEARCH_NO_WATCH="1")
    assert proc.stdout.strip() == "2", proc.stderr
    assert list((shared / "memory").glob("*.md")) and (shared / "opencode-turns.db").is_file()
    assert not hk.memsearch_dir.exists()


def test_session_start_gives_the_system_text(hk: HookEnv) -> None:
    shutil.copytree(hookkit.MEMORY, hk.memory_dir)
    reply = hook_json(hk.hook("opencode", "session-start", "{}", MEMSEARCH_NO_WATCH="1"))
    assert "\n- " in reply["system"] and "memory_search" in reply["system"]


@pytest.mark.parametrize("summariser", ["opencode", "extract"])
def test_shell_metacharacters_in_a_message_are_stored_as_text(
    hk: HookEnv, tmp_path: Path, summariser: str
) -> None:
    marker = tmp_path / f"pwned-{summariser}"
    message = HOSTILE.format(marker=marker)
    data = OpenCodeDB(tmp_path / "evil.db")
    data.session(SID, hk.project)
    data.message(SID, "msg_e1", "user", message)
    data.message(SID, "msg_e2", "assistant", "I will not run that.", finish="stop")
    extra = {"PATH": hookkit.SYSTEM_PATH} if summariser == "extract" else {}
    proc = daemon_once(hk, data, **extra)
    assert proc.stdout.strip() == "1", proc.stderr
    assert not marker.exists()
    assert (
        f"- User asked: Run $(touch {marker}) and `touch {marker}` then say \"done\" 'ok' $HOME"
        in hk.journal()
    )
    if summariser == "opencode":
        (call,) = hk.agent_calls()
        assert f"[User]: {message}" in call["argv"][-1]
    assert not marker.exists()


def test_daemon_polls_until_terminated(hk: HookEnv, db: OpenCodeDB) -> None:
    log = hk.root / "daemon.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memsearch.agent.hooks.opencode_daemon",
                "--db",
                str(db.path),
                "--poll-interval",
                "0.2",
            ],
            cwd=hk.project,
            env=hk.env(MEMSEARCH_NO_WATCH="1"),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        pid_file = hk.memsearch_dir / ".capture.pid"
        hookkit.wait_for(lambda: hk.journal().count("<!-- session:") == 2, timeout=60)
        assert pid_file.read_text().strip() == str(proc.pid)
        db.message(SID, "msg_u3", "user", "Document the retry policy in the README")
        db.message(SID, "msg_a4", "assistant", "Added a Retries section.", finish="stop")
        hookkit.wait_for(lambda: "turn:msg_u3" in hk.journal(), timeout=60)
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0, log.read_text()
    assert not pid_file.exists()


def test_a_second_daemon_waits_for_the_first_and_takes_over(hk: HookEnv, db: OpenCodeDB) -> None:
    """Two OpenCode windows of one project: one daemon polls; the other waits, and polls once the
    first is gone (the first gives up ``.capture.pid`` before its last pass)."""
    argv = [
        sys.executable,
        "-m",
        "memsearch.agent.hooks.opencode_daemon",
        "--db",
        str(db.path),
        "--poll-interval",
        "5",
    ]
    first = subprocess.Popen(argv, cwd=hk.project, env=hk.env(MEMSEARCH_NO_WATCH="1"))
    second = None
    try:
        pid_file = hk.memsearch_dir / ".capture.pid"
        hookkit.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() == str(first.pid))
        second = subprocess.Popen(argv, cwd=hk.project, env=hk.env(MEMSEARCH_NO_WATCH="1"))
        time.sleep(1.0)  # long enough for a second daemon that did not wait to have written its pid
        assert pid_file.read_text().strip() == str(first.pid) and second.poll() is None
        first.terminate()
        assert first.wait(timeout=30) == 0
        hookkit.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() == str(second.pid))
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def test_the_daemon_journals_the_tail_turn_when_opencode_exits(hk: HookEnv, db: OpenCodeDB) -> None:
    """A one-shot ``opencode run`` exits right after its answer: the daemon it started makes one
    last pass without the quiet window (the tail turn is finished for good), then exits. Quitting
    the TUI right after an answer can leave it without ``finish``: still journaled; a question
    without any answer yet is not."""
    db.session("ses_quit", hk.project)
    db.message("ses_quit", "msg_q1", "user", "Quit right after this answer")
    db.message("ses_quit", "msg_q2", "assistant", "Answered, then the TUI quit.", parentID="msg_q1")
    db.session("ses_open", hk.project)
    db.message("ses_open", "msg_o1", "user", "A question OpenCode never answered")
    daemon = [
        sys.executable,
        "-m",
        "memsearch.agent.hooks.opencode_daemon",
        "--db",
        str(db.path),
        "--poll-interval",
        "60",
    ]
    # The shell plays OpenCode: it starts the daemon, waits until the daemon has taken the project
    # (its pid file), then exits while the tail turn is still inside the quiet window.
    pid_file = hk.memsearch_dir / ".capture.pid"
    script = (
        'exec 3>&1; "$@" >/dev/null 2>&1 3>&- & echo $! >&3; while [ ! -s "$PIDFILE" ]; do sleep 0.05; done'
    )
    opencode = subprocess.run(
        ["sh", "-c", script, "sh", *daemon],
        cwd=hk.project,
        env={
            **hk.env(MEMSEARCH_NO_WATCH="1", MEMSEARCH_OPENCODE_TAIL_QUIET_MS=str(3_600_000)),
            "PIDFILE": str(pid_file),
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    pid = int(opencode.stdout.strip())
    hookkit.wait_for(lambda: "turn:msg_u2" in hk.journal(), timeout=60)
    hookkit.wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=30)
    assert "turn:msg_u1" in hk.journal() and "turn:msg_q1" in hk.journal()
    assert "turn:msg_o1" not in hk.journal()
    assert not pid_file.exists()
