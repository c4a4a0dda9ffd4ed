"""The recall log (memsearch.agent.recall_log) and ``memsearch stats --recall``: appends from many processes
lose no line, the log is private, rotates, can be switched off, stores queries only redacted; and a
scripted session (real hook processes, real ``memsearch search``/``expand`` subprocesses with the
variables the session-start hook exported) is summed per session."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memsearch.agent import recall_log
from memsearch.config import MemSearchConfig

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, stdin: str | None = None):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSEARCH_", "CLAUDE", "CODEX_"))}
    base.update(HF_HUB_OFFLINE="1", MEMSEARCH_SERVICE_AUTOSTART="0")
    return subprocess.run(
        [sys.executable, "-m", "memsearch", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        input=stdin,
        timeout=120,
    )


def test_appends_from_many_processes_lose_no_line() -> None:
    script = (
        "import sys\nfrom memsearch.agent import recall_log\nfrom memsearch.config import MemSearchConfig\n"
        "cfg = MemSearchConfig()\n"
        "for i in range(150):\n"
        "    recall_log.record(cfg, 'c1', 'search', session=f's{sys.argv[1]}', host='h', query='q' * 300,"
        " hits=i)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)]) for n in range(5)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 5
    lines = recall_log.log_path("c1").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]  # every line whole
    assert len(events) == 750
    for n in range(5):
        assert sorted(e["hits"] for e in events if e["session"] == f"s{n}") == list(range(150))
    assert all(len(e["query"]) == recall_log.QUERY_CHARS for e in events)


def test_the_log_is_private() -> None:
    recall_log.record(MemSearchConfig(), "c2", "capture", session="s", host="h")
    path = recall_log.log_path("c2")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_link_at_the_logs_name_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("", encoding="utf-8")
    path = recall_log.log_path("c3")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.symlink_to(target)
    recall_log.record(MemSearchConfig(), "c3", "search", query="x")  # refused, never raises
    assert target.read_text(encoding="utf-8") == ""
    assert recall_log.read_events("c3") == []


def test_the_log_rotates_and_reads_both_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall_log, "MAX_BYTES", 2000)
    cfg = MemSearchConfig()
    for i in range(60):
        recall_log.record(cfg, "c4", "search", session="s", hits=i)
    path = recall_log.log_path("c4")
    old = path.with_name(path.name + ".1")
    assert old.exists() and path.stat().st_size < 2000 + 200
    hits = [e["hits"] for e in recall_log.read_events("c4")]
    assert hits == sorted(hits) and hits[-1] == 59 and len(hits) < 60  # bounded: the oldest went


def test_the_off_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    off = MemSearchConfig()
    off.telemetry.recall = False
    recall_log.record(off, "c5", "search", query="x")
    recall_log.record(MemSearchConfig(), "c5", "search", query="x", env={"MEMSEARCH_RECALL_LOG": "0"})
    monkeypatch.setenv("MEMSEARCH_RECALL_LOG", "false")
    recall_log.record(MemSearchConfig(), "c5", "search", query="x")
    assert not recall_log.log_path("c5").exists()


def test_queries_are_stored_redacted() -> None:
    recall_log.record(
        MemSearchConfig(), "c6", "search", query=f"why does {GITHUB_TOKEN} fail <private>me</private>"
    )
    (event,) = recall_log.read_events("c6")
    assert GITHUB_TOKEN not in json.dumps(event) and "me" not in event["query"].split()
    assert "[REDACTED:" in event["query"]


def test_summarise_per_session() -> None:
    events = [
        {"ts": 1, "event": "inject", "session": "a", "host": "claude-code", "tokens": 100},
        {"ts": 2, "event": "inject", "session": "a", "host": "claude-code", "tokens": 30},
        {"ts": 3, "event": "search", "session": "a", "host": "claude-code", "hits": 3},
        {"ts": 4, "event": "inject", "session": "b", "host": "codex", "tokens": 50},
        {"ts": 5, "event": "capture", "session": "b", "host": "codex"},
        {"ts": 6, "event": "expand", "session": "", "host": ""},
    ]
    a, b, unknown = recall_log.summarise(events)
    assert (a.session, a.host, a.injected_tokens, a.injections, a.searches, a.hits) == (
        "a",
        "claude-code",
        130,
        2,
        1,
        3,
    )
    assert a.consulted and not b.consulted and b.captures == 1
    assert unknown.session == "unknown" and unknown.expands == 1 and unknown.consulted


def test_who_a_command_runs_for() -> None:
    assert recall_log.caller({}) == ("", "")
    exported = {"MEMSEARCH_SESSION": "s-1", "MEMSEARCH_HOST": "claude-code", "CODEX_THREAD_ID": "t"}
    assert recall_log.caller(exported) == ("s-1", "claude-code")
    assert recall_log.caller({"CODEX_THREAD_ID": "0199d2a0-0000-7c00"}) == ("0199d2a0-0000-7c00", "codex")
    assert recall_log.caller({"MEMSEARCH_SESSION": "bad value; rm -rf /"}) == ("", "")


# --- a scripted session through the real CLI --------------------------------------------------


def _exported(env_file: Path) -> dict[str, str]:
    """The variables ``export A=1 B=2`` lines set (what Claude Code sources before a Bash command)."""
    found: dict[str, str] = {}
    for line in env_file.read_text(encoding="utf-8").splitlines():
        for pair in line.removeprefix("export ").split():
            name, _, value = pair.partition("=")
            found[name] = value
    return found


def test_stats_recall_sums_a_scripted_session(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    memory = project / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-11-30.md").write_text(
        "# 2026-11-30\n\n## Session 09:00\n\n### 09:00\n- We chose blue-green for the zebra-ledger.\n",
        encoding="utf-8",
    )
    env = {"HOME": str(home), "MEMSEARCH_NO_WATCH": "1"}
    collection = _cli("hook", "claude-code", "collection", env=env, cwd=project).stdout.strip()
    indexed = _cli("index", str(memory), "--collection", collection, env=env, cwd=project)
    assert indexed.returncode == 0, indexed.stderr

    # session A: start (exports its session), a prompt, a search and an expand in its shell
    env_file = tmp_path / "claude-env.sh"
    start = {"session_id": "sess-a", "cwd": str(project), "hook_event_name": "SessionStart"}
    hooked = _cli(
        "hook",
        "claude-code",
        "session-start",
        env={**env, "CLAUDE_ENV_FILE": str(env_file)},
        cwd=project,
        stdin=json.dumps(start),
    )
    assert hooked.returncode == 0, hooked.stderr
    shell = _exported(env_file)
    assert shell == {
        "MEMSEARCH_SESSION": "sess-a",
        "MEMSEARCH_HOST": "claude-code",
        "MEMSEARCH_RECALL_COLLECTION": collection,
    }
    prompt = {"session_id": "sess-a", "cwd": str(project), "prompt": "How did we roll out the ledger?"}
    assert (
        _cli(
            "hook", "claude-code", "prompt-submit", env=env, cwd=project, stdin=json.dumps(prompt)
        ).returncode
        == 0
    )
    found = _cli(
        "search",
        f"zebra-ledger rollout {GITHUB_TOKEN}",
        "--json-output",
        "--collection",
        collection,
        env={**env, **shell},
        cwd=project,
    )
    assert found.returncode == 0, found.stderr
    chunk = json.loads(found.stdout)[0]["chunk_hash"]
    expanded = _cli("expand", chunk, "--collection", collection, env={**env, **shell}, cwd=project)
    assert expanded.returncode == 0, expanded.stderr

    # session B: started, never consulted; a search from a shell nobody exported to: unknown
    start_b = {**start, "session_id": "sess-b"}
    assert (
        _cli(
            "hook", "claude-code", "session-start", env=env, cwd=project, stdin=json.dumps(start_b)
        ).returncode
        == 0
    )
    assert _cli("search", "ledger", "--collection", collection, env=env, cwd=project).returncode == 0

    shown = _cli("stats", "--recall", "--json-output", "--collection", collection, env=env, cwd=project)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    rows = {row["session"]: row for row in report["sessions"]}
    assert set(rows) == {"sess-a", "sess-b", "unknown"}
    a = rows["sess-a"]
    assert (a["host"], a["injections"], a["searches"], a["hits"], a["expands"], a["consulted"]) == (
        "claude-code",
        2,
        1,
        1,
        1,
        True,
    )
    assert a["injected_tokens"] > 20
    assert rows["sess-b"]["consulted"] is False and rows["sess-b"]["injections"] == 1
    assert rows["unknown"]["searches"] == 1
    logged = recall_log.read_events(collection)
    assert GITHUB_TOKEN not in json.dumps(logged)  # the query went through redaction

    table = _cli("stats", "--recall", "--collection", collection, env=env, cwd=project).stdout
    line_b = next(line for line in table.splitlines() if line.startswith("sess-b"))
    assert line_b.endswith("<- memory never consulted") and "claude-code" in line_b
    assert "3 session(s); 1 never consulted memory" in table
    off = _cli(
        "stats", "--recall", "--collection", collection, env={**env, "MEMSEARCH_RECALL_LOG": "0"}, cwd=project
    )
    assert off.stdout.startswith("Recall log: off")


def test_stats_recall_of_a_damaged_time_is_no_traceback() -> None:
    """A logged time no calendar day holds (a damaged log line): ``stats --recall`` shows "?" for
    it instead of a traceback from ``datetime.fromtimestamp``."""
    line = {"ts": 1e20, "session": "far-away", "host": "claude-code", "event": "search", "hits": 1}
    recall_log._append(recall_log.log_path("farcoll"), json.dumps(line) + "\n")
    proc = _cli("stats", "--recall", "--collection", "farcoll")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "far-away" in proc.stdout and " ? " in proc.stdout, proc.stdout
