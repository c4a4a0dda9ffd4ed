"""Maintenance tasks end to end: real processes, real git, real files, fake models on 127.0.0.1.

A project with two weeks of journals gets PROJECT.md, USER.md and a skill candidate from a fake
Anthropic API that looks things up with the restricted read commands; unchanged journals make the
next run do nothing; two concurrent runs run each task once; a failing model is recorded and
retried, and the session-start hook (fake ``claude`` on PATH, no API key) never fails for it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from fake_model_api import Answer, FakeModelAPI, ModelCall, model_api  # noqa: F401  (fixture)
from fake_servers import FakeEmbeddingServer, JsonHandler, fake_api, serving  # noqa: F401  (fixture)
from memsearch import maintenance as mt
from memsearch import skills
from memsearch.engine import journal
from memsearch.errors import MaintenanceError, MemoryCommandRefusedError
from memsearch.maintenance import MemoryScope, parse_answer, validate_memory_command

TRANSCRIPT_LINE = {"type": "user", "message": {"role": "user", "content": "cut the release please"}}

PROJECT_ANSWER = {
    "action": "replace",
    "reason": "first review",
    "content": "# Project\n\nBilling service; releases are cut with `make release`.",
}
USER_ANSWER = {
    "action": "replace",
    "reason": "stable",
    "content": "# User\n\n- Prefers short commit messages.",
}
SKILL_ANSWER = {
    "skills": [
        {
            "name": "cut-release",
            "description": "Cut a release of the billing service; use when asked to release or tag.",
            "body": "# Cut a release\n\n1. Run `make test`.\n2. Run `make release VERSION=<x.y.z>`.",
            "occurrences": 5,
            "sources": ["2026-05-01.md"],
            "reason": "Done the same way in five sessions.",
        }
    ]
}


# --- a project with two weeks of journals -----------------------------------------------------


def make_project(root: Path) -> Path:
    """A git project whose journals hold 14 days of sessions; every third day cuts a release.

    The journals are written by memsearch's own journal writer (what the Stop hooks call), as the
    user whose HOME is ``root / "home"``: memsearch records there which conversations its anchors
    name, and a model may look up only those."""
    project = root / "billing"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    memory = project / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    transcripts = root / "transcripts"
    transcripts.mkdir()
    with mock.patch.dict(os.environ, {"HOME": str(root / "home")}):
        for day in range(1, 15):
            session = f"sess-{day:02d}"
            transcript = transcripts / f"{session}.jsonl"
            transcript.write_text(json.dumps(TRANSCRIPT_LINE) + "\n", encoding="utf-8")
            work = (
                "- User asked to cut a release; Claude Code ran make test then make release VERSION=1.%d."
                if day % 3 == 0
                else "- Claude Code fixed an exporter bug (day %d) and the user asked for short commit "
                "messages."
            ) % day
            anchor = {"session": session, "turn": f"t{day}", "transcript": str(transcript)}
            when = dt.datetime(2026, 5, day, 10, 0)
            journal.append_entry(memory, journal.JournalEntry([work], anchor), when=when, title=True)
    return project


def write_config(home: Path, db: Path, embed_url: str, extra: str) -> None:
    (home / ".memsearch").mkdir(parents=True, exist_ok=True)
    (home / ".memsearch" / "config.toml").write_text(
        f'[milvus]\nuri = "{db}"\n\n'
        f'[embedding]\nprovider = "ollama"\nmodel = "m"\nbase_url = "{embed_url}"\n\n' + extra,
        encoding="utf-8",
    )


def api_tasks(model_url: str, interval: int = 0) -> str:
    text = (
        f'[llm.providers.fake]\ntype = "anthropic"\nbase_url = "{model_url}"\n'
        'api_key = "k"\nmodel = "fake-model"\n'
    )
    for task in ("project_review", "user_profile", "memory_to_skill"):
        text += f'\n[plugins.claude-code.{task}]\nenabled = true\nprovider = "fake"\n'
        text += f"min_interval_hours = {interval}\n"
    text += "min_occurrences = 3\n"
    return text


def api_project(tmp_path: Path, model_url: str, embed_url: str, interval: int = 0) -> tuple[Path, Path]:
    """A project with journals and a HOME whose config runs every task on the model API."""
    project = make_project(tmp_path)
    home = tmp_path / "home"
    write_config(home, tmp_path / "milvus.db", embed_url, api_tasks(model_url, interval=interval))
    return project, home


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSEARCH_", "CLAUDE"))}
    # The model's lookups run `memsearch search`: no memory service on demand, which would outlive
    # the test by its idle period.
    env.update({"HOME": str(home), "HF_HUB_OFFLINE": "1", "MEMSEARCH_SERVICE_AUTOSTART": "0", **extra})
    return env


def memsearch(project: Path, home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memsearch", *args],
        capture_output=True,
        text=True,
        cwd=project,
        env=env_for(home, **extra),
        timeout=180,
    )


def task_of(call: ModelCall) -> str:
    text = call.messages[0].text if call.messages else ""
    if "You keep PROJECT.md" in text:
        return "project_review"
    if "You keep USER.md" in text:
        return "user_profile"
    if "draft skills" in text:
        return "memory_to_skill"
    return "?"


def json_answer(reply: dict[str, object]) -> Callable[[ModelCall], Answer]:
    return lambda call: Answer(text="Here is my answer:\n" + json.dumps(reply))


def skill_answer_after_lookups(transcript: Path) -> Callable[[ModelCall], Answer]:
    """Look up the original conversation, try a forbidden command, then answer."""

    def reply(call: ModelCall) -> Answer:
        results = [m.tool_result for m in call.messages if m.tool_result is not None]
        if not results:
            return Answer(tool=mt.TOOL_NAME, arguments={"command": f"memsearch transcript {transcript}"})
        if len(results) == 1:
            return Answer(tool=mt.TOOL_NAME, arguments={"command": "cat /etc/passwd; rm -rf /"})
        return Answer(text=json.dumps(SKILL_ANSWER))

    return reply


def install_answers(api: FakeModelAPI, project: Path) -> None:
    transcript = project.parent / "transcripts" / "sess-03.jsonl"
    api.on(lambda c: task_of(c) == "project_review", json_answer(PROJECT_ANSWER))
    api.on(lambda c: task_of(c) == "user_profile", json_answer(USER_ANSWER))
    api.on(lambda c: task_of(c) == "memory_to_skill", skill_answer_after_lookups(transcript))


def calls_per_task(api: FakeModelAPI) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in api.snapshot():
        if not call.after_tool:
            counts[task_of(call)] = counts.get(task_of(call), 0) + 1
    return counts


# --- the whole layer --------------------------------------------------------------------------


def test_two_weeks_of_journals_give_project_user_and_a_skill_then_nothing_when_unchanged(
    tmp_path: Path,
    model_api: FakeModelAPI,  # noqa: F811
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project, home = api_project(tmp_path, model_api.url, fake_api.url)
    install_answers(model_api, project)

    proc = memsearch(project, home, "maintenance", "run")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"project_review: replace ({project / '.memsearch' / 'PROJECT.md'}): first review",
        f"user_profile: replace ({project / '.memsearch' / 'USER.md'}): stable",
        "memory_to_skill: distilled (cut-release): 1 new",
    ]
    memsearch_dir = project / ".memsearch"
    assert (memsearch_dir / "PROJECT.md").read_text() == PROJECT_ANSWER["content"] + "\n"
    assert (memsearch_dir / "USER.md").read_text() == USER_ANSWER["content"] + "\n"
    # the memsearch command runs with umask 077 (memsearch.private.restrict_umask): what it writes
    # about your sessions is yours alone, whatever the shell's umask
    assert (memsearch_dir / "PROJECT.md").stat().st_mode & 0o777 == 0o600
    [candidate] = skills.list_candidates(memsearch_dir)
    assert (candidate.slug, candidate.status) == ("cut-release", "pending")
    assert (candidate.occurrences, candidate.sources) == (5, ("2026-05-01.md",))
    assert "make release VERSION=<x.y.z>" in candidate.path.read_text()
    log = subprocess.run(
        ["git", "-C", str(memsearch_dir / "skill-candidates"), "log", "--format=%s"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "memory_to_skill: cut-release from the journals (claude-code)" in log

    # The model saw the journals of the last two weeks, newest included.
    assert model_api.saw("2026-05-14.md") and model_api.saw("make release VERSION=1.12")
    # The lookup read the real transcript; the forbidden command was refused, never run.
    results = [m.tool_result or "" for c in model_api.snapshot() for m in c.messages if m.tool_result]
    assert any("cut the release please" in r for r in results)
    assert any(r.startswith("Error: refused: shell syntax") for r in results)
    # PROJECT.md is indexed like any memory file: a search finds it.
    collection = memsearch(project, home, "hook", "claude-code", "collection").stdout.strip()
    found = memsearch(project, home, "search", "make release", "--collection", collection, "-j")
    assert found.returncode == 0, found.stderr
    assert str(memsearch_dir / "PROJECT.md") in {hit["source"] for hit in json.loads(found.stdout)}

    state = json.loads((memsearch_dir / mt.STATE_FILE).read_text())
    assert {state[f"claude-code.{t}"]["last_action"] for t in mt.TASKS} == {"replace", "distilled"}

    # Unchanged journals: nothing runs, the model is not asked again.
    before = len(model_api.snapshot())
    again = memsearch(project, home, "maintenance", "run")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        f"{t}: skip: journals unchanged since the last run" for t in mt.TASKS
    ]
    assert len(model_api.snapshot()) == before
    # A new journal makes the tasks due again (the interval is 0 here).
    (memsearch_dir / "memory" / "2026-05-15.md").write_text("# 2026-05-15\n\n- Released 1.15.\n")
    third = memsearch(project, home, "maintenance", "run", "--task", "project_review", "-j")
    assert [o["action"] for o in json.loads(third.stdout)] == ["none"]  # same content: nothing rewritten


def test_the_interval_holds_a_task_back_until_it_passes(
    tmp_path: Path,
    model_api: FakeModelAPI,  # noqa: F811
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project, home = api_project(tmp_path, model_api.url, fake_api.url, interval=24)
    install_answers(model_api, project)
    assert memsearch(project, home, "maintenance", "run", "--task", "user_profile").returncode == 0
    (project / ".memsearch" / "memory" / "2026-05-15.md").write_text("- new day\n")
    held = memsearch(project, home, "maintenance", "run", "--task", "user_profile")
    assert held.stdout == "user_profile: skip: ran less than 24 h ago\n"
    forced = memsearch(project, home, "maintenance", "run", "--task", "user_profile", "--force")
    assert forced.stdout.startswith("user_profile: none"), forced.stdout  # ran; same text, kept
    assert calls_per_task(model_api) == {"user_profile": 2}


def test_two_concurrent_runs_run_each_task_once(
    tmp_path: Path,
    model_api: FakeModelAPI,  # noqa: F811
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project, home = api_project(tmp_path, model_api.url, fake_api.url)

    def slow(reply: dict[str, object]) -> Callable[[ModelCall], Answer]:
        def answer(call: ModelCall) -> Answer:
            time.sleep(0.5)  # long enough for the second process to arrive while the first runs
            return Answer(text=json.dumps(reply))

        return answer

    model_api.on(lambda c: task_of(c) == "project_review", slow(PROJECT_ANSWER))
    model_api.on(lambda c: task_of(c) == "user_profile", slow(USER_ANSWER))
    model_api.on(lambda c: task_of(c) == "memory_to_skill", slow(SKILL_ANSWER))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memsearch", "maintenance", "run", "-j"],
            cwd=project,
            env=env_for(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert calls_per_task(model_api) == {"project_review": 1, "user_profile": 1, "memory_to_skill": 1}
    actions = sorted(o["action"] for out, _ in outs for o in json.loads(out))
    assert actions.count("locked") + actions.count("skip") == 3
    assert len(skills.list_candidates(project / ".memsearch")) == 1


# --- failures and the hook (no API key: the host's own CLI) -----------------------------------

FAKE_CLAUDE = r"""
import json, os, sys
args = sys.argv[1:]
if args[:1] == ["--help"]:
    print("Usage: claude [options]\n  --settings <file-or-json>")
    sys.exit(0)
prompt = sys.stdin.read()
with open(os.environ["FAKE_CLAUDE_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({"argv": args, "prompt": prompt[:200], "cwd": os.getcwd(),
                          "disable": os.environ.get("MEMSEARCH_DISABLE")}) + "\n")
if os.path.exists(os.environ["FAKE_CLAUDE_FAIL"]):
    sys.stderr.write("model overloaded\n")
    sys.exit(3)
if "You keep PROJECT.md" in prompt:
    print(json.dumps({"action": "replace", "reason": "r", "content": "# Project\n\nFrom the host CLI."}))
else:
    print(json.dumps({"action": "none", "reason": "nothing stable"}))
"""


def native_setup(tmp_path: Path, fake_api_url: str) -> tuple[Path, Path, dict[str, str]]:
    project = make_project(tmp_path)
    home = tmp_path / "home"
    write_config(
        home,
        tmp_path / "milvus.db",
        fake_api_url,
        "[plugins.claude-code.project_review]\nenabled = true\nmin_interval_hours = 0\n"
        'model = "review-model"\n'
        "[plugins.claude-code.user_profile]\nenabled = true\nmin_interval_hours = 0\n",
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text(f"#!{sys.executable}\n{FAKE_CLAUDE}", encoding="utf-8")
    claude.chmod(0o755)
    fail_flag = tmp_path / "fail"
    extra = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "FAKE_CLAUDE_LOG": str(tmp_path / "claude.jsonl"),
        "FAKE_CLAUDE_FAIL": str(fail_flag),
        "MEMSEARCH_NO_WATCH": "1",
    }
    return project, home, extra


def wait_for(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def state_of(project: Path) -> dict[str, dict[str, object]]:
    return mt.load_state(project / ".memsearch")


def test_a_failing_model_is_recorded_retried_and_never_fails_the_hook(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project, home, extra = native_setup(tmp_path, fake_api.url)
    (tmp_path / "fail").touch()
    stdin = json.dumps({"session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart"})

    def hook() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memsearch", "hook", "claude-code", "session-start"],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=project,
            env=env_for(home, **extra),
            timeout=60,
        )

    started = time.monotonic()
    first = hook()
    assert first.returncode == 0, first.stderr
    assert time.monotonic() - started < 10  # the model runs in the background, not in the hook
    wait_for(lambda: state_of(project).get("claude-code.user_profile", {}).get("last_action") == "error")
    entry = state_of(project)["claude-code.project_review"]
    assert entry["last_action"] == "error"
    assert (
        "claude exited with status 3: model overloaded" in (project / ".memsearch" / mt.LOG_FILE).read_text()
    )
    assert "last_success_at" not in entry and not (project / ".memsearch" / "PROJECT.md").exists()
    calls = [json.loads(line) for line in (tmp_path / "claude.jsonl").read_text().splitlines()]
    assert {c["disable"] for c in calls} == {"1"} and all(c["cwd"] != str(project) for c in calls)
    # The task's model reaches the host CLI; a task without one gets Claude Code's sonnet.
    models = {
        ("You keep PROJECT.md" in c["prompt"], c["argv"][c["argv"].index("--model") + 1]) for c in calls
    }
    assert models == {(True, "review-model"), (False, "sonnet")}

    # The model recovers: the next session start retries (same journals) and succeeds.
    (tmp_path / "fail").unlink()
    assert hook().returncode == 0
    wait_for(lambda: state_of(project).get("claude-code.user_profile", {}).get("last_action") == "none")
    assert state_of(project)["claude-code.project_review"]["last_action"] == "replace"
    assert (project / ".memsearch" / "PROJECT.md").read_text() == "# Project\n\nFrom the host CLI.\n"

    # The next session start shows PROJECT.md to the model, and starts nothing (journals unchanged).
    third = hook()
    context = json.loads(third.stdout)["hookSpecificOutput"]["additionalContext"]
    assert (
        f"[memsearch] PROJECT.md ({project / '.memsearch' / 'PROJECT.md'}):\n"
        '<memsearch-data source="PROJECT.md">\n# Project' in context
    )
    time.sleep(1)
    assert (
        len((tmp_path / "claude.jsonl").read_text().splitlines()) == len(calls) + 2
    )  # the retry asked once per task


def test_a_failing_task_fails_the_manual_run_with_one_error_line(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project, home, extra = native_setup(tmp_path, fake_api.url)
    (tmp_path / "fail").touch()
    proc = memsearch(project, home, "maintenance", "run", "--task", "project_review", **extra)
    assert proc.returncode == 1
    assert proc.stdout.startswith(  # the host CLI's own reason, in the line (a run by hand has no log)
        "project_review: error: The Claude Code CLI gave no usable answer (claude summariser failed: "
        "claude exited with status "
    )
    assert proc.stderr.splitlines()[-1] == (
        "Error: 1 maintenance task failed: project_review. Hint: The reasons are above and in the "
        "state file; a later run retries them."
    )
    assert "Traceback" not in proc.stderr


def test_session_context_shows_both_files_within_the_budget(tmp_path: Path) -> None:
    from memsearch.agent.hooks.base import HookContext, HookInput
    from memsearch.agent.hooks.claude_code import PLATFORM

    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    ctx = HookContext.build(PLATFORM, "session-start", HookInput(cwd=str(project)), env={})
    assert mt.session_context(ctx) == ""
    (project / ".memsearch").mkdir()
    (project / ".memsearch" / "PROJECT.md").write_text(
        "# Project\n" + "".join(f"- fact {i}\n" for i in range(400))
    )
    (project / ".memsearch" / "USER.md").write_text("# User\n- likes tea\n")
    text = mt.session_context(ctx, budget=1000)
    assert len(text) <= 1000
    assert "- likes tea" in text and "- fact 1\n" in text and "- fact 399" not in text
    assert f"…(cut; the whole file is {project / '.memsearch' / 'PROJECT.md'})" in text


# --- the lookup validator ---------------------------------------------------------------------


@pytest.fixture
def scope(tmp_path: Path) -> MemoryScope:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    return MemoryScope(tmp_path, "ms_coll", frozenset({str(transcript.resolve())}))


def test_the_validator_accepts_the_three_read_commands(scope: MemoryScope, tmp_path: Path) -> None:
    transcript = str((tmp_path / "t.jsonl").resolve())
    assert validate_memory_command('memsearch search "release steps" -k 5', scope) == [
        "search",
        "--collection",
        "ms_coll",
        "-k",
        "5",
        "--",
        "release steps",
    ]
    assert validate_memory_command("expand 0123abcd9f --lines=3", scope) == [
        "expand",
        "--collection",
        "ms_coll",
        "--lines",
        "3",
        "0123abcd9f",
    ]
    assert validate_memory_command(f"memsearch transcript {transcript} --turn t3", scope) == [
        "transcript",
        "--turn",
        "t3",
        transcript,
    ]
    assert validate_memory_command('search -- "-leading dash"', scope)[-1] == "-leading dash"


@pytest.mark.parametrize(
    "command, reason",
    [
        ("cat /etc/passwd", "only `memsearch search|expand|transcript` may run"),
        ("memsearch index /", "only `memsearch search|expand|transcript` may run"),
        ("memsearch reset --yes", "only `memsearch search|expand|transcript` may run"),
        ("memsearch search x; rm -rf /", "shell syntax"),
        ("memsearch search $(whoami)", "shell syntax"),
        ("memsearch search `id`", "shell syntax"),
        ("memsearch search a | sh", "shell syntax"),
        ("memsearch search a > /tmp/x", "shell syntax"),
        ("memsearch search a\nmemsearch reset", "shell syntax"),
        ("memsearch search x --collection other", "option '--collection' is not allowed"),
        ("memsearch search x --milvus-uri /tmp/other.db", "option '--milvus-uri' is not allowed"),
        ("memsearch search x -k 999", "'999' is not a valid value for '-k'"),
        ("memsearch search a b", "takes exactly one argument, got 2"),
        ("memsearch expand ../../etc/passwd", "is not a chunk hash"),
        ("memsearch transcript /etc/passwd", "is not a conversation named by this project's journals"),
        ("memsearch transcript ../t.jsonl", "is not a conversation named by this project's journals"),
        ("memsearch transcript ~/.ssh/id_rsa", "is not a conversation named by this project's journals"),
        ("memsearch search 'unclosed", "cannot be split into words"),
        ("memsearch search " + "x" * 1200, "longer than 1000 characters"),
    ],
)
def test_the_validator_refuses_other_programs_paths_and_shell(
    scope: MemoryScope, command: str, reason: str
) -> None:
    with pytest.raises(MemoryCommandRefusedError) as info:
        validate_memory_command(command, scope)
    assert reason in info.value.one_line()


def test_lookups_are_bounded_in_number(scope: MemoryScope) -> None:
    outputs = [mt.run_memory_command("cat x", scope) for _ in range(mt.MAX_TOOL_CALLS + 1)]
    assert all(o.startswith("Error: refused:") for o in outputs[:-1])
    assert outputs[-1].startswith(f"Error: the limit of {mt.MAX_TOOL_CALLS} lookups is reached")


def test_a_lookup_runs_memsearch_and_its_output_is_clipped(scope: MemoryScope, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    lines = [json.dumps({"type": "user", "message": {"role": "user", "content": "x" * 5000}})] * 5
    transcript.write_text("\n".join(lines) + "\n")
    out = mt.run_memory_command(f"memsearch transcript {transcript} --json-output", scope)
    assert out.startswith('<memsearch-data source="memsearch transcript">')  # data, framed
    assert out.endswith("characters left out]\n</memsearch-data>") and len(out) < mt.MAX_TOOL_OUTPUT + 150


# --- answers, journals, due ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"action": "none"}',
        '```json\n{"action": "none"}\n```',
        'Let me think {about it}. Done:\n{"action": "none"}',
        '{"action": "none"}\nHope this helps!',
        '{"action": "replace", "content": "x"} then {"action": "none"}',
    ],
)
def test_an_answer_is_the_last_top_level_object_with_the_key(raw: str) -> None:
    assert parse_answer(raw, "action")["action"] == "none"


def test_answer_parsing_keeps_nested_objects_and_braces_in_strings() -> None:
    raw = '{"action": "replace", "content": "a {b} [c", "meta": {"action": "none"}}'
    assert parse_answer(raw, "action") == {
        "action": "replace",
        "content": "a {b} [c",
        "meta": {"action": "none"},
    }


@pytest.mark.parametrize(
    "raw",
    [
        '{"action": "replace", "content": "cut off',
        '{"action": "replace", "meta": {"action": "none"}',  # truncated outer: the inner is not the answer
        '[{"action": "none"}]',  # an action inside a list is not an answer
        '[{"action": "none"}',
        "no json at all",
        "",
    ],
)
def test_answers_without_a_top_level_object_are_refused(raw: str) -> None:
    with pytest.raises(MaintenanceError, match="did not answer with a JSON object"):
        parse_answer(raw, "action")


def test_recent_journals_keep_the_newest_files_and_text(tmp_path: Path) -> None:
    for day in range(1, 21):
        path = tmp_path / f"2026-01-{day:02d}.md"
        path.write_bytes(f"day {day} ".encode() + b"\xff\xfe" + b"x" * 100)
        os.utime(path, (1_700_000_000 + day, 1_700_000_000 + day))
    text = mt.recent_journals(tmp_path, budget=10_000)
    assert "day 7 " in text and "day 6 " not in text  # the newest 14 files
    assert "\ufffd" in text  # bytes that are not UTF-8 are replaced, never fatal
    short = mt.recent_journals(tmp_path, budget=300)
    assert len(short) <= 300 and short.startswith("[older journal text left out]")
    assert short.count("<memsearch-data source=") == short.count("</memsearch-data>")  # whole frames
    assert "day 20 " in short


def test_due_needs_the_interval_and_changed_journals_and_retries_failures() -> None:
    from memsearch.config import PluginMaintenanceTaskConfig

    settings = PluginMaintenanceTaskConfig(enabled=True, min_interval_hours=24)
    now = mt._now()
    ago = lambda hours: mt._stamp(now - __import__("datetime").timedelta(hours=hours))  # noqa: E731
    assert mt.check_due(settings, {}, "d1", now=now) == (True, "never run")
    done = {"last_success_at": ago(2), "last_input_digest": "d1"}
    assert mt.check_due(settings, done, "d1", now=now)[0] is False
    assert mt.check_due(settings, done, "d2", now=now) == (False, "ran less than 24 h ago")
    assert mt.check_due(settings, {**done, "last_success_at": ago(25)}, "d2", now=now) == (True, "due")
    assert mt.check_due(settings, done, "d1", now=now, force=True) == (True, "forced")
    failed = {**done, "last_failed_at": ago(0.5)}
    assert mt.check_due(settings, failed, "d2", now=now)[0] is False  # retried an hour after a failure
    assert mt.check_due(settings, {**failed, "last_failed_at": ago(1.5)}, "d2", now=now) == (
        True,
        "retrying after a failure",
    )


def test_an_openai_compatible_provider_gets_the_lookup_tool_too(
    tmp_path: Path,
    model_api: FakeModelAPI,  # noqa: F811
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project = make_project(tmp_path)
    home = tmp_path / "home"
    config = api_tasks(model_api.url).replace('type = "anthropic"', 'type = "openai"')
    config = config.replace(f'base_url = "{model_api.url}"', f'base_url = "{model_api.url}/v1"')
    write_config(home, tmp_path / "milvus.db", fake_api.url, config)
    model_api.on(
        lambda c: task_of(c) == "memory_to_skill",
        skill_answer_after_lookups(project.parent / "transcripts" / "sess-06.jsonl"),
    )
    proc = memsearch(project, home, "skills", "distill", "--plugin", "claude-code")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "memory_to_skill: distilled (cut-release): 1 new\n"
    listed = memsearch(project, home, "skills", "list")
    assert listed.stdout.startswith("- cut-release [candidate, seen 5x, install ready]"), listed.stdout
    calls = model_api.snapshot()
    assert {c.protocol for c in calls} == {"chat"} and all(c.tools == [mt.TOOL_NAME] for c in calls)
    # Reasoning models refuse any temperature but their default: none is sent.
    assert calls[0].body["tool_choice"] == "auto" and "temperature" not in calls[0].body
    results = [m.tool_result or "" for m in calls[-1].messages if m.tool_result is not None]
    assert "cut the release please" in results[0] and results[1].startswith("Error: refused: shell syntax")


def test_an_answer_with_an_unknown_action_is_a_recorded_failure(
    tmp_path: Path,
    model_api: FakeModelAPI,  # noqa: F811
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project, home = api_project(tmp_path, model_api.url, fake_api.url)
    model_api.on(lambda c: task_of(c) == "project_review", json_answer({"action": "maybe", "content": "x"}))
    proc = memsearch(project, home, "maintenance", "run", "--task", "project_review")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == (
        'project_review: error: The model answered action \'maybe\'; only "none" and "replace" are '
        "understood. Hint: A custom prompt file must ask for the same JSON answer as the built-in one.\n"
    )
    assert not (project / ".memsearch" / "PROJECT.md").exists()
    assert state_of(project)["claude-code.project_review"]["last_action"] == "error"


def test_distill_by_hand_with_a_custom_prompt_input_dir_and_a_revision(
    tmp_path: Path,
    model_api: FakeModelAPI,  # noqa: F811
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project = make_project(tmp_path)
    (project / ".memsearch" / "memory").rename(project / "notes")
    prompt = tmp_path / "my-skill-prompt.txt"
    prompt.write_text(
        "CUSTOM DISTILLER for {{AGENT_NAME}}, at least {{MIN_OCCURRENCES}} times.{{TOOLS_NOTE}}\n"
    )
    home = tmp_path / "home"
    write_config(
        home,
        tmp_path / "milvus.db",
        fake_api.url,
        f'[prompts]\nmemory_to_skill = "{prompt}"\n\n'
        f'[llm.providers.fake]\ntype = "anthropic"\nbase_url = "{model_api.url}"\napi_key = "k"\n\n'
        '[plugins.claude-code.memory_to_skill]\nenabled = false\nprovider = "fake"\ninput_dir = "notes"\n'
        "min_occurrences = 4\n",
    )
    incomplete = [{"name": "no-body", "description": "d", "body": ""}, "junk", {"description": "no name"}]
    model_api.on(
        lambda c: "CUSTOM DISTILLER" in c.user_text,
        json_answer({"skills": [*incomplete, *SKILL_ANSWER["skills"]]}),
    )

    # Background runs skip a disabled task; asking for it by hand runs it.
    assert (
        memsearch(project, home, "maintenance", "run").stdout.splitlines()[-1] == "memory_to_skill: disabled"
    )
    proc = memsearch(project, home, "skills", "distill")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "memory_to_skill: distilled (cut-release): 1 new\n"  # incomplete drafts dropped
    assert model_api.saw(
        "CUSTOM DISTILLER for Claude Code, at least 4 times. You may call the run_memory_command"
    )
    assert model_api.saw('<memsearch-data source="2026-05-14.md">')  # read from the configured input_dir
    assert [c.slug for c in skills.list_candidates(project / ".memsearch")] == ["cut-release"]

    # Unchanged journals: skipped; forced: the model sees the candidate's current body to revise it.
    assert memsearch(project, home, "skills", "distill").stdout == (
        "memory_to_skill: skip: journals unchanged since the last run\n"
    )
    forced = memsearch(project, home, "skills", "distill", "--force")
    assert forced.stdout == "memory_to_skill: none: no new or changed candidate\n"
    last = model_api.snapshot()[-1].user_text
    assert "### cut-release (pending)" in last and "2. Run `make release VERSION=<x.y.z>`." in last


def test_with_nothing_enabled_a_run_reports_disabled_and_writes_nothing(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    home = tmp_path / "home"
    (home / ".memsearch").mkdir(parents=True, exist_ok=True)
    proc = memsearch(project, home, "maintenance", "run")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{t}: disabled" for t in mt.TASKS]
    assert list(project.iterdir()) == []
    status = json.loads(memsearch(project, home, "maintenance", "status", "-j").stdout)
    assert [(t["task"], t["enabled"], t["due"]) for t in status["tasks"]] == [
        (t, False, False) for t in mt.TASKS
    ]


class FakeGemini:
    """A tiny ``generateContent`` endpoint on 127.0.0.1: asks for one lookup, then answers."""

    def __init__(self, transcript: Path) -> None:
        self.transcript = transcript
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def handler(self) -> type[JsonHandler]:
        fake = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                fake.requests.append((self.path, body))
                responses = [p for c in body["contents"] for p in c["parts"] if "functionResponse" in p]
                if not responses:
                    command = f"memsearch transcript {fake.transcript}"
                    part: dict[str, Any] = {
                        "functionCall": {"name": mt.TOOL_NAME, "args": {"command": command}},
                        "thoughtSignature": "sig-1",
                    }
                else:
                    part = {"text": json.dumps(SKILL_ANSWER)}
                answer = {
                    "candidates": [
                        {"content": {"role": "model", "parts": [{"text": "hm", "thought": True}, part]}}
                    ]
                }
                self._send(200, json.dumps(answer).encode())

        return Handler


def test_a_gemini_provider_gets_the_lookup_tool_too(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    project = make_project(tmp_path)
    home = tmp_path / "home"
    gemini = FakeGemini(project.parent / "transcripts" / "sess-09.jsonl")
    with serving(gemini.handler(), "fake-gemini") as url:
        config = api_tasks(url).replace('type = "anthropic"', 'type = "gemini"')
        write_config(home, tmp_path / "milvus.db", fake_api.url, config)
        proc = memsearch(project, home, "skills", "distill")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "memory_to_skill: distilled (cut-release): 1 new\n"
    (path, first), (_, second) = gemini.requests
    assert path == "/v1beta/models/fake-model:generateContent"
    assert first["tools"][0]["functionDeclarations"][0]["name"] == mt.TOOL_NAME
    model_turn, tool_turn = second["contents"][1:]
    assert model_turn["parts"][1]["thoughtSignature"] == "sig-1"  # sent back as given
    assert "cut the release please" in tool_turn["parts"][0]["functionResponse"]["response"]["output"]


def test_each_rewrite_waits_for_review_and_can_be_reverted(
    tmp_path: Path,
    model_api: FakeModelAPI,  # noqa: F811
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    """``maintenance history|keep|revert``: every rewrite of PROJECT.md is recorded with its diff; a
    revert puts the text before it back (and the index follows), unless a later run changed the
    file; the model calls are in the recall log with their tokens."""
    project, home = api_project(tmp_path, model_api.url, fake_api.url)
    answers = iter(["Billing service (v1).", "Billing service (v2), releases with `make release`."])

    def project_answer(call: ModelCall) -> Answer:
        content = f"# Project\n\n{next(answers)}"
        return Answer(text=json.dumps({"action": "replace", "reason": "moved on", "content": content}))

    model_api.on(lambda c: task_of(c) == "project_review", project_answer)
    memsearch_dir = project / ".memsearch"
    (memsearch_dir / "PROJECT.md").write_text("# Project\n\nBy hand.\n")
    for _ in range(2):
        ran = memsearch(project, home, "maintenance", "run", "--task", "project_review", "--force")
        assert ran.returncode == 0, ran.stderr
    listed = memsearch(project, home, "maintenance", "history", "-j")
    assert listed.returncode == 0, listed.stderr
    history = json.loads(listed.stdout)
    assert [(r["task"], r["status"]) for r in history] == [("project_review", "new")] * 2
    newest, older = history
    assert "-Billing service (v1)." in newest["diff"] and "+Billing service (v2)" in newest["diff"]
    assert "-By hand." in older["diff"] and (newest["added"], newest["removed"]) == (1, 1)
    plain = memsearch(project, home, "maintenance", "history").stdout
    assert f"{newest['id']}  project_review rewrote {memsearch_dir / 'PROJECT.md'}" in plain

    refused = memsearch(project, home, "maintenance", "revert", older["id"])
    assert refused.returncode == 1 and refused.stderr.startswith("Error: PROJECT.md changed since run")
    assert "(v2)" in (memsearch_dir / "PROJECT.md").read_text()
    reverted = memsearch(project, home, "maintenance", "revert", newest["id"])
    assert reverted.returncode == 0, reverted.stderr
    assert (memsearch_dir / "PROJECT.md").read_text() == "# Project\n\nBilling service (v1).\n"
    collection = memsearch(project, home, "hook", "claude-code", "collection").stdout.strip()
    found = memsearch(
        project, home, "search", "billing service make release", "--collection", collection, "-j"
    )
    texts = [h["content"] for h in json.loads(found.stdout) if h["source"].endswith("PROJECT.md")]
    assert texts and all("(v1)" in t and "(v2)" not in t for t in texts)  # reindexed after the revert
    assert memsearch(project, home, "maintenance", "keep", older["id"]).returncode == 0
    assert memsearch(project, home, "maintenance", "history").stdout.startswith(
        "No maintenance rewrite waits"
    )
    every = json.loads(memsearch(project, home, "maintenance", "history", "--all", "-j").stdout)
    assert [r["status"] for r in every] == ["reverted", "kept"]
    unknown = memsearch(project, home, "maintenance", "keep", "20260101T000000000000Z-project_review")
    assert unknown.returncode == 1 and unknown.stderr.startswith("Error: no maintenance run")
    records = home / ".memsearch" / "maintenance-runs"
    assert records.stat().st_mode & 0o777 == 0o700  # memsearch's own record, not the project's

    report = json.loads(
        memsearch(project, home, "stats", "--recall", "-j", "--collection", collection).stdout
    )
    (calls,) = [p for p in report["llm"] if p["purpose"] == "maintenance:project_review"]
    assert (calls["calls"], calls["failed"]) == (2, 0)
    assert calls["prompt_tokens"] > 500 and calls["answer_tokens"] > 10
    (row,) = report["sessions"]  # the search above; a maintenance run is no session's recall
    assert (row["session"], row["searches"], row["injections"]) == ("unknown", 1, 0)
