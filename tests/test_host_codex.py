"""memsearch inside the real Codex CLI (0.171.0 from npm), talking to a fake model API.

Installed exactly as docs/platforms/codex.md says (the commands are read out of its Install block),
then driven one-shot (``codex exec``) and interactively (the TUI in a pseudo-terminal). Asserted
for each: the hooks fire, a journal entry with its anchor appears, search / expand / transcript
find it, the injected memory reaches the model, the recall skill is offered and a shell call of
``memsearch search`` round-trips, the nested ``codex exec`` summariser sees question and answer,
and no process of the session is left behind.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_model_api import Answer, FakeModelAPI, ModelCall, running_model_api
from fixtures.privacy import corpus
from real_hosts import (
    HOSTS,
    Terminal,
    World,
    check_secrets_kept,
    kill_world,
    leftovers,
    make_world,
    parrot_summaries,
    plant_journal,
    seed_journals,
    wait_for,
)

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "platforms" / "codex.md"
VERSION = HOSTS["codex"].version

QUESTION = "Remember for deploys: the staging database listens on port 6543."
RECALL = "Look up in the project memory which port the staging database uses."
#: The start of the memory-recall skill's description, which Codex lists to the model.
SKILL_BLURB = "Search the notes memsearch keeps of earlier Codex sessions"
SUMMARY = [
    "- User said the staging database listens on port 6543 (deploy setting).",
    "- Codex acknowledged the staging port 6543.",
]


# --- helpers ------------------------------------------------------------------------------------


def doc_install_commands() -> list[str]:
    """The Install block of the Codex doc, with the two steps a test cannot take verbatim replaced
    as the doc allows: memsearch is already installed (this checkout's venv is on PATH) and the
    checkout (``/path/to/memsearch``) is this one."""
    section = DOC.read_text().split("## Install", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "no bash block in the Install section"
    commands = []
    for line in block.group(1).splitlines():
        command = line.split("  #", 1)[0].strip()
        if not command:
            continue
        if command.startswith("uv tool install /path/to/memsearch"):
            commands.append("command -v memsearch")  # installed: the venv of this checkout
        else:
            commands.append(command.replace("/path/to/memsearch", shlex.quote(str(ROOT))))
    return commands


def codex_config(api: FakeModelAPI, project: Path) -> str:
    """A user's Codex config: a custom provider (the fake API), the project trusted, no update check."""
    return (
        'model = "fake-model"\n'
        'model_provider = "fake"\n'
        "check_for_update_on_startup = false\n\n"
        "[model_providers.fake]\n"
        'name = "fake"\n'
        f'base_url = "{api.url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "FAKE_MODEL_KEY"\n\n'
        f'[projects."{project}"]\n'
        'trust_level = "trusted"\n'
    )


def is_summary(call: ModelCall) -> bool:
    return "Transcript:" in call.user_text and "=== Transcript of a conversation" in call.user_text


@pytest.fixture
def model_api() -> Iterator[FakeModelAPI]:
    with running_model_api() as api:
        yield api


@pytest.fixture
def world(tmp_path: Path, model_api: FakeModelAPI) -> Iterator[World]:
    w = make_world(tmp_path, "codex", FAKE_MODEL_KEY="sk-fake")
    codex_home = Path(w.env["CODEX_HOME"])
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(codex_config(model_api, w.project))
    model_api.on(is_summary, Answer(text="\n".join(SUMMARY)))
    try:
        yield w
    finally:
        kill_world(w)


def install(world: World) -> str:
    """Run the doc's install commands in one shell, as a user would paste them."""
    script = " && ".join(doc_install_commands())
    proc = world.run(["bash", "-c", script], timeout=120)
    assert proc.returncode == 0, f"{script}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def memsearch(world: World, *args: str) -> str:
    proc = world.run(["memsearch", *args], timeout=120)
    assert proc.returncode == 0, f"memsearch {args}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def journal(world: World) -> str:
    folder = world.project / ".memsearch" / "memory"
    return "".join(p.read_text() for p in sorted(folder.glob("*.md"))) if folder.is_dir() else ""


def entries_with(world: World, text: str) -> list[str]:
    return [e for e in journal(world).split("\n### ")[1:] if text in e]


ANCHOR = re.compile(r"<!-- session:(\S+) rollout:(\S+) turn_id:(\S+) -->")


def check_recall_chain(world: World, collection: str, needle: str, question: str, answer: str) -> None:
    """search finds the entry, expand shows its anchor, transcript renders that turn."""
    hits = json.loads(memsearch(world, "search", needle, "--json-output", "--collection", collection))
    hit = next(h for h in hits if "6543" in h["content"])
    expanded = memsearch(world, "expand", hit["chunk_hash"], "--collection", collection)
    anchor = ANCHOR.search(expanded)
    assert anchor, expanded
    _session, rollout, turn_id = anchor.groups()
    turns = json.loads(memsearch(world, "transcript", rollout, "--turn", turn_id, "--json-output"))
    texts = [t["text"] for t in turns]
    assert question in texts and any(answer in t for t in texts), texts


def script_recall(world: World, model_api: FakeModelAPI, collection: str) -> None:
    """The fake model follows the installed recall skill: its first answer to RECALL is a shell call
    of the search command the skill shows (with the real path the installer wrote), then it answers
    from the tool's output. Requests without tools (Codex's task-title request) are not scripted."""
    skill = (Path(world.env["HOME"]) / ".agents" / "skills" / "memory-recall" / "SKILL.md").read_text()
    memsearch_bin = re.search(r"^(\S+) search ", skill, re.MULTILINE)
    assert memsearch_bin, skill
    command = (
        f'{memsearch_bin.group(1)} search "staging database port" --json-output --collection {collection}'
    )

    def asks(call: ModelCall) -> bool:
        return RECALL in call.user_text and "exec_command" in call.tools

    model_api.on(
        lambda c: asks(c) and not c.after_tool, Answer(tool="exec_command", arguments={"cmd": command})
    )
    model_api.on(lambda c: asks(c) and c.after_tool, Answer(text="Recalled: port 6543."))


# --- one-shot -----------------------------------------------------------------------------------


def test_codex_exec_captures_recalls_and_leaves_nothing_running(
    world: World, model_api: FakeModelAPI
) -> None:
    # 1. the documented install, verbatim; it records trust through Codex itself
    out = install(world)
    assert "hooks trusted in Codex's config.toml" in out, out
    assert "all trusted, Codex runs them" in out  # the doc's `memsearch hook codex doctor` line

    # 2./3. a turn: the hooks fire, the detached worker summarises and writes the journal
    first = world.run(["codex", "exec", QUESTION], timeout=120)
    assert first.returncode == 0, first.stderr
    assert f"OpenAI Codex v{VERSION}" in first.stderr
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        assert f"hook: {event} Completed" in first.stderr, first.stderr
    (entry,) = wait_for(lambda: entries_with(world, "6543"), 90, "the journal entry")
    assert ANCHOR.search(entry), entry
    assert SUMMARY[0] in entry

    # 7. the nested `codex exec` summariser got the question and the answer
    (summary,) = [c for c in model_api.snapshot() if is_summary(c)]
    assert f"[User]: {QUESTION}" in summary.user_text
    assert f"[Codex]: Done. You said: {QUESTION}" in summary.user_text
    # 8. nothing left: not the worker, not the session's watch, not the nested codex
    assert leftovers(world, wait=60) == {}

    # 4. progressive disclosure over the new entry
    collection = memsearch(world, "hook", "codex", "collection").strip()
    check_recall_chain(world, collection, "staging database port", QUESTION, "Done. You said")

    # 5./6. a second session: memory injected, the skill offered, a shell call of memsearch search
    script_recall(world, model_api, collection)
    second = world.run(["codex", "exec", "-s", "danger-full-access", RECALL], timeout=120)
    assert second.returncode == 0, second.stderr
    calls = [c for c in model_api.snapshot() if RECALL in c.everything and not is_summary(c)]
    opening = calls[0]
    assert "User said the staging database listens on port 6543" in opening.everything  # SessionStart
    assert "[memsearch] Notes from past sessions" in opening.everything  # prompt hint
    assert "memory-recall" in opening.everything and SKILL_BLURB in opening.everything  # skill listed
    assert "exec_command" in opening.tools
    result = next(c for c in calls if c.after_tool and c.tools)
    assert "6543" in (result.messages[-1].tool_result or ""), result.messages[-1]
    assert "chunk_hash" in (result.messages[-1].tool_result or "")
    wait_for(lambda: len(entries_with(world, "6543")) > 1, 90, "the second turn's entry")
    assert leftovers(world, wait=60) == {}
    assert model_api.unknown == []  # Codex called nothing the fake API does not know


def test_secrets_never_reach_memory(world: World, model_api: FakeModelAPI) -> None:
    """The secrets corpus in the prompt, in a shell command's output and in the answer of a real
    ``codex exec`` turn: captured, summarised by the nested ``codex exec``, and not one value on
    disk under ``.memsearch`` or in the summariser's request."""
    planted = plant_journal(world)
    install(world)
    (world.project / "deploy.env").write_text(corpus.TOOL_OUTPUT)

    def asks(call: ModelCall) -> bool:
        return corpus.PROMPT in call.user_text and "exec_command" in call.tools and not is_summary(call)

    model_api.on(
        lambda c: asks(c) and not c.after_tool,
        Answer(tool="exec_command", arguments={"cmd": "cat deploy.env"}),
    )
    model_api.on(lambda c: asks(c) and c.after_tool, Answer(text=corpus.REPLY))
    parrot_summaries(model_api, is_summary, "\n".join(SUMMARY))
    run = world.run(["codex", "exec", "-s", "danger-full-access", corpus.PROMPT], timeout=120)
    assert run.returncode == 0, run.stderr
    wait_for(lambda: entries_with(world, SUMMARY[0]), 90, "the journal entry")
    assert leftovers(world, wait=60) == {}  # the worker is done writing and indexing
    calls = model_api.snapshot()
    result = next(c for c in calls if asks(c) and c.after_tool)
    assert corpus.kinds_in(corpus.TOOL_OUTPUT) <= corpus.kinds_in(result.messages[-1].tool_result or "")
    (summary,) = [c for c in calls if is_summary(c)]
    assert "for the release job" in summary.user_text  # the answer reached the summariser, redacted
    check_secrets_kept(world, calls, is_summary, planted)


# --- interactive --------------------------------------------------------------------------------

#: Codex 0.171.0's TUI runs its sessions in a shared background server (``codex app-server
#: --managed-daemon``) that outlives the TUI on purpose; it sends SessionEnd when it unloads a
#: session, ``thread_unload_delay_secs`` (60 s by default) after the last client left. The test
#: shortens that delay; the daemon itself is Codex's, not a leak of ours.
UNLOAD_DELAY = 2
CODEX_DAEMON = re.compile(r"/codex app-server (--listen .*--managed-daemon|daemon pid-update-loop)")


def left_besides_codex_daemon(world: World, wait: float) -> dict[int, str]:
    deadline = time.monotonic() + wait
    while True:
        left = {pid: cmd for pid, cmd in leftovers(world, wait=0).items() if not CODEX_DAEMON.search(cmd)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.25)


#: The SessionStart hook's status line in the TUI's transcript.
HOOK_LINE = r"Hook\s*·\s*\[memsearch\s*v"


def tui_turn(world: World, prompt: str, answer: str) -> str:
    """One interactive session: start the TUI, send ``prompt``, wait for ``answer``, /quit.

    The prompt is pasted, not typed (``Terminal.paste_line``). Typed, this test failed in 4 of 11
    runs on a shared machine (and in none of 47 at another time: it depends on timing) with the TUI
    "loading", no hook run and no memsearch process: the prompt never left Codex 0.171.0's
    composer (the failing screen shows it there, without the "Waiting for startup" every sent
    prompt gets). The composer guesses pastes from key timing (a quick run of characters is a
    paste; an Enter handled within ~120 ms of its last character is a newline in it,
    tui/src/bottom_pane/paste_burst.rs), and when the starting TUI read our text and our Enter in
    one go, the Enter became a newline. ``test_codex_tui_takes_a_prompt_it_reads_late`` reproduces
    it on purpose. Tools that script Codex's TUI hit the same (e.g.
    https://github.com/omartelo/lich/pull/397, https://github.com/schuettc/muster/issues/112);
    docs/platforms/codex.md says what to do. ``/quit`` stays typed: Enter submits a line starting
    with ``/`` even then (tried with the TUI stopped)."""
    term = Terminal(["codex", "-s", "danger-full-access", "-a", "never"], world)
    try:
        term.expect(r"Ask Codex to do anything", timeout=60)
        start = len(term.text)
        term.paste_line(prompt)
        # Codex 0.171.0 starts the session (and runs SessionStart) with the first prompt; the
        # hook's status line shows in the transcript.
        term.expect(HOOK_LINE, timeout=60, since=start)
        term.expect(answer, timeout=60, since=start)
        term.type_line("/quit")
        assert term.wait(timeout=30) is not None, term.text[-2000:]
        return term.text
    finally:
        term.close()


def test_codex_tui_session_captures_recalls_and_cleans_up(world: World, model_api: FakeModelAPI) -> None:
    config = Path(world.env["CODEX_HOME"]) / "config.toml"
    config.write_text(f"thread_unload_delay_secs = {UNLOAD_DELAY}\n" + config.read_text())
    assert "hooks trusted in Codex's config.toml" in install(world)

    tui_turn(world, QUESTION, r"Done\.\s*You\s*said")
    (entry,) = wait_for(lambda: entries_with(world, "6543"), 90, "the journal entry")
    assert ANCHOR.search(entry) and SUMMARY[0] in entry
    (summary,) = [c for c in model_api.snapshot() if is_summary(c)]
    assert f"[User]: {QUESTION}" in summary.user_text and "[Codex]: Done. You said" in summary.user_text
    assert left_besides_codex_daemon(world, wait=60) == {}  # SessionEnd stopped the watch
    collection = memsearch(world, "hook", "codex", "collection").strip()
    check_recall_chain(world, collection, "staging database port", QUESTION, "Done. You said")

    script_recall(world, model_api, collection)
    tui_turn(world, RECALL, r"Recalled:\s*port\s*6543")
    calls = [c for c in model_api.snapshot() if RECALL in c.everything and not is_summary(c)]
    assert "User said the staging database listens on port 6543" in calls[0].everything  # SessionStart
    assert "[memsearch] Notes from past sessions" in calls[0].everything  # UserPromptSubmit
    assert "memory-recall" in calls[0].everything and SKILL_BLURB in calls[0].everything
    result = next(c for c in calls if c.after_tool and c.tools)
    assert "6543" in (result.messages[-1].tool_result or "") and "chunk_hash" in (
        result.messages[-1].tool_result or ""
    )
    wait_for(lambda: len(entries_with(world, "6543")) > 1, 90, "the second turn's entry")
    assert left_besides_codex_daemon(world, wait=60) == {}
    assert model_api.unknown == []


def native_tui(term: Terminal) -> int:
    """The process that reads the terminal: npm's ``codex`` is a node script starting the binary."""
    children = Path(f"/proc/{term.pid}/task/{term.pid}/children").read_text().split()
    (pid,) = [int(c) for c in children if "/vendor/" in Path(f"/proc/{c}/cmdline").read_text()]
    return pid


def test_codex_tui_takes_a_prompt_it_reads_late(world: World, model_api: FakeModelAPI) -> None:
    """The TUI is stopped for a second while the prompt goes in, as a busy start-up or a loaded
    machine delays its reads. Typed (``type_line``), Codex 0.171.0 then reads text and Enter at
    once, takes the Enter for a newline of a paste and never sends the prompt; pasted
    (``paste_line``, what ``tui_turn`` does), the turn runs."""
    assert "hooks trusted in Codex's config.toml" in install(world)
    term = Terminal(["codex", "-s", "danger-full-access", "-a", "never"], world)
    try:
        term.expect(r"Ask Codex to do anything", timeout=60)
        start = len(term.text)
        tui = native_tui(term)
        os.kill(tui, signal.SIGSTOP)
        resume = threading.Timer(1.0, os.kill, (tui, signal.SIGCONT))
        resume.start()
        term.paste_line(QUESTION)
        resume.join()
        term.expect(HOOK_LINE, timeout=60, since=start)
        term.expect(r"Done\.\s*You\s*said", timeout=60, since=start)
    finally:
        term.close()
    assert any(QUESTION in c.user_text for c in model_api.snapshot() if not is_summary(c))


def test_untrusted_hooks_are_reported_not_silent(world: World, model_api: FakeModelAPI) -> None:
    """Codex 0.171.0 skips untrusted hooks without a word in `codex exec`; memsearch says so: the
    installer when it leaves trust to the user, and `memsearch hook codex doctor` (exit 1)."""
    out = world.run(["bash", str(ROOT / "plugins" / "codex" / "install.sh")], timeout=120).stdout
    assert "hooks trusted" in out  # trusted ...
    hooks_file = Path(world.env["CODEX_HOME"]) / "hooks.json"
    hooks = json.loads(hooks_file.read_text())
    stop = hooks["hooks"]["Stop"][0]["hooks"][0]
    stop["command"] += " "  # ... then changed behind Codex's back: its hash no longer matches
    hooks_file.write_text(json.dumps(hooks))
    doctor = world.run(["memsearch", "hook", "codex", "doctor"], timeout=60)
    assert doctor.returncode == 1
    assert "memsearch hooks will not run in Codex: Codex skips Stop (modified)" in doctor.stderr
    run = world.run(["codex", "exec", QUESTION], timeout=120)
    assert "hook: SessionStart Completed" in run.stderr and "hook: Stop" not in run.stderr  # Codex agrees

    kept = world.run(["bash", str(ROOT / "plugins" / "codex" / "install.sh")], timeout=120)
    assert "hooks trusted" in kept.stdout  # re-running the installer repairs it
    assert world.run(["memsearch", "hook", "codex", "doctor"], timeout=60).returncode == 0

    fresh = {**world.env, "CODEX_HOME": str(world.home / "fresh-codex-home"), "MEMSEARCH_CODEX_NO_TRUST": "1"}
    proc = subprocess.run(
        ["bash", str(ROOT / "plugins" / "codex" / "install.sh")], env=fresh, capture_output=True, text=True
    )
    assert (
        proc.returncode == 0 and "NOTE: hooks not trusted" in proc.stdout and "open `/hooks`" in proc.stdout
    )
    doctor = subprocess.run(
        ["memsearch", "hook", "codex", "doctor"], env=fresh, capture_output=True, text=True
    )
    assert doctor.returncode == 1 and "Codex skips SessionStart (untrusted)" in doctor.stderr
    assert leftovers(world, wait=30) == {}


# --- context budget and recall log ----------------------------------------------------------------

#: The session-start budget the budget test sets (small, so the seeded journals must be trimmed).
SESSION_BUDGET = 300


def test_context_budget_and_recall_log(world: World, model_api: FakeModelAPI) -> None:
    from memsearch.agent.context_budget import count_tokens
    from memsearch.agent.framing import DATA_NOTE

    install(world)
    memsearch(world, "config", "set", "context.session_start_tokens", str(SESSION_BUDGET))
    seed_journals(world, "Day {day}: staging database check {day}.{hour} on port 6543 第{day}天")
    collection = memsearch(world, "hook", "codex", "collection").strip()
    memsearch(world, "index", ".memsearch/memory", "--collection", collection)
    script_recall(world, model_api, collection)
    run = world.run(["codex", "exec", "-s", "danger-full-access", RECALL], timeout=120)
    assert run.returncode == 0, run.stderr
    calls = [c for c in model_api.snapshot() if RECALL in c.everything and not is_summary(c)]
    opening = calls[0]
    # the session-start context as the model got it: trimmed to the budget, newest entries kept
    text = opening.everything
    start = text.index(DATA_NOTE)
    context = text[start : text.index("gets them.", start) + len("gets them.")]
    assert "older journal entries left out (context budget)" in context
    assert count_tokens(context) <= SESSION_BUDGET
    assert "check 4.15" in context and "check 3.9 " not in context
    result = next(c for c in calls if c.after_tool and c.tools)
    assert "6543" in (result.messages[-1].tool_result or "")
    wait_for(lambda: entries_with(world, "Codex acknowledged"), 90, "the turn's entry")
    assert leftovers(world, wait=60) == {}

    report = json.loads(memsearch(world, "stats", "--recall", "--json-output", "--collection", collection))
    (row,) = report["sessions"]  # the shell's search is the hooks' session (CODEX_THREAD_ID)
    assert row["host"] == "codex" and row["session"] != "unknown"
    assert (row["injections"], row["searches"], row["captures"], row["consulted"]) == (2, 1, 1, True)
    log = Path(world.env["HOME"]) / ".memsearch" / "recall" / f"{collection}.jsonl"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert next(e for e in events if e.get("via") == "session-start")["tokens"] == count_tokens(context)
