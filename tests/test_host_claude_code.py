"""The Claude Code plugin inside the real Claude Code (2.1.197, from npm), against the fake model API.

Only the model is fake: ``claude`` itself runs our hooks, skills and summariser, in a world of its
own (HOME, project, marker variable; see ``real_hosts``). Both tests install the plugin with the
commands of ``docs/platforms/claude-code.md`` (the only substitution: the checkout's folder for
``zilliztech/memsearch``, as the doc says), then check, through the host, the fake API's request
log and the ``memsearch`` CLI: hooks ran, a journal entry with its anchor was written and is found,
expanded and traced back to the turn, the model got the memory and the recall skill and can call
it, the nested ``claude -p --model haiku`` summary saw the question and the answer, and nothing of
the world is left running afterwards.

- ``test_one_shot``: two ``claude -p`` runs (where Claude Code 2.1.197 kills hooks still running
  at exit and writes the transcript only after Stop: lost turns and leaked watches showed here).
- ``test_interactive``: a session in a pseudo-terminal, two turns, ``/exit``.
- ``test_a_killed_session_leaves_no_watch``: SIGKILL instead of ``/exit``.
- ``test_context_budget_and_recall_log``: with small budgets, what reached the model from the hooks,
  counted at the fake API with memsearch's tokenizer, stays within them, and ``stats --recall``
  reports the session's injections, its skill search (attributed through ``CLAUDE_ENV_FILE``) and
  its capture.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_model_api import Answer, FakeModelAPI, ModelCall, running_model_api
from fixtures.privacy import corpus
from real_hosts import (
    CLAUDE_API_KEY,
    HOSTS,
    Terminal,
    World,
    check_secrets_kept,
    claude_world,
    kill_world,
    leftovers,
    parrot_summaries,
    plant_journal,
    seed_journals,
    wait_for,
)

pytestmark = pytest.mark.host

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "platforms" / "claude-code.md"
#: The marketplace source in the doc, replaced by this checkout (the doc says how).
DOC_SOURCE = "/path/to/memsearch"
API_KEY = CLAUDE_API_KEY
HINT = "[memsearch] Notes from past sessions of this project are searchable"
SUMMARY_MARK = "=== Transcript of a conversation between User and Claude Code ==="
SKILL_MARK = "# Recall from memsearch"
#: What the tests' fake model answers, and what its summariser writes.
QUESTION = "How should we roll out the zebra-ledger migration?"
ANSWER = "Roll out zebra-ledger behind a blue-green switch and keep the old ledger readable for a week."
BULLETS = [
    "- User asked how to roll out the zebra-ledger migration.",
    "- Claude Code recommended a blue-green switch, keeping the old ledger readable for a week.",
]
RECALL = "What did we decide about the ledger rollout last time?"
ANCHOR = re.compile(r"<!-- session:(?P<session>\S+) turn:(?P<turn>\S+) transcript:(?P<transcript>\S+) -->")


# --- the world --------------------------------------------------------------------------------


def doc_install_commands() -> list[list[str]]:
    """The ``claude plugin ...`` lines of the doc's install steps, with this checkout as source."""
    text = DOC.read_text(encoding="utf-8")
    install = text[text.index("## Install") : text.index("## Verify")]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", install, re.DOTALL):
        for line in block.splitlines():
            argv = shlex.split(line, comments=True)
            if argv[:2] == ["claude", "plugin"]:
                commands.append([str(REPO) if arg == DOC_SOURCE else arg for arg in argv])
    assert len(commands) == 2, f"expected the marketplace and install commands in {DOC}: {commands}"
    return commands


def doc_recall_permissions() -> list[str]:
    """``--allowedTools ...`` from the doc's ``claude -p`` recall example (Claude Code asks before
    it runs a skill or a command; ``-p`` cannot ask)."""
    text = DOC.read_text(encoding="utf-8")
    recall = text[text.index("## Recall") : text.index("### Automatic recall")]
    (block,) = re.findall(r"```bash\n(claude -p .*?)```", recall, re.DOTALL)
    argv = shlex.split(block)
    return argv[argv.index("--allowedTools") :]


ALLOWED = doc_recall_permissions()


def install_plugin(world: World) -> None:
    """Item 1: the doc's commands, verbatim, succeed, and the host then lists the plugin."""
    for argv in doc_install_commands():
        proc = world.run(argv, timeout=60)
        assert proc.returncode == 0, f"{argv}: {proc.stdout}{proc.stderr}"
    listed = world.run(["claude", "plugin", "list"], timeout=60)
    assert "memsearch@memsearch-plugins" in listed.stdout, listed.stdout + listed.stderr


def script_model(api: FakeModelAPI) -> None:
    """The fake model: answers the question, summarises like haiku, and recalls through the skill."""

    def in_skill(call: ModelCall) -> bool:
        return SKILL_MARK in call.everything

    def search_from_skill(call: ModelCall) -> Answer:
        # The collection comes from the skill's own text: Claude Code ran its !`...` lines.
        found = re.search(r"Collection of this project: (ms_\w+)", call.everything)
        collection = found.group(1) if found else "the-skill-did-not-show-a-collection"
        command = f'memsearch search "zebra-ledger rollout" --top-k 3 --json-output --collection {collection}'
        return Answer(tool="Bash", arguments={"command": command, "description": "Search memory"})

    api.on(lambda c: SUMMARY_MARK in c.everything, Answer(text="\n".join(BULLETS)))
    api.on(lambda c: in_skill(c) and not c.after_tool, search_from_skill)
    api.on(
        lambda c: RECALL in c.user_text and not in_skill(c) and not c.after_tool,
        Answer(tool="Skill", arguments={"skill": "memsearch:memory-recall", "args": "ledger rollout"}),
    )
    api.on(lambda c: QUESTION in c.user_text and not c.after_tool, Answer(text=ANSWER))


@pytest.fixture
def api() -> Iterator[FakeModelAPI]:
    with running_model_api() as fake:
        script_model(fake)
        yield fake


@pytest.fixture
def world(tmp_path: Path, api: FakeModelAPI) -> Iterator[World]:
    world = claude_world(tmp_path, api.url)
    try:
        yield world
    finally:
        kill_world(world)


# --- checks -----------------------------------------------------------------------------------


def journal_text(world: World) -> str:
    return "".join(
        p.read_text(encoding="utf-8") for p in (world.project / ".memsearch" / "memory").glob("*.md")
    )


def wait_for_entry(world: World, bullet: str, timeout: float = 60) -> re.Match[str]:
    """Item 3: today's journal gets an entry with its anchor and the summary's bullets."""

    def entry() -> re.Match[str] | None:
        for section in journal_text(world).split("\n### ")[1:]:
            match = ANCHOR.search(section)
            if match and bullet in section:
                return match
        return None

    worker_log = world.project / ".memsearch" / ".worker.log"
    try:
        found = wait_for(entry, timeout, f"a journal entry with {bullet!r}")
    except AssertionError as exc:
        log = worker_log.read_text(encoding="utf-8") if worker_log.exists() else "(no worker log)"
        raise AssertionError(f"{exc}\njournal:\n{journal_text(world)}\nworker log:\n{log}") from None
    assert isinstance(found, re.Match)
    return found


def check_recall_chain(world: World, anchor: re.Match[str]) -> None:
    """Item 4: search finds the entry, expand shows its anchor, transcript shows the turn."""
    collection = world.run(["memsearch", "hook", "claude-code", "collection"], check=True).stdout.strip()
    searched = world.run(
        ["memsearch", "search", "zebra-ledger rollout", "--json-output", "--collection", collection],
        check=True,
    )
    hit = next(h for h in json.loads(searched.stdout) if anchor["turn"] in h["content"])
    expanded = world.run(
        ["memsearch", "expand", hit["chunk_hash"], "--json-output", "--collection", collection], check=True
    )
    assert json.loads(expanded.stdout)["anchor"] == anchor.groupdict()
    shown = world.run(
        ["memsearch", "transcript", anchor["transcript"], "--turn", anchor["turn"], "--json-output"],
        check=True,
    )
    turns = json.loads(shown.stdout)
    asked = next(i for i, t in enumerate(turns) if t["uuid"] == anchor["turn"])
    assert turns[asked]["role"] == "user" and turns[asked]["text"] == QUESTION
    assert turns[asked + 1]["role"] == "assistant" and turns[asked + 1]["text"] == ANSWER
    whole = world.run(["memsearch", "transcript", anchor["transcript"], "--json-output"], check=True)
    # Local commands (/exit and its "See ya!") are not turns of the conversation.
    assert not [t for t in json.loads(whole.stdout) if "<command-name>" in t["text"] or t["text"] == "/exit"]
    assert not [t for t in json.loads(whole.stdout) if "local-command" in t["text"]]


def check_summary_call(api: FakeModelAPI) -> None:
    """Item 7: the nested ``claude -p --model haiku`` got the question and the answer, no tools."""
    calls = [c for c in api.snapshot() if SUMMARY_MARK in c.everything and QUESTION in c.everything]
    assert calls, "no summary request reached the model"
    call = calls[0]
    assert ANSWER in call.everything
    assert "haiku" in call.model, call.model
    assert call.tools == []  # --tools "": the summariser can run nothing


def check_recall_round_trip(api: FakeModelAPI, since: int, anchor: re.Match[str]) -> None:
    """Items 5 and 6 for the turn that asked ``RECALL``: hint once, skill offered, skill called,
    its Bash search run by Claude Code, the journal hit back in the model's next requests."""
    calls = api.snapshot()[since:]
    first = next(c for c in calls if RECALL in c.user_text and c.tools)  # not the session-title call
    assert first.everything.count(HINT) == 1, "the recall hint must reach the model once per turn"
    assert "memsearch:memory-recall" in first.everything  # the skill listing the model reads
    assert "Skill" in first.tools and "Bash" in first.tools
    forked = [c for c in calls if SKILL_MARK in c.everything and c.after_tool]
    assert forked and tool_results_mention(forked[0], anchor["turn"]), (
        "the skill's Bash search did not bring the journal hit back to the model"
    )
    back = [c for c in calls if SKILL_MARK not in c.everything and c.after_tool]
    assert back and tool_results_mention(back[0], anchor["turn"]), (
        "the skill's answer with the journal hit did not reach the main conversation"
    )


def tool_results_mention(call: ModelCall, text: str) -> bool:
    return any(text in (m.tool_result or "") for m in call.messages)


def check_no_leftovers(world: World) -> None:
    """Item 8: nothing of the world runs any more (watch, capture worker, nested claude)."""
    alive = leftovers(world, wait=30)
    assert alive == {}, f"left running: {alive}"


def check_logs(world: World) -> None:
    """The background processes reported no problem (the capture worker writes only problems)."""
    memsearch_dir = world.project / ".memsearch"
    assert (memsearch_dir / ".worker.log").read_text(encoding="utf-8") == ""
    watch_log = (memsearch_dir / ".watch.log").read_text(encoding="utf-8")
    assert "Failed" not in watch_log and "Error" not in watch_log, watch_log


def hook_events(stream: str) -> dict[str, dict[str, object]]:
    """The ``hook_response`` events of ``--output-format stream-json --include-hook-events``."""
    events = {}
    for line in stream.splitlines():
        event = json.loads(line)
        if event.get("subtype") == "hook_response":
            events[str(event["hook_event"])] = event
    return events


def check_hooks(stream: str) -> None:
    """Item 2: Claude Code ran our hooks, they succeeded, said nothing on stderr, and it took
    their JSON (an output it rejects is reported as an error in the event)."""
    events = hook_events(stream)
    for name in ("SessionStart", "UserPromptSubmit", "Stop"):
        event = events.get(name)
        assert event is not None, f"{name} hook did not run: {sorted(events)}"
        assert event["exit_code"] == 0 and event["outcome"] == "success", event
        assert event["stderr"] == "", event
    assert "[memsearch v" in str(events["SessionStart"]["stdout"])


# --- the tests --------------------------------------------------------------------------------


def test_one_shot(world: World, api: FakeModelAPI) -> None:
    install_plugin(world)
    stream = ["--output-format", "stream-json", "--verbose", "--include-hook-events"]

    first = world.run(["claude", "-p", QUESTION, *stream], timeout=120)
    assert first.returncode == 0, first.stderr
    assert ANSWER in first.stdout
    check_hooks(first.stdout)
    anchor = wait_for_entry(world, BULLETS[0])
    check_summary_call(api)
    check_no_leftovers(world)
    check_recall_chain(world, anchor)

    since = len(api.snapshot())
    second = world.run(["claude", "-p", RECALL, *stream, *ALLOWED], timeout=120)
    assert second.returncode == 0, second.stderr
    check_hooks(second.stdout)
    opening = next(c for c in api.snapshot()[since:] if RECALL in c.user_text and c.tools)
    assert "# Recent Memory" in opening.everything and BULLETS[1] in opening.everything  # SessionStart
    check_recall_round_trip(api, since, anchor)
    assert anchor["turn"] in second.stdout  # the fake model's last words quote the tool result
    wait_for(lambda: journal_text(world).count("\n### ") >= 2, 60, "the recall turn's entry")
    check_no_leftovers(world)
    assert not (world.project / ".memsearch" / ".watch.pid").exists()
    check_logs(world)

    (command,) = re.findall(r"Uninstall: `(claude plugin uninstall [^`]+)`", DOC.read_text(encoding="utf-8"))
    uninstall = world.run(shlex.split(command), timeout=60)
    assert uninstall.returncode == 0, uninstall.stdout + uninstall.stderr
    assert "memsearch@" not in world.run(["claude", "plugin", "list"], timeout=60).stdout


def is_summary(call: ModelCall) -> bool:
    return SUMMARY_MARK in call.everything


def test_secrets_never_reach_memory(world: World, api: FakeModelAPI) -> None:
    """The secrets corpus in the prompt, in a file the model reads (tool output) and in the answer
    of a real ``claude -p`` turn: captured, summarised by the nested ``claude -p``, and not one
    value on disk under ``.memsearch`` or in the summariser's request."""
    planted = plant_journal(world)
    install_plugin(world)
    notes = world.project / "deploy-notes.txt"
    notes.write_text(corpus.TOOL_OUTPUT)

    def in_turn(call: ModelCall) -> bool:
        return corpus.PROMPT in call.everything and bool(call.tools) and not is_summary(call)

    api.on(
        lambda c: in_turn(c) and not c.after_tool, Answer(tool="Read", arguments={"file_path": str(notes)})
    )
    api.on(lambda c: in_turn(c) and c.after_tool, Answer(text=corpus.REPLY))
    parrot_summaries(api, is_summary, "\n".join(BULLETS))
    run = world.run(["claude", "-p", corpus.PROMPT], timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    wait_for_entry(world, BULLETS[0])
    check_no_leftovers(world)  # the worker is done writing and indexing
    calls = api.snapshot()
    result = next(c for c in calls if in_turn(c) and c.after_tool)
    assert corpus.kinds_in(corpus.TOOL_OUTPUT) <= corpus.kinds_in(
        "".join(m.tool_result or "" for m in result.messages)
    )
    assert any("for the release job" in c.everything for c in calls if is_summary(c))  # the answer, redacted
    check_secrets_kept(world, calls, is_summary, planted)


def loose(text: str) -> str:
    """A pattern for ``text`` on Claude Code's screen, which moves the cursor instead of printing
    some of the spaces (they vanish once escape codes are stripped)."""
    return r"\s*".join(re.escape(ch) for ch in text if not ch.isspace())


def seed_first_run(world: World) -> None:
    """What a person clicks through on the first interactive start of Claude Code 2.1.197:
    onboarding (theme), trust in the project folder, and approval of the API key from the
    environment (remembered by its last 20 characters)."""
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {
            str(world.project): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}
        },
    }
    (world.home / ".claude.json").write_text(json.dumps(state), encoding="utf-8")


def test_interactive(world: World, api: FakeModelAPI) -> None:
    install_plugin(world)
    seed_first_run(world)
    terminal = Terminal(["claude", *ALLOWED], world)
    try:
        terminal.expect(r"SessionStart:startup says: \[memsearch v", timeout=60)  # hooks ran
        terminal.expect(r"❯", timeout=30)
        mark = len(terminal.text)
        terminal.type_line(QUESTION)
        terminal.expect(loose(ANSWER[:40]), timeout=60, since=mark)
        anchor = wait_for_entry(world, BULLETS[0])
        check_summary_call(api)

        since = len(api.snapshot())
        mark = len(terminal.text)
        terminal.type_line(RECALL)
        terminal.expect(loose("The tool returned"), timeout=60, since=mark)  # the model's answer to it
        check_recall_round_trip(api, since, anchor)
        wait_for(lambda: journal_text(world).count("\n### ") >= 2, 60, "the recall turn's entry")

        terminal.type_line("/exit")
        assert terminal.wait(timeout=30) == 0
        screen = terminal.text
        for trouble in ("hook error", "Hook cancelled", "memsearch hook:", "Error:"):
            assert not re.search(loose(trouble), screen), f"{trouble!r} on the screen:\n{screen[-3000:]}"
    finally:
        terminal.close()
    check_no_leftovers(world)
    assert not (world.project / ".memsearch" / ".watch.pid").exists()
    check_logs(world)
    # Stopped by the session's release at /exit (SessionEnd, or the last capture worker), not by
    # the watch noticing later that nobody uses it.
    assert "No live session" not in (world.project / ".memsearch" / ".watch.log").read_text(encoding="utf-8")
    raw = Path(anchor["transcript"]).read_text(encoding="utf-8")
    assert "<command-name>/exit</command-name>" in raw, raw[-2000:]  # recorded...
    check_recall_chain(world, anchor)  # ...but not shown as turns


def test_a_killed_session_leaves_no_watch(world: World) -> None:
    """A Claude Code that dies without SessionEnd (killed, crashed): the watch its SessionStart
    started notices that no live session uses it and exits by itself."""
    install_plugin(world)
    seed_first_run(world)
    terminal = Terminal(["claude"], world)
    try:
        terminal.expect(r"SessionStart:startup says: \[memsearch v", timeout=60)
        watch = wait_for(lambda: (world.project / ".memsearch" / ".watch.pid").exists(), 10, "the watch")
        assert watch and any("memsearch watch" in cmd for cmd in leftovers(world, wait=0).values())
        os.kill(terminal.pid, signal.SIGKILL)
        assert terminal.wait(timeout=10) is not None
    finally:
        terminal.close()
    check_no_leftovers(world)  # WATCH_IDLE_GRACE (10 s) after the host died, plus one poll
    assert not (world.project / ".memsearch" / ".watch.pid").exists()
    log = (world.project / ".memsearch" / ".watch.log").read_text(encoding="utf-8")
    assert "No live session uses this watch any more." in log and "Stopping watcher." in log


#: The budgets the budget test sets (small, so the seeded journals must be trimmed).
SESSION_BUDGET = 300
PROMPT_BUDGET = 150


def injected_session_context(call: ModelCall) -> str:
    """The session-start context as the model got it: from the data note to the left-out line."""
    from memsearch.agent.framing import DATA_NOTE

    text = call.everything
    start = text.index(DATA_NOTE)
    end = text.index("gets them.", start) + len("gets them.")
    return text[start:end]


def test_context_budget_and_recall_log(world: World, api: FakeModelAPI) -> None:
    from memsearch.agent.context_budget import count_tokens

    install_plugin(world)
    for key, value in (("session_start_tokens", SESSION_BUDGET), ("prompt_hint_tokens", PROMPT_BUDGET)):
        world.run(["memsearch", "config", "set", f"context.{key}", str(value)], check=True)
    seed_journals(world, "Day {day}: zebra-ledger rollout step {day}.{hour} planned 第{day}天")
    collection = world.run(["memsearch", "hook", "claude-code", "collection"], check=True).stdout.strip()
    world.run(["memsearch", "index", ".memsearch/memory", "--collection", collection], check=True)

    stream = ["--output-format", "stream-json", "--verbose", "--include-hook-events"]
    run = world.run(["claude", "-p", RECALL, *stream, *ALLOWED], timeout=120)
    assert run.returncode == 0, run.stderr
    check_hooks(run.stdout)
    session = next(
        e["session_id"] for e in map(json.loads, run.stdout.splitlines()) if e.get("subtype") == "init"
    )
    opening = next(c for c in api.snapshot() if RECALL in c.user_text and c.tools)

    # what the hooks injected, measured where the model gets it
    context = injected_session_context(opening)
    assert "older journal entries left out (context budget)" in context  # trimmed...
    assert count_tokens(context) <= SESSION_BUDGET  # ...to the budget
    assert "step 4.15" in context and "step 3.9 " not in context  # newest kept, oldest left out
    hint_at = opening.everything.index(HINT)
    hint = opening.everything[hint_at : opening.everything.index("\n", hint_at)]
    assert 0 < count_tokens(hint) <= PROMPT_BUDGET

    # the skill searched (its Bash command ran in the session's shell), the turn was captured
    forked = [c for c in api.snapshot() if SKILL_MARK in c.everything and c.after_tool]
    assert forked and tool_results_mention(forked[0], "zebra-ledger")
    wait_for(lambda: "Claude Code recommended" in journal_text(world), 60, "the turn's entry")
    check_no_leftovers(world)

    shown = world.run(
        ["memsearch", "stats", "--recall", "--json-output", "--collection", collection], check=True
    )
    (row,) = json.loads(shown.stdout)["sessions"]
    assert (row["session"], row["host"]) == (session, "claude-code")
    assert (row["searches"], row["expands"], row["captures"], row["consulted"]) == (1, 0, 1, True)
    assert 1 <= row["hits"] <= 3
    assert row["injections"] == 2  # session start and the prompt
    log = world.home / ".memsearch" / "recall" / f"{collection}.jsonl"
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    start = next(e for e in events if e.get("via") == "session-start")
    assert start["tokens"] == count_tokens(context)  # the log counts what the model got
    assert row["injected_tokens"] == count_tokens(context) + count_tokens(hint)
    (search,) = [e for e in events if e["event"] == "search"]
    assert search["query"] == "zebra-ledger rollout" and search["via"] == "cli"
    table = world.run(["memsearch", "stats", "--recall", "--collection", collection], check=True).stdout
    assert session[:36] in table and "never consulted" not in table.splitlines()[1]


def test_the_pinned_host_is_the_one_the_doc_names() -> None:
    version = HOSTS["claude-code"].version
    assert f"Tested with Claude Code {version}" in DOC.read_text(encoding="utf-8")
