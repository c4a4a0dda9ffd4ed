"""The hook engine driven the way the hosts drive it: real ``python -m memsearch hook`` processes.

Each test gets a git project, an isolated HOME whose ``config.toml`` points at one Milvus Lite
database served by a real ``memsearch serve`` (shared by the module, so indexing and searching cost
milliseconds instead of a model load per process), recorded stdin JSON, and fake ``claude`` /
``codex`` executables first on PATH (tests/fixtures/hooks/hookkit.py). Outputs are pinned by golden
files in tests/fixtures/hooks/golden (``MEMSEARCH_UPDATE_GOLDEN=1`` rewrites them for review).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks"))

import hookkit
from hookkit import (
    CLAUDE_SESSION,
    CLAUDE_SESSION_ID,
    CODEX_ROLLOUT,
    CODEX_SESSION_ID,
    CODEX_TURN_ID,
    HookEnv,
    Store,
    check_golden,
    hook_json,
    load_stdin,
    normalize_times,
    substitute,
    wait_for,
)

import memsearch
from fake_llm_server import FakeLLMServer, fake_llm
from memsearch.agent.hooks.events import SYNC_ENV as SYNC
from memsearch.prompts import load_prompt

pytestmark = pytest.mark.model

CLAUDE_TURN = "a1f0c6d2-0007-4000-8000-000000000007"
NO_HOOKS = json.dumps({"disableAllHooks": True})
__all__ = ["fake_llm"]  # the fixture, used by name


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with hookkit.serving_store(tmp_path_factory.mktemp("hookstore")) as served:
        yield served


@pytest.fixture
def hk(tmp_path: Path, store: Store) -> Iterator[HookEnv]:
    # Stop hands its work to a detached worker on both hosts; these tests check that work in the
    # hook's own process. The detached path has its own tests (MEMSEARCH_HOOK_SYNC=0).
    with hookkit.hook_env(tmp_path / "t", store, extra_env={SYNC: "1"}) as world:
        yield world


def claude_transcript(hk: HookEnv, source: Path = CLAUDE_SESSION, session: str = CLAUDE_SESSION_ID) -> Path:
    """The fixture session where Claude Code keeps it: a file named after the session."""
    target = hk.root / "claude-projects" / f"{session}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def claude_stop_stdin(hk: HookEnv, transcript: Path) -> str:
    return load_stdin("claude-stop.json", TRANSCRIPT=str(transcript), CWD=str(hk.project))


def codex_rollout(hk: HookEnv, source: Path = CODEX_ROLLOUT) -> Path:
    target = hk.root / "codex-sessions" / f"rollout-2026-03-25T10-00-00-{CODEX_SESSION_ID}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def start_hook(hk: HookEnv, platform: str, event: str, stdin: str) -> subprocess.Popen[str]:
    """A hook process running in the background, its stdin written and closed at once (as a host
    does; a hook gives up waiting for stdin after 2 s)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "hook", platform, event],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=hk.project,
        env=hk.env(),
    )
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    proc.stdin = None  # so communicate() only collects the output
    return proc


def session_start_subs(hk: HookEnv, collection: str) -> dict[str, str]:
    assert hk.store is not None
    return {"VERSION": memsearch.__version__, "URI": hk.store.uri, "COLLECTION": collection}


def summary_input(call: dict[str, object]) -> str:
    """What a fake agent was asked to summarise: the text after the prompt's ``Transcript:`` label."""
    stdin = str(call["stdin"])
    _prompt, sep, turn = stdin.partition("\n\nTranscript:\n")
    assert sep, stdin
    return turn


# --- session start ----------------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["claude-code", "codex"])
def test_session_start_injects_recent_memory_with_real_newlines(hk: HookEnv, platform: str) -> None:
    hk.copy_memory()
    stdin = load_stdin(
        f"{'claude' if platform == 'claude-code' else 'codex'}-session-start.json",
        TRANSCRIPT="",
        CWD=str(hk.project),
    )
    proc = hk.hook(platform, "session-start", stdin, MEMSEARCH_NO_WATCH="1")
    out = hook_json(proc)
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    # real newlines: the original's context held literal "\n" sequences, which the model reads as text
    assert "\n## 2026-03-25.md\n" in context and "\\n" not in context
    assert context.index("2026-03-25.md") < context.index("2026-03-24.md")  # newest first
    assert "2026-03-20" not in context and "Team notes" not in context  # only the 2 newest journals
    assert "<!--" not in context and "typed by hand" not in context  # bullets and headings only
    assert "## Session 17:40" not in context  # a stub heading without bullets is dropped
    assert "### 08:55" in context  # ### lines kept (the original's awk regex dropped them under mawk)
    subs = session_start_subs(hk, hk.collection(platform))
    check_golden(f"{platform}-session-start.json", substitute(proc.stdout, subs))  # the exact bytes
    assert not list(hk.memory_dir.glob(f"{time.strftime('%Y-%m-%d')}.md"))  # nothing written


def test_session_start_without_memory_only_reports_status(hk: HookEnv) -> None:
    out = hook_json(hk.hook("claude-code", "session-start", "{}", MEMSEARCH_NO_WATCH="1"))
    assert set(out) == {"systemMessage"}
    assert out["systemMessage"].startswith(f"[memsearch v{memsearch.__version__}] embedding: onnx/")
    assert f"collection: {hk.collection()}" in out["systemMessage"]
    assert hk.memory_dir.is_dir() and not list(hk.memory_dir.iterdir())


def test_session_start_is_fast_and_never_loads_the_store_or_model(hk: HookEnv) -> None:
    hk.memory_dir.mkdir(parents=True)
    for i in range(3000):  # eight years of daily journals
        day = f"{2018 + i // 365:04d}-{(i // 28) % 12 + 1:02d}-{i % 28 + 1:02d}"
        (hk.memory_dir / f"{day}.md").write_text(f"\n## Session 10:00\n\n### 10:00\n- Entry {i}.\n")
    stdin = load_stdin("claude-session-start.json", TRANSCRIPT="", CWD=str(hk.project))
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        out = hook_json(hk.hook("claude-code", "session-start", stdin, MEMSEARCH_NO_WATCH="1"))
        timings.append(time.perf_counter() - start)
    assert "- Entry" in out["hookSpecificOutput"]["additionalContext"]
    median = sorted(timings)[1]
    print(f"session-start with 3000 journals: median {median * 1000:.0f} ms")
    assert median < 1.0
    traced = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memsearch", "hook", "claude-code", "session-start"],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=hk.project,
        env=hk.env(MEMSEARCH_NO_WATCH="1"),
    )
    imported = {
        line.split("|")[-1].strip().split(".")[0] for line in traced.stderr.splitlines() if "|" in line
    }
    assert "memsearch" in imported
    assert not imported & {"pymilvus", "onnxruntime", "openai", "numpy"}


def test_session_start_reports_missing_key_and_starts_nothing(hk: HookEnv) -> None:
    hk.write_config('[embedding]\nprovider = "openai"\n')
    out = hook_json(hk.hook("claude-code", "session-start", "{}"))
    assert "ERROR: OPENAI_API_KEY not set — memory search disabled" in out["systemMessage"]
    # the tip's index command names this project's folder and collection (`index` needs a path)
    index = f"memsearch index {hk.memory_dir} --collection {hk.collection()} --force"
    assert out["systemMessage"].endswith(f"memsearch config set embedding.provider onnx && {index}")
    assert "hookSpecificOutput" not in out
    assert not (hk.memsearch_dir / ".watch.pid").exists()


def test_session_start_reports_bad_config_and_stale_index(hk: HookEnv) -> None:
    (hk.home / ".memsearch" / "config.toml").write_text("[milvus\nuri = ", encoding="utf-8")
    proc = hk.hook("claude-code", "session-start", "{}", MEMSEARCH_NO_WATCH="1")
    out = hook_json(proc)
    assert out["systemMessage"].startswith("[memsearch] Error: ")
    assert "config.toml" in out["systemMessage"]
    hk.write_config()
    hk.memsearch_dir.mkdir(parents=True)
    (hk.memsearch_dir / ".index-state.json").write_text('{"status": "degraded"}')
    out = hook_json(hk.hook("claude-code", "session-start", "{}", MEMSEARCH_NO_WATCH="1"))
    assert out["systemMessage"].endswith(
        " | WARNING: memory index may be stale; run the memory-config skill to diagnose"
    )


# --- prompt submit ----------------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["claude-code", "codex"])
def test_prompt_submit_hints_the_model_only_when_there_is_memory(hk: HookEnv, platform: str) -> None:
    name = "claude" if platform == "claude-code" else "codex"
    stdin = load_stdin(f"{name}-prompt-submit.json", TRANSCRIPT="/nowhere.jsonl", CWD=str(hk.project))
    assert hook_json(hk.hook(platform, "prompt-submit", stdin)) == {}  # no memory yet
    hk.copy_memory()
    short = json.dumps({"prompt": "ok go on", "cwd": str(hk.project)})
    assert hook_json(hk.hook(platform, "prompt-submit", short)) == {}
    proc = hk.hook(platform, "prompt-submit", stdin)
    # the hint is for the model: a systemMessage would be shown to the user and never reach the model
    assert "systemMessage" not in hook_json(proc)
    check_golden(f"{platform}-prompt-submit.json", proc.stdout)


def test_prompt_submit_auto_injects_the_best_hits(hk: HookEnv) -> None:
    hk.copy_memory()
    collection = hk.collection()
    indexed = hk.memsearch("index", str(hk.memory_dir), "--collection", collection)
    assert indexed.returncode == 0, indexed.stderr
    for key, value in (("auto_inject", "true"), ("top_k", "2")):  # the documented commands
        assert (
            hk.memsearch("config", "set", f"plugins.claude-code.prompt_recall.{key}", value).returncode == 0
        )
    stdin = json.dumps({"prompt": "which PDF renderer version did we pin?", "cwd": str(hk.project)})
    context = hook_json(hk.hook("claude-code", "prompt-submit", stdin))["hookSpecificOutput"][
        "additionalContext"
    ]
    assert context.startswith("[memsearch] Notes from past sessions")
    hits = [line for line in context.splitlines() if line.startswith("- [")]
    assert 1 <= len(hits) <= 2  # the best two, those at or above the strong-match floor
    assert "weasyprint" in hits[0] and "chunk_hash " in context
    assert f"--collection {collection}" in context


def test_prompt_submit_injects_nothing_when_memory_has_no_strong_match(hk: HookEnv) -> None:
    """Auto-inject below the strong-match floor: no hits and no hint (memory holds nothing on this
    prompt, a hint would send the model searching), and the recall log counts a skip."""
    hk.copy_memory()
    collection = hk.collection()
    assert hk.memsearch("index", str(hk.memory_dir), "--collection", collection).returncode == 0
    key = "plugins.claude-code.prompt_recall.auto_inject"
    assert hk.memsearch("config", "set", key, "true").returncode == 0
    for prompt in ("zzzqqq xylophone qwfpgj", "啊呜咕噜叽里呱啦嘿哈"):
        stdin = json.dumps({"prompt": prompt, "cwd": str(hk.project), "session_id": "sess-weak"})
        assert hook_json(hk.hook("claude-code", "prompt-submit", stdin)) == {}, prompt
    stdin = json.dumps({"prompt": "which PDF renderer version did we pin?", "cwd": str(hk.project)})
    assert "weasyprint" in hk.hook("claude-code", "prompt-submit", stdin).stdout.lower()
    shown = hk.memsearch("stats", "--recall", "--json-output", "--collection", collection)
    assert shown.returncode == 0, shown.stderr
    rows = {row["session"]: row for row in json.loads(shown.stdout)["sessions"]}
    assert (rows["sess-weak"]["skips"], rows["sess-weak"]["injections"]) == (2, 0)
    table = hk.memsearch("stats", "--recall", "--collection", collection).stdout
    assert "skipped" in table.splitlines()[1]


def test_prompt_recall_searches_with_the_prompt_redacted(hk: HookEnv) -> None:
    """The prompt is the auto-inject query: a key pasted into it is taken out before the query is
    embedded (a remote embedding provider would receive it), and counted under "query"."""
    hk.copy_memory()
    collection = hk.collection()
    assert hk.memsearch("index", str(hk.memory_dir), "--collection", collection).returncode == 0
    assert (
        hk.memsearch("config", "set", "plugins.claude-code.prompt_recall.auto_inject", "true").returncode == 0
    )
    key = "AKIA" + "Q3EGRB7XWN2PLM4T"  # an AWS access key id, joined so this file holds none
    prompt = f"which PDF renderer version did we pin? deploy with {key}"
    stdin = json.dumps({"prompt": prompt, "cwd": str(hk.project)})
    context = hook_json(hk.hook("claude-code", "prompt-submit", stdin))["hookSpecificOutput"][
        "additionalContext"
    ]
    assert "weasyprint" in context.lower()
    counts = json.loads((hk.home / ".memsearch" / "redactions.json").read_text(encoding="utf-8"))
    assert counts["query"] == {"aws-access-key": 1}


def test_prompt_recall_reads_no_time_phrase_in_a_prompt(hk: HookEnv) -> None:
    """A prompt is not a search query: its "today" limits the recalled notes to no day."""
    import datetime as dt

    hk.copy_memory()
    today = hk.memory_dir / f"{dt.date.today().isoformat()}.md"
    today.write_text(
        "### 09:00\n- Cleaned up the attic cupboard and sorted the winter boots.\n", encoding="utf-8"
    )
    collection = hk.collection()
    indexed = hk.memsearch("index", str(hk.memory_dir), "--collection", collection)
    assert indexed.returncode == 0, indexed.stderr
    for key, value in (("auto_inject", "true"), ("top_k", "2")):
        assert (
            hk.memsearch("config", "set", f"plugins.claude-code.prompt_recall.{key}", value).returncode == 0
        )
    prompt = "which PDF renderer version did we pin? I need it today"
    stdin = json.dumps({"prompt": prompt, "cwd": str(hk.project)})
    context = hook_json(hk.hook("claude-code", "prompt-submit", stdin))["hookSpecificOutput"][
        "additionalContext"
    ]
    assert "weasyprint" in context.lower()  # today's journal alone (the window) holds no renderer


def test_the_recalled_expand_command_works_as_printed_from_another_folder(hk: HookEnv) -> None:
    """The recall text tells the model how to expand a hit; copied as printed, with a hit's hash,
    it must reach this project's store, also when ``milvus.uri`` is a relative path (resolved in
    the project by the hook, and in whatever folder the model's shell is in by the command)."""
    hk.copy_memory()
    (hk.home / ".memsearch" / "config.toml").write_text(
        '[milvus]\nuri = ".memsearch/project.db"\n\n'
        "[plugins.claude-code.prompt_recall]\nauto_inject = true\ntop_k = 2\n",
        encoding="utf-8",
    )
    no_start = {"MEMSEARCH_SERVICE_AUTOSTART": "0"}  # this store has no service; start none
    indexed = hk.memsearch("index", str(hk.memory_dir), "--collection", hk.collection(), **no_start)
    assert indexed.returncode == 0, indexed.stderr
    stdin = json.dumps({"prompt": "which PDF renderer version did we pin?", "cwd": str(hk.project)})
    context = hook_json(hk.hook("claude-code", "prompt-submit", stdin, **no_start))["hookSpecificOutput"][
        "additionalContext"
    ]
    template = context.split("(expand one with `", 1)[1].split("`", 1)[0]
    store = hk.project / ".memsearch" / "project.db"
    assert template == f"memsearch expand <chunk_hash> --milvus-uri {store} --collection {hk.collection()}"
    chunk_hash = context.rsplit("(chunk_hash ", 1)[1].split(")", 1)[0]
    elsewhere = hk.project / "src" / "deep"
    elsewhere.mkdir(parents=True)
    argv = shlex.split(template.replace("<chunk_hash>", chunk_hash))
    proc = subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, cwd=elsewhere, env=hk.env(**no_start)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"Source: {hk.memory_dir}")


# --- stop: capture, summarise, journal --------------------------------------------------------


def test_claude_stop_summarises_with_claude_p_and_writes_the_journal(hk: HookEnv) -> None:
    transcript = claude_transcript(hk)
    proc = hk.hook("claude-code", "stop", claude_stop_stdin(hk, transcript), CLAUDECODE="1")
    assert hook_json(proc) == {}
    (call,) = hk.agent_calls()
    assert call["argv"] == [
        "-p",
        "--strict-mcp-config",
        "--tools",
        "",
        "--model",
        "haiku",
        "--no-session-persistence",
        "--no-chrome",
        "--settings",
        NO_HOOKS,
    ]
    assert call["env"] == {"MEMSEARCH_DISABLE": "1", "MEMSEARCH_NO_WATCH": "1", "CLAUDECODE": None}
    assert Path(str(call["cwd"])).resolve() != hk.project.resolve()  # no project hooks or CLAUDE.md
    assert str(call["stdin"]).startswith(load_prompt("summarize", agent_name="Claude Code"))
    check_golden("claude-code-summary-input.txt", summary_input(call))
    journal = hk.journal()
    assert "SECRET-TOOL-OUTPUT" not in journal + str(call["stdin"])  # tool output never travels
    check_golden(
        "claude-code-journal.md", normalize_times(substitute(journal, {"TRANSCRIPT": str(transcript)}))
    )
    assert len(list(hk.memory_dir.iterdir())) == 1
    assert json.loads((hk.memsearch_dir / ".index-state.json").read_text())["status"] == "ok"


def test_claude_stop_uses_safe_mode_when_claude_has_it(hk: HookEnv) -> None:
    transcript = claude_transcript(hk)
    help_text = "Usage: claude\n  --safe-mode  no hooks or plugins\n"
    hook_json(hk.hook("claude-code", "stop", claude_stop_stdin(hk, transcript), FAKE_CLAUDE_HELP=help_text))
    (call,) = hk.agent_calls()
    assert call["argv"][:2] == ["-p", "--safe-mode"]
    assert "--settings" not in call["argv"]  # not advertised by this release: not passed


def test_repeated_stop_for_the_same_turn_writes_one_entry(hk: HookEnv) -> None:
    stdin = claude_stop_stdin(hk, claude_transcript(hk))
    racers = [start_hook(hk, "claude-code", "stop", stdin) for _ in range(3)]
    for proc in racers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.strip() == "{}", err
    calls = len(hk.agent_calls())
    hook_json(hk.hook("claude-code", "stop", stdin))
    journal = hk.journal()
    assert journal.count("### ") == 1
    assert journal.count(f"turn:{CLAUDE_TURN}") == 1
    assert len(hk.agent_calls()) == calls  # the repeat was recognised before paying for a summary


@pytest.mark.parametrize("mode", ["fail", "empty", "missing"])
def test_stop_falls_back_to_a_plain_extract(hk: HookEnv, mode: str) -> None:
    transcript = claude_transcript(hk)
    extra = {"PATH": hookkit.SYSTEM_PATH} if mode == "missing" else {"FAKE_AGENT_MODE": mode}
    proc = hk.hook("claude-code", "stop", claude_stop_stdin(hk, transcript), **extra)
    assert hook_json(proc) == {}
    assert "wrote a plain extract" in proc.stderr
    bullets = [line for line in hk.journal().splitlines() if line.startswith("- ")]
    assert bullets == [
        "- User asked: Switch totals.py to Decimal with per-line rounding and run the billing tests.",
        "- Claude Code: Totals now use Decimal with per-line rounding; 41 billing tests pass, test_pdf "
        "needed its expected value updated to 10.07.",
    ]


def test_stop_keeps_only_bullet_lines_of_a_chatty_answer(hk: HookEnv) -> None:
    hook_json(
        hk.hook("claude-code", "stop", claude_stop_stdin(hk, claude_transcript(hk)), FAKE_AGENT_MODE="chatty")
    )
    journal = hk.journal()
    assert "Sure!" not in journal and "Not a heading" not in journal and "Let me know" not in journal
    assert journal.count("\n- ") == 2


def test_stop_uses_the_configured_provider_first(hk: HookEnv, fake_llm: FakeLLMServer) -> None:
    hk.write_config(
        '[plugins.claude-code.summarize]\nprovider = "team"\n\n'
        '[llm.providers.team]\ntype = "openai-compatible"\nmodel = "notes-1"\n'
        f'base_url = "{fake_llm.url}/v1"\n'
    )
    fake_llm.reply("- User asked for Decimal totals.\n- The provider wrote these notes.")
    stdin = claude_stop_stdin(hk, claude_transcript(hk))
    hook_json(hk.hook("claude-code", "stop", stdin))
    assert "- The provider wrote these notes." in hk.journal()
    assert hk.agent_calls() == []  # the host CLI was not needed
    (request,) = fake_llm.requests
    assert request.body["model"] == "notes-1"
    assert "[User]: Switch totals.py to Decimal" in request.prompt
    # The provider failing: the host's own summariser takes over.
    fake_llm.fail(500)
    (hk.memory_dir / f"{time.strftime('%Y-%m-%d')}.md").unlink()
    proc = hk.hook("claude-code", "stop", stdin)
    assert "summary provider failed" in proc.stderr
    assert "- Claude Code changed the code and ran the tests." in hk.journal()


def test_the_summaries_model_calls_are_in_the_recall_log(hk: HookEnv, fake_llm: FakeLLMServer) -> None:
    """Each summary's model call is logged with its tokens (never its text): the provider's, a
    failed one, and the host CLI that took over; ``stats --recall`` sums them per purpose."""
    from memsearch.agent.hooks.collection import derive_collection

    hk.write_config(
        '[plugins.claude-code.summarize]\nprovider = "team"\n\n'
        '[llm.providers.team]\ntype = "openai-compatible"\nmodel = "notes-1"\n'
        f'base_url = "{fake_llm.url}/v1"\n'
    )
    fake_llm.reply("- User asked for Decimal totals.\n- The provider wrote these notes.")
    stdin = claude_stop_stdin(hk, claude_transcript(hk))
    hook_json(hk.hook("claude-code", "stop", stdin))
    fake_llm.fail(500)
    (hk.memory_dir / f"{time.strftime('%Y-%m-%d')}.md").unlink()
    hook_json(hk.hook("claude-code", "stop", stdin))
    collection = derive_collection(hk.project)
    log = (hk.home / ".memsearch" / "recall" / f"{collection}.jsonl").read_text(encoding="utf-8")
    calls = [e for e in map(json.loads, log.splitlines()) if e["event"] == "llm"]
    assert [(c["purpose"], c["backend"], c["ok"]) for c in calls] == [
        ("summary", "provider:team", True),
        ("summary", "provider:team", False),
        ("summary", "native:claude-code", True),
    ]
    assert all(c["prompt_tokens"] > 50 and c["host"] == "claude-code" for c in calls)
    assert calls[0]["answer_tokens"] > 5 and calls[1]["answer_tokens"] == 0
    assert "Decimal" not in log  # tokens, never the text
    stats = hk.memsearch("stats", "--recall", "-j", "--collection", collection)
    (summary,) = json.loads(stats.stdout)["llm"]
    assert (summary["purpose"], summary["calls"], summary["failed"]) == ("summary", 3, 1)


def test_stop_does_nothing_when_there_is_nothing_to_record(hk: HookEnv) -> None:
    transcript = claude_transcript(hk)
    active = json.dumps(
        {"transcript_path": str(transcript), "stop_hook_active": True, "cwd": str(hk.project)}
    )
    assert hook_json(hk.hook("claude-code", "stop", active)) == {}
    missing = json.dumps({"transcript_path": str(hk.root / "gone.jsonl"), "cwd": str(hk.project)})
    assert hook_json(hk.hook("claude-code", "stop", missing)) == {}
    only_system = hk.root / "system-only.jsonl"
    only_system.write_text('{"type":"system","message":{"content":"start"}}\n')
    empty_turn = json.dumps({"transcript_path": str(only_system), "cwd": str(hk.project)})
    assert hook_json(hk.hook("claude-code", "stop", empty_turn)) == {}
    for garbage in ("", "not json at all", "[1, 2]"):
        proc = hk.hook("claude-code", "stop", garbage)
        assert hook_json(proc) == {}
        assert garbage == "" or "ignored it" in proc.stderr
    hk.write_config("[plugins.claude-code.summarize]\nenabled = false\n")
    assert hook_json(hk.hook("claude-code", "stop", claude_stop_stdin(hk, transcript))) == {}
    assert hk.journal() == "" and hk.agent_calls() == []


def test_nested_agent_never_reenters_the_plugin(hk: HookEnv) -> None:
    stdin = claude_stop_stdin(hk, claude_transcript(hk))
    proc = hk.hook(
        "claude-code",
        "stop",
        stdin,
        FAKE_AGENT_MODE="reenter",
        FAKE_REENTER_PLATFORM="claude-code",
        FAKE_REENTER_STDIN=stdin,
    )
    assert hook_json(proc) == {}
    (call,) = hk.agent_calls()
    assert call["nested_stdout"].strip() == "{}"
    assert hk.journal().count("### ") == 1


def test_disable_answers_at_once_without_reading_stdin(hk: HookEnv) -> None:
    for platform, event in (("claude-code", "session-start"), ("claude-code", "stop"), ("codex", "stop")):
        proc = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "hook", platform, event],
            stdin=subprocess.PIPE,  # left open, like a host that never closes the pipe
            stdout=subprocess.PIPE,
            text=True,
            cwd=hk.project,
            env=hk.env(MEMSEARCH_DISABLE="1"),
        )
        start = time.perf_counter()
        out = proc.stdout.readline() if proc.stdout else ""
        proc.wait(timeout=10)
        assert out.strip() == "{}"
        assert time.perf_counter() - start < 1.5  # well under the 2 s stdin deadline
        if proc.stdin:
            proc.stdin.close()
        if proc.stdout:
            proc.stdout.close()
    assert not hk.memsearch_dir.exists()


def test_stdin_left_open_by_the_host_does_not_hang(hk: HookEnv) -> None:
    hk.copy_memory()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "hook", "claude-code", "prompt-submit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=hk.project,
        env=hk.env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"prompt": "what did we pin for the PDF renderer?", "cwd": str(hk.project)}))
    proc.stdin.flush()  # the JSON is complete but the pipe stays open
    out = proc.stdout.readline()
    proc.wait(timeout=10)
    proc.stdin.close()
    proc.stdout.close()
    assert "additionalContext" in json.loads(out)["hookSpecificOutput"]


def test_unknown_platform_or_event_is_a_clear_error(hk: HookEnv) -> None:
    proc = hk.hook("cursor", "stop", "{}")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "Error: unknown platform 'cursor'. Hint: valid platforms: claude-code, codex, dsh, openclaw, "
        "opencode"
    )
    proc = hk.hook("openclaw", "session-end", "{}")
    assert proc.returncode == 2
    assert "openclaw has no hook event 'session-end'" in proc.stderr
    assert hook_json(hk.hook("claude-code", "UserPromptSubmit", "{}")) == {}  # host spelling accepted


def test_index_failure_keeps_the_journal_entry(tmp_path: Path) -> None:
    world = HookEnv(tmp_path / "t", None, extra_env={SYNC: "1"})  # no service: the hook opens the store
    try:
        blocker = world.root / "direct"
        blocker.write_text("a file where the database folder should be")
        proc = world.hook("claude-code", "stop", claude_stop_stdin(world, claude_transcript(world)))
        assert hook_json(proc) == {}
        assert "journal entry saved but not indexed" in proc.stderr
        assert f"turn:{CLAUDE_TURN}" in world.journal()
        assert json.loads((world.memsearch_dir / ".index-state.json").read_text())["status"] == "error"
    finally:
        world.cleanup()


# --- Codex ------------------------------------------------------------------------------------


def test_codex_stop_summarises_with_codex_exec(hk: HookEnv) -> None:
    rollout = codex_rollout(hk)
    stdin = load_stdin("codex-stop.json", TRANSCRIPT=str(rollout), CWD=str(hk.project))
    assert hook_json(hk.hook("codex", "stop", stdin, MEMSEARCH_HOOK_SYNC="1")) == {}
    (call,) = hk.agent_calls()
    argv = call["argv"]
    out_file = argv[argv.index("-o") + 1]
    assert argv == [
        "exec",
        "--ephemeral",
        "--skip-git-repo-check",
        "-s",
        "read-only",
        "-c",
        "features.hooks=false",
        "-c",
        'model_reasoning_effort="low"',
        "-m",
        "gpt-5.1-codex-mini",
        "-o",
        out_file,
        "-",
    ]
    assert call["env"]["MEMSEARCH_DISABLE"] == "1"
    assert str(call["stdin"]).startswith(load_prompt("summarize", agent_name="Codex"))
    check_golden("codex-summary-input.txt", summary_input(call))
    journal = hk.journal()
    assert "codex: thinking" not in journal and "SECRET-TOOL-OUTPUT" not in journal
    check_golden("codex-journal.md", normalize_times(substitute(journal, {"ROLLOUT": str(rollout)})))
    hook_json(hk.hook("codex", "stop", stdin, MEMSEARCH_HOOK_SYNC="1"))  # repeated Stop
    assert hk.journal().count("### ") == 1


def test_codex_0171_stop_summarises_question_and_answer(hk: HookEnv) -> None:
    """A rollout written by Codex 0.171.0 (messages only in item_completed events): the summariser
    gets the user's question, not just the final answer."""
    rollout = codex_rollout(hk, Path(__file__).parent / "fixtures" / "transcripts" / "codex-0171.jsonl")
    stdin = json.dumps(
        {
            "session_id": "01a231f6-8914-7693-8fcc-b5adb5df6c5b",
            "turn_id": "01a231f6-8929-7101-907a-d32786fd9fff",
            "transcript_path": str(rollout),
            "cwd": str(hk.project),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            "last_assistant_message": "The tool returned: hello-from-tool",
        }
    )
    assert hook_json(hk.hook("codex", "stop", stdin, MEMSEARCH_HOOK_SYNC="1")) == {}
    (call,) = hk.agent_calls()
    text = str(call["stdin"])
    assert "[User]: please list files here" in text
    assert "[Codex ran exec_command]: echo hello-from-tool; ls" in text
    assert "turn_id:01a231f6-8929-7101-907a-d32786fd9fff" in hk.journal()


def test_codex_stop_without_a_rollout_uses_history(hk: HookEnv) -> None:
    codex_home = hk.home / ".codex"
    codex_home.mkdir()
    history = [
        {"session_id": "other", "ts": 1, "text": "unrelated question"},
        {"session_id": CODEX_SESSION_ID, "ts": 2, "text": "Make the CSV exporter quote every field"},
    ]
    (codex_home / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    stdin = load_stdin("codex-stop.json", TRANSCRIPT="", CWD=str(hk.project)).replace('""', "null", 1)
    assert json.loads(stdin)["transcript_path"] is None
    hook_json(hk.hook("codex", "stop", stdin, MEMSEARCH_HOOK_SYNC="1", PATH=hookkit.SYSTEM_PATH))
    journal = hk.journal()
    assert f"<!-- session:{CODEX_SESSION_ID} rollout: turn_id:{CODEX_TURN_ID} -->" in journal
    assert "- User asked: Make the CSV exporter quote every field" in journal
    assert "- Codex: The exporter now passes quoting=csv.QUOTE_ALL" in journal


# --- end to end: capture → search → expand → transcript ---------------------------------------


def test_claude_code_end_to_end(hk: HookEnv) -> None:
    transcript = claude_transcript(hk)
    hook_json(hk.hook("claude-code", "stop", claude_stop_stdin(hk, transcript)))
    collection = hk.collection()
    found = hk.memsearch(
        "search", "Decimal totals changed code tests", "-j", "-k", "3", "--collection", collection
    )
    assert found.returncode == 0, found.stderr
    (hit,) = [h for h in json.loads(found.stdout) if "Switch totals.py" in h["content"]]
    assert hit["source"].startswith(str(hk.memory_dir))
    expanded = hk.memsearch("expand", hit["chunk_hash"], "-j", "--collection", collection)
    assert expanded.returncode == 0, expanded.stderr
    anchor = json.loads(expanded.stdout)["anchor"]
    assert anchor == {"session": CLAUDE_SESSION_ID, "turn": CLAUDE_TURN, "transcript": str(transcript)}
    shown = hk.memsearch("transcript", anchor["transcript"], "--turn", anchor["turn"], "--context", "1", "-j")
    assert shown.returncode == 0, shown.stderr
    turns = json.loads(shown.stdout)
    assert any(
        t["uuid"] == CLAUDE_TURN and t["text"].startswith("Switch totals.py to Decimal") for t in turns
    )


def test_codex_end_to_end_with_the_detached_worker(hk: HookEnv) -> None:
    rollout = codex_rollout(hk)
    stdin = load_stdin("codex-stop.json", TRANSCRIPT=str(rollout), CWD=str(hk.project))
    start = time.perf_counter()
    assert hook_json(hk.hook("codex", "stop", stdin, **{SYNC: "0"})) == {}
    print(f"codex stop returned after {(time.perf_counter() - start) * 1000:.0f} ms (worker detached)")
    collection = hk.collection("codex")

    def found() -> list[dict[str, object]]:
        proc = hk.memsearch("search", "CSV exporter quote every field", "-j", "--collection", collection)
        hits = json.loads(proc.stdout) if proc.returncode == 0 else []
        return [h for h in hits if f"turn_id:{CODEX_TURN_ID}" in str(h["content"])]

    (hit,) = wait_for(found, timeout=60, interval=0.3)
    expanded = hk.memsearch("expand", str(hit["chunk_hash"]), "-j", "--collection", collection)
    anchor = json.loads(expanded.stdout)["anchor"]
    assert anchor == {"session": CODEX_SESSION_ID, "rollout": str(rollout)}
    shown = hk.memsearch("transcript", anchor["rollout"], "--turn", CODEX_TURN_ID, "-j")
    assert shown.returncode == 0, shown.stderr
    assert any(t["text"] == "Make the CSV exporter quote every field" for t in json.loads(shown.stdout))
    assert not (hk.memsearch_dir / ".worker.log").read_text().strip()  # the worker reported no problem


def test_codex_session_keeps_a_watch_until_session_end(hk: HookEnv) -> None:
    """Codex 0.171.0 sends SessionEnd (also after `codex exec`): the session's watch indexes the
    journals and is stopped when the session ends."""
    hk.copy_memory()
    stdin = load_stdin("codex-session-start.json", TRANSCRIPT="", CWD=str(hk.project))
    hook_json(hk.hook("codex", "session-start", stdin))
    from memsearch.agent.hooks import processes

    pid = processes.read_pid(hk.memsearch_dir / processes.WATCH_PID)
    tail = ["memsearch", "watch", str(hk.memory_dir)]
    assert pid is not None and processes.is_running(pid, tail)
    found = wait_for(
        lambda: (
            "weasyprint"
            in hk.memsearch(
                "search", "PDF renderer version pinned", "-j", "--collection", hk.collection("codex")
            ).stdout
        ),
        timeout=60,
        interval=1.0,
    )
    assert found
    session = json.loads(stdin)["session_id"]
    end = {"session_id": session, "cwd": str(hk.project), "hook_event_name": "SessionEnd", "reason": "other"}
    hook_json(hk.hook("codex", "SessionEnd", json.dumps(end)))
    wait_for(lambda: not processes.is_running(pid, tail), timeout=10)
    assert not (hk.memsearch_dir / processes.WATCH_PID).exists()


# --- the watch a Claude Code session keeps ----------------------------------------------------


def test_watch_is_shared_by_sessions_and_only_ours_is_stopped(hk: HookEnv) -> None:
    from memsearch.agent.hooks import processes

    def start(session: str) -> None:
        hook_json(
            hk.hook(
                "claude-code", "session-start", json.dumps({"session_id": session, "cwd": str(hk.project)})
            )
        )

    def end(session: str) -> None:
        hook_json(
            hk.hook("claude-code", "session-end", json.dumps({"session_id": session, "cwd": str(hk.project)}))
        )

    tail = ["memsearch", "watch", str(hk.memory_dir)]
    start("session-a")
    pid = processes.read_pid(hk.memsearch_dir / processes.WATCH_PID)
    assert pid is not None and processes.is_running(pid, tail)
    wait_for(lambda: "Watching" in (hk.memsearch_dir / ".watch.log").read_text(), timeout=60)
    start("session-b")
    assert processes.read_pid(hk.memsearch_dir / processes.WATCH_PID) == pid  # reused, not restarted
    end("session-a")
    assert processes.is_running(pid, tail)  # session b still uses it
    end("session-b")
    wait_for(lambda: not processes.is_running(pid, tail), timeout=10)
    assert not (hk.memsearch_dir / processes.WATCH_PID).exists()

    # A pid file naming a process that is not our watch (a recycled pid): never signalled.
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        (hk.memsearch_dir / processes.WATCH_PID).write_text(f"{stranger.pid}\n")
        (hk.memsearch_dir / processes.WATCH_SESSIONS).write_text("session-c\n")
        end("session-c")
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_a_watch_user_is_one_process_not_a_pid() -> None:
    from memsearch.agent.hooks.processes import WatchUser

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        user = WatchUser.of("session-a", sleeper.pid)
        assert user.alive() and WatchUser.parse(user.line()) == user
        assert not WatchUser("session-a", sleeper.pid, user.start + "1").alive()  # a recycled pid
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not user.alive()
    legacy = WatchUser.parse("session-c")  # a line written before processes were recorded
    assert legacy == WatchUser("session-c") and not legacy.alive()


def test_the_host_is_the_agent_above_the_hook_shells() -> None:
    """Claude Code 2.1.197 runs ``/bin/sh -c 'bash run.sh <event>'``; run.sh runs memsearch (as
    a child, to answer a usage error itself; it used to exec it)."""
    code = "from memsearch.agent.hooks.processes import host_process; print(host_process())"
    for probe in (f"exec {sys.executable} -c '{code}'", f"{sys.executable} -c '{code}'; exit $?"):
        shells = ["sh", "-c", f"bash -c {shlex.quote(probe)}; true"]
        out = subprocess.run(shells, capture_output=True, text=True)
        assert out.stdout.strip() == str(os.getpid()), out.stderr


def test_the_watch_guard_fires_once_its_last_user_is_gone(tmp_path: Path) -> None:
    import threading

    from memsearch.agent.hooks import processes

    users = tmp_path / processes.WATCH_SESSIONS
    pid_file = tmp_path / processes.WATCH_PID
    pid_file.write_text(f"{os.getpid()}\n")  # the guard runs in the watch: the pid file names it
    sleeper = subprocess.Popen(["sleep", "60"])
    users.write_text(processes.WatchUser.of("session-a", sleeper.pid).line() + "\nsession-legacy\n")
    fired = threading.Event()
    try:
        processes.guard_watch(users, fired.set, poll=0.05, grace=0.3)
        assert not fired.wait(1.0)  # a live host keeps the watch
        sleeper.kill()
        sleeper.wait()
        assert fired.wait(5.0)
    finally:
        sleeper.kill()
    assert not pid_file.exists() and not users.exists()  # the next SessionStart starts a new watch


def test_a_capture_worker_holds_the_watch_until_it_is_done(hk: HookEnv) -> None:
    """``claude -p``: the host exits right after Stop; the watch must serve the worker, then go."""
    from memsearch.agent.hooks import processes

    tail = ["memsearch", "watch", str(hk.memory_dir)]
    host = subprocess.Popen(["sleep", "60"])
    try:
        user = processes.WatchUser.of("session-a", host.pid)
        argv = processes.watch_argv(hk.memory_dir, "ms_t", "t", hk.memsearch_dir / processes.WATCH_SESSIONS)
        hk.memory_dir.mkdir(parents=True, exist_ok=True)
        pid, started = processes.retain_watch(hk.memsearch_dir, hk.memory_dir, user, argv)
        assert started
        # /proc/<pid>/cmdline is the forking interpreter's (or empty) until the child has exec'd
        wait_for(lambda: processes.is_running(pid, tail), timeout=10)
        worker = subprocess.Popen(["sleep", "60"])
        held = processes.WatchUser.of("capture-1", worker.pid)
        assert processes.hold_watch(hk.memsearch_dir, hk.memory_dir, held)
        host.kill()
        host.wait()
        assert not processes.release_watch(hk.memsearch_dir, hk.memory_dir, "session-a")  # worker left
        worker.kill()
        worker.wait()
        assert processes.release_watch(hk.memsearch_dir, hk.memory_dir, "capture-1")
        assert not processes.is_running(pid, tail)
    finally:
        host.kill()


def test_claude_stop_before_the_transcript_is_written(hk: HookEnv) -> None:
    """Claude Code 2.1.197 writes the transcript after Stop returns (in ``claude -p`` the file does
    not exist yet): the detached worker waits for the turn Stop named, then journals it."""
    transcript = hk.root / "claude-projects" / f"{CLAUDE_SESSION_ID}.jsonl"
    stdin = json.loads(claude_stop_stdin(hk, transcript))
    stdin["last_assistant_message"] = "Totals now use Decimal with per-line rounding"
    start = time.perf_counter()
    assert hook_json(hk.hook("claude-code", "stop", json.dumps(stdin), **{SYNC: "0"})) == {}
    assert time.perf_counter() - start < 10
    time.sleep(0.5)
    assert not hk.memory_dir.exists() or not list(hk.memory_dir.glob("*.md"))  # still waiting
    claude_transcript(hk)
    wait_for(lambda: hk.memory_dir.exists() and f"turn:{CLAUDE_TURN}" in hk.journal(), timeout=60)
    assert "Decimal" in hk.journal()
    assert not (hk.memsearch_dir / ".worker.log").read_text().strip()


# --- user text is data, never code ------------------------------------------------------------

HOSTILE = (
    "Run $(touch {marker}) and `touch {marker}` then say \"done\" 'ok' $HOME\nsecond line; rm -rf nothing"
)


@pytest.mark.parametrize("platform", ["claude-code", "codex"])
@pytest.mark.parametrize("summariser", ["agent", "extract"])
def test_shell_metacharacters_in_a_message_are_stored_as_text(
    hk: HookEnv, tmp_path: Path, platform: str, summariser: str
) -> None:
    marker = tmp_path / f"pwned-{platform}-{summariser}"
    message = HOSTILE.format(marker=marker)
    if platform == "claude-code":
        lines = [
            {"type": "user", "uuid": "evil-1", "message": {"role": "user", "content": message}},
            {
                "type": "assistant",
                "uuid": "evil-2",
                "message": {
                    "id": "m",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "I will not run that."}],
                },
            },
        ]
        source = hk.root / "evil.jsonl"
        source.write_text("".join(json.dumps(line) + "\n" for line in lines))
        stdin = claude_stop_stdin(hk, claude_transcript(hk, source, "evil-session"))
    else:
        lines = [
            {
                "timestamp": "t",
                "type": "event_msg",
                "payload": {"type": "task_started", "turn_id": "evil-turn"},
            },
            {"timestamp": "t", "type": "event_msg", "payload": {"type": "user_message", "message": message}},
            {
                "timestamp": "t",
                "type": "event_msg",
                "payload": {"type": "agent_message", "message": "I will not run that."},
            },
        ]
        source = hk.root / "evil-rollout.jsonl"
        source.write_text("".join(json.dumps(line) + "\n" for line in lines))
        stdin = json.dumps(
            {
                "session_id": "evil-session",
                "turn_id": "evil-turn",
                "transcript_path": str(source),
                "cwd": str(hk.project),
                "last_assistant_message": "I will not run that.",
            }
        )
    extra = {"PATH": hookkit.SYSTEM_PATH} if summariser == "extract" else {}
    proc = hk.hook(platform, "stop", stdin, MEMSEARCH_HOOK_SYNC="1", **extra)
    assert hook_json(proc) == {}
    assert not marker.exists()
    journal = hk.journal()
    first_line = f"- User asked: Run $(touch {marker}) and `touch {marker}` then say \"done\" 'ok' $HOME"
    assert first_line in journal  # quotes, backticks and $ kept as typed
    if summariser == "extract":
        assert first_line + " second line; rm -rf nothing\n" in journal  # newline folded, one bullet
    else:
        (call,) = hk.agent_calls()
        assert f"[User]: {message}" in str(call["stdin"])  # the newline arrived as a newline
    assert not marker.exists()


# --- many writers at once ---------------------------------------------------------------------

_WRITER = r"""
import sys, threading
from memsearch.engine.journal import JournalEntry, append_entry
memory, proc, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
barrier = threading.Barrier(threads)
def write(t):
    barrier.wait()
    session = f"s{(proc * threads + t) % 7}"
    entry = JournalEntry(
        [f"- entry p{proc} t{t} " + "x" * 600 + " end", f"- second bullet of p{proc} t{t}"],
        {"session": session, "turn": f"p{proc}-t{t}", "transcript": f"/tmp/{session}.jsonl"},
        ("session", "turn"),
    )
    assert append_entry(memory, entry).written
workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
for w in workers: w.start()
for w in workers: w.join()
"""


def test_one_hundred_concurrent_captures_stay_intact(hk: HookEnv) -> None:
    from memsearch.engine.journal import parse_anchor_fields

    processes_, threads, hooks = 4, 24, 4
    stdins = []
    for i in range(hooks):
        source = hk.root / f"src-{i}.jsonl"
        text = CLAUDE_SESSION.read_text().replace(CLAUDE_TURN, f"hook-turn-{i}")
        source.write_text(text)
        stdins.append(claude_stop_stdin(hk, claude_transcript(hk, source, f"hook-session-{i}")))
    hk.memory_dir.mkdir(parents=True)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(hk.memory_dir), str(p), str(threads)], env=hk.env()
        )
        for p in range(processes_)
    ]
    stops = [start_hook(hk, "claude-code", "stop", stdin) for stdin in stdins]
    for proc in stops:
        out, err = proc.communicate(timeout=120)
        assert out.strip() == "{}", err
    for proc in writers:
        assert proc.wait(timeout=120) == 0
    journal = hk.journal()
    entries = journal.split("\n### ")[1:]
    assert len(entries) == processes_ * threads + hooks == 100
    keys = set()
    for entry in entries:
        stamp, anchor, *bullets = entry.split("\n## Session ")[0].strip("\n").split("\n")
        fields = parse_anchor_fields(anchor)
        assert fields is not None and len(stamp) == 5, entry
        keys.add((fields["session"], fields["turn"]))
        if fields["turn"].startswith("p"):
            proc_id, thread_id = fields["turn"][1:].split("-t")
            assert bullets == [
                f"- entry p{proc_id} t{thread_id} " + "x" * 600 + " end",
                f"- second bullet of p{proc_id} t{thread_id}",
            ]
        else:
            assert bullets[0].startswith("- User asked: Switch totals.py to Decimal with per-line rounding")
    assert len(keys) == 100
    for section in journal.split("\n## Session ")[1:]:  # a section never mixes sessions
        sessions = {f["session"] for line in section.splitlines() if (f := parse_anchor_fields(line))}
        assert len(sessions) == 1, section
