"""The DeepSeek Harness row of the hook engine, driven as plugins/dsh/index.js drives it: real
``python -m memsearch hook dsh <event>`` processes with the plugin's JSON on stdin, a session artifact
where DSH keeps it (zstd frames, in DSH 0.1.0-rc.8's shapes: tests/dsh_artifact.py), and a fake
``dsh`` CLI first on PATH that logs its argv and the patch it was given. ``MEMSEARCH_HOOK_SYNC=1`` keeps
the capture in the hook's process (the real host has it in a detached worker; tests/test_host_dsh.py
covers that path). These never decide whether the plugin works in DSH: the host test does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import dsh_artifact

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks"))

import hookkit
from hookkit import HookEnv, Store, hook_json

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).parent / "fixtures" / "hooks" / "dsh"
SESSION = "session-9f1c"
QUESTION = "Move the invoice exporter to the fast queue"
ANSWER = "Moved it; the export tests pass."


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with hookkit.serving_store(tmp_path_factory.mktemp("dshstore")) as served:
        yield served


@pytest.fixture
def hk(tmp_path: Path, store: Store) -> Iterator[HookEnv]:
    with hookkit.hook_env(tmp_path / "t", store, fake_cli=("dsh", FIXTURES / "fake_dsh.py")) as world:
        yield world


def artifact(hk: HookEnv, ended: bool = True, question: str = QUESTION) -> tuple[Path, dsh_artifact.Log]:
    """The session file where DSH keeps it, with turn 1 (an earlier one) and turn 2."""
    log = dsh_artifact.Log()
    log.turn(1, "Which queue does the exporter use?", "The slow one.")
    log.turn(2, question, ANSWER, tools=[("bash", {"command": "pytest -q"}, "4 passed")], ended=ended)
    path = hk.home / ".dsh" / "sessions" / "--billing--" / SESSION / "session.jsonl.zstd"
    dsh_artifact.write(path, dsh_artifact.header(SESSION, str(hk.project)), [log.events])
    return path, log


def turn_end(hk: HookEnv, db: Path, turn: int = 2) -> str:
    return json.dumps({"session_id": SESSION, "cwd": str(hk.project), "turn": turn, "db": str(db)})


def test_turn_end_journals_the_turn_with_the_original_anchor(hk: HookEnv) -> None:
    db, _ = artifact(hk)
    proc = hk.hook("dsh", "stop", turn_end(hk, db), MEMSEARCH_HOOK_SYNC="1")
    assert hook_json(proc) == {}, proc.stderr
    (call,) = hk.agent_calls()
    *flags, task = call["argv"]
    assert flags[:2] == ["--profile", "headless"] and flags[2] == "--patch"
    assert f"[User]: {QUESTION}" in task and ANSWER in task and "pytest -q" in task
    assert "Which queue" not in task  # only this turn
    assert call["env"] == {
        "MEMSEARCH_DISABLE": "1",
        "MEMSEARCH_NO_WATCH": "1",
        "MEMSEARCH_DSH_SUMMARIZE": "1",
    }
    # The nested session's file stays in the summariser's private folder; its tools and title are off.
    rows = {row["id"]: row for row in call["patch"]}
    assert rows["session-persistence-jsonl"]["config"]["root"] == str(Path(call["cwd"]) / "sessions")
    assert (
        rows["tool-bash"] == {"id": "tool-bash", "disabled": True} and rows["session-title-llm"]["disabled"]
    )
    assert not Path(call["cwd"]).exists()
    journal = hk.journal()
    assert journal.startswith("# ") and "\n## Session " in journal
    anchor = f"<!-- session:{SESSION} turn:2 db:{db} -->"
    assert f"{anchor}\n- User asked: {QUESTION}\n- DeepSeek Harness changed" in journal
    # A repeated turn/end of the same turn writes nothing more and asks no summariser.
    hook_json(hk.hook("dsh", "stop", turn_end(hk, db), MEMSEARCH_HOOK_SYNC="1"))
    assert hk.journal().count(anchor) == 1 and len(hk.agent_calls()) == 1
    # L3 from the anchor: the transcript of that turn.
    shown = hk.memsearch("transcript", str(db), "--turn", "2", "--context", "3")
    assert shown.returncode == 0, shown.stderr
    assert f"### User (2) [selected]\n{QUESTION}" in shown.stdout and ANSWER in shown.stdout


def test_the_worker_waits_for_dsh_to_write_the_turns_end(hk: HookEnv) -> None:
    """DSH sends turn/end before its write-behind has put the turn on disk."""
    db, log = artifact(hk, ended=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "hook", "dsh", "stop"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=hk.project,
        env=hk.env(MEMSEARCH_HOOK_SYNC="1"),
    )
    proc.stdin.write(turn_end(hk, db))  # type: ignore[union-attr]
    proc.stdin.close()  # type: ignore[union-attr]
    time.sleep(1.5)
    assert proc.poll() is None and not hk.memory_dir.exists()  # still waiting for the end
    log.add("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    dsh_artifact.write(db, dsh_artifact.header(SESSION, str(hk.project)), [log.events])
    assert proc.wait(timeout=120) == 0
    with proc.stdout, proc.stderr:  # type: ignore[union-attr]
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    assert json.loads(out) == {}, err
    assert f"turn:2 db:{db} -->\n- User asked: {QUESTION}" in hk.journal()


def test_no_dsh_on_path_writes_a_plain_extract(hk: HookEnv) -> None:
    db, _ = artifact(hk, question='Run $(touch pwned) and `touch pwned` then "quote"')
    proc = hk.hook("dsh", "stop", turn_end(hk, db), MEMSEARCH_HOOK_SYNC="1", PATH=hookkit.SYSTEM_PATH)
    assert hook_json(proc) == {}
    assert "dsh is not on PATH" in proc.stderr
    assert '- User asked: Run $(touch pwned) and `touch pwned` then "quote"' in hk.journal()
    assert "- DeepSeek Harness: " + ANSWER in hk.journal()
    assert not (hk.project / "pwned").exists()


def test_dsh_cli_names_the_command_and_a_failing_dsh_falls_back(hk: HookEnv) -> None:
    db, _ = artifact(hk)
    cli = f"{sys.executable} {hk.bin / 'dsh'}"
    proc = hk.hook(
        "dsh",
        "stop",
        turn_end(hk, db),
        MEMSEARCH_HOOK_SYNC="1",
        PATH=hookkit.SYSTEM_PATH,
        DSH_CLI=cli,
        FAKE_AGENT_MODE="fail",
    )
    assert hook_json(proc) == {}
    assert len(hk.agent_calls()) == 1  # DSH_CLI was run although no dsh is on PATH
    assert (
        f"dsh summariser failed: {Path(sys.executable).name} exited with status 1: dsh: boom" in proc.stderr
    )
    assert "- User asked: " + QUESTION in hk.journal()


def test_missing_or_unfinished_artifact_records_nothing(hk: HookEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from memsearch.agent.hooks import dsh
    from memsearch.agent.hooks.base import HookContext

    proc = hk.hook("dsh", "stop", json.dumps({"session_id": SESSION, "turn": 1}), MEMSEARCH_HOOK_SYNC="1")
    assert hook_json(proc) == {} and "without a session artifact" in proc.stderr
    db, _ = artifact(hk, ended=False)
    ctx = HookContext.build(dsh.PLATFORM, "stop", dsh.read_input(json.loads(turn_end(hk, db, 3))), hk.env())
    assert dsh.capture_turn(ctx, wait=0.3) is None  # turn 3 never comes
    ctx = HookContext.build(dsh.PLATFORM, "stop", dsh.read_input(json.loads(turn_end(hk, db))), hk.env())
    capture = dsh.capture_turn(ctx, wait=0.3)  # turn 2 without its end: what is there after the wait
    assert capture is not None and capture.user_text == QUESTION
    assert not hk.memory_dir.exists()


def step_input(hk: HookEnv, text: str) -> str:
    """What the plugin sends at step 1: the messages entering the step (the person's, then DSH's)."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Runtime context"}],
            "source": {"kind": "plugin"},
        },
    ]
    return json.dumps({"session_id": SESSION, "cwd": str(hk.project), "turn": 1, "messages": messages})


def test_first_step_of_a_turn_gets_recent_memory_and_the_recall_hint(hk: HookEnv) -> None:
    from memsearch.agent.hooks.dsh import PLATFORM

    question = "What did we decide about the exporter queue?"
    assert hook_json(hk.hook("dsh", "prompt-submit", step_input(hk, question))) == {}  # no memory yet
    hk.copy_memory()
    start = hook_json(hk.hook("dsh", "session-start", step_input(hk, question), MEMSEARCH_NO_WATCH="1"))
    assert start["systemMessage"].startswith("[memsearch v")
    assert '<memsearch-data source="recent journals">' in start["context"] and "\n- " in start["context"]
    hint = hook_json(hk.hook("dsh", "prompt-submit", step_input(hk, question)))
    assert hint == {"context": PLATFORM.recall_hint} and "memory-recall skill" in PLATFORM.recall_hint
    assert hook_json(hk.hook("dsh", "prompt-submit", step_input(hk, "ok"))) == {}  # too short to ask


def test_summariser_prompt_fits_one_argument() -> None:
    from memsearch.agent.hooks.dsh import MAX_PROMPT_BYTES, _fit_argument

    prompt = "Summarise.\n" + "界" * 100_000 + "\nend"
    fitted = _fit_argument(prompt)
    assert len(fitted.encode("utf-8")) <= MAX_PROMPT_BYTES
    assert fitted.startswith("Summarise.") and fitted.endswith("end")
    assert _fit_argument("short") == "short"
