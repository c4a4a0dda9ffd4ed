"""OpenCode 1.18.33 itself (npm ``opencode-ai``) running the memsearch plugin, against the fake model API.

What only the real host can show: that OpenCode loads the plugin the way docs/platforms/opencode.md
installs it (the doc's install blocks are run here as written, with ``/path/to/memsearch`` replaced
by this checkout), offers its tools, sends the memory the system-prompt hook adds, runs the tools
the model calls, and that the capture daemon journals the turn — also the last one of a one-shot
``opencode run`` — and leaves nothing running. The model is the fake API (tests/fake_model_api.py)
behind an ``@ai-sdk/openai-compatible`` provider (chat completions), configured through
``OPENCODE_CONFIG`` so the user's ``~/.config/opencode`` holds only what the doc installs.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_model_api import Answer, FakeModelAPI, ModelCall, running_model_api
from fixtures.privacy import corpus
from real_hosts import (
    Terminal,
    World,
    check_secrets_kept,
    kill_world,
    leftovers,
    parrot_summaries,
    plant_journal,
)
from real_hosts import opencode_world as fake_model_world

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "platforms" / "opencode.md"
#: The doc's placeholder for the memsearch checkout.
CHECKOUT = "/path/to/memsearch"
MARK = "[memsearch] Memory available."
TOOLS = {"memory_search", "memory_get", "memory_transcript"}
ANCHOR = re.compile(r"<!-- session:(ses_\S+) turn:(msg_\S+) db:(\S+) -->")
SUMMARY_BULLET = "Summary written by the fake model"
#: Seconds the capture daemon may take to journal the last turn (a nested ``opencode run`` to
#: summarise, then indexing) and exit after OpenCode does.
DRAIN = 90.0


def doc_block(name: str) -> tuple[str, str]:
    """The fenced block after ``<!-- install:<name> -->`` in the doc: (language, text for this checkout)."""
    match = re.search(rf"<!-- install:{name} -->\s*```(\w+)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match, f"docs/platforms/opencode.md has no install block {name!r}"
    return match.group(1), match.group(2).replace(CHECKOUT, str(ROOT))


def install(world: World, *blocks: str) -> None:
    """Run the doc's install blocks: shell blocks with bash, a JSON block merged into opencode.json."""
    for name in blocks:
        language, text = doc_block(name)
        if language == "json":
            config = world.home / ".config" / "opencode" / "opencode.json"
            config.parent.mkdir(parents=True, exist_ok=True)
            current = json.loads(config.read_text()) if config.exists() else {}
            config.write_text(json.dumps({**current, **json.loads(text)}))
        else:
            world.run(["bash", "-euc", text], check=True, timeout=60)


def is_summary(call: ModelCall) -> bool:
    return "=== Transcript of a conversation between User and OpenCode ===" in call.user_text


def summary(call: ModelCall) -> Answer:
    """The fake summariser's bullets: they name the turn's topic, as a real summary does (a recall
    search finds a turn by what its summary says: hits under the strong-match floor are withheld)."""
    topic = " about the invoice exporter's queue" if "invoice exporter" in call.user_text else ""
    return Answer(text=f"- {SUMMARY_BULLET}{topic}.\n- The turn was recorded.")


@pytest.fixture
def api() -> Iterator[FakeModelAPI]:
    with running_model_api() as served:
        served.on(is_summary, summary)
        yield served


def opencode_world(tmp_path: Path, api: FakeModelAPI, *blocks: str) -> World:
    """A world whose OpenCode talks to the fake API, with the plugin installed by the doc's ``blocks``."""
    world = fake_model_world(tmp_path, api.url)
    install(world, *blocks)
    return world


def journal(world: World) -> str:
    return "\n".join(p.read_text() for p in sorted((world.project / ".memsearch" / "memory").glob("*.md")))


def tool_calls(call: ModelCall) -> list[str]:
    return [m.tool_call for m in call.messages if m.tool_call]


def main_calls(api: FakeModelAPI, text: str) -> list[ModelCall]:
    """The agent's requests (tools offered) of the turn whose user text has ``text``."""
    return [c for c in api.snapshot() if text in c.user_text and c.tools and not is_summary(c)]


def check_turn_recorded(
    world: World, api: FakeModelAPI, question: str, answer: str, context: int = 3
) -> tuple[str, str, str]:
    """Items 3, 4 and 7 for one turn: entry + anchor, search/expand/transcript, summary input.

    ``context``: messages shown around the turn by ``memsearch transcript`` (each model step of
    OpenCode is a message of its own, so a turn with tool calls needs more than the default 3).
    """
    text = journal(world)
    anchors = ANCHOR.findall(text)
    assert anchors, f"no journal entry with an anchor:\n{text}"
    session, turn, db = anchors[-1]  # the newest entry: this turn's
    # The native summariser (a nested `opencode run`) wrote it, and saw the question and the answer.
    assert SUMMARY_BULLET in text.rsplit("<!-- session:", 1)[1]
    summaries = [c for c in api.snapshot() if is_summary(c) and question in c.user_text]
    assert summaries, "no summary request carried the question"
    assert answer in summaries[0].user_text
    collection = world.run(["memsearch", "hook", "opencode", "collection"], check=True).stdout.strip()
    hits = json.loads(
        world.run(
            ["memsearch", "search", question, "--json-output", "--collection", collection], check=True
        ).stdout
    )
    hit = next((h for h in hits if f"turn:{turn}" in h["content"]), None)
    assert hit, f"memsearch search did not find the entry: {hits}"
    expanded = world.run(
        ["memsearch", "expand", hit["chunk_hash"], "--collection", collection], check=True
    ).stdout
    assert f"<!-- session:{session} turn:{turn} db:{db} -->" in expanded
    shown = world.run(
        ["memsearch", "transcript", db, "--session", session, "--turn", turn, "--context", str(context)],
        check=True,
    ).stdout
    assert question in shown and answer in shown
    return session, turn, db


def recall_script(seen: list[tuple[str, str]], query: str) -> object:
    """The fake model's side of memory_search -> memory_get -> memory_transcript -> answer."""

    def reply(call: ModelCall) -> Answer:
        if not call.after_tool:
            return Answer(tool="memory_search", arguments={"query": query, "top_k": None})
        name, result = tool_calls(call)[-1], call.messages[-1].tool_result or ""
        seen.append((name, result))
        if name == "memory_search":
            chunk = re.search(r'"chunk_hash":\s*"([0-9a-f]+)"', result)
            return Answer(tool="memory_get", arguments={"chunk_hash": chunk.group(1) if chunk else "none"})
        if name == "memory_get":
            anchor = ANCHOR.search(result)
            session, turn, db = anchor.groups() if anchor else ("none", "none", "none")
            arguments = {"db": db, "session_id": session, "turn_id": turn, "context": None}
            return Answer(tool="memory_transcript", arguments=arguments)
        return Answer(text="Recalled it from memory.")

    return reply


def test_one_shot_run(tmp_path: Path, api: FakeModelAPI) -> None:
    """``opencode run`` twice, the plugin installed as the doc's one file in ~/.config/opencode/plugins."""
    world = opencode_world(tmp_path, api, "plugin-file", "skills")
    try:
        question = "Which queue should the invoice exporter use? Codeword ZEBRAFISH"
        first = world.run(["opencode", "run", question], timeout=120)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "Done. You said" in first.stdout
        turn_call = main_calls(api, "ZEBRAFISH")[0]
        assert set(turn_call.tools) >= TOOLS, turn_call.tools  # 6: the tools are offered
        assert "memory-recall" in json.dumps(turn_call.body)  # the skills are offered too
        # 2, 8: the daemon the plugin started journals the one-shot turn after OpenCode exits, then exits
        assert leftovers(world, DRAIN) == {}
        session, turn, _db = check_turn_recorded(world, api, question, "Done. You said")

        seen: list[tuple[str, str]] = []
        api.on(
            lambda c: "RECALLCHECK" in c.user_text and bool(c.tools),
            recall_script(seen, "invoice exporter queue"),
        )
        second = world.run(
            ["opencode", "run", "What did we decide about the exporter? RECALLCHECK"], timeout=120
        )
        assert second.returncode == 0, second.stdout + second.stderr
        assert "Recalled it from memory." in second.stdout
        recall = main_calls(api, "RECALLCHECK")
        # 5: the journal's bullets reached the model, in the system prompt
        assert MARK in recall[0].system and SUMMARY_BULLET in recall[0].system
        # 6: each tool's result came back to the model in the next request
        assert [name for name, _ in seen] == ["memory_search", "memory_get", "memory_transcript"]
        assert f"turn:{turn}" in seen[0][1]
        assert f"<!-- session:{session} turn:{turn}" in seen[1][1]
        assert "ZEBRAFISH" in seen[2][1]
        assert leftovers(world, DRAIN) == {}
        check_turn_recorded(world, api, "RECALLCHECK", "Recalled it from memory.", context=5)
    finally:
        kill_world(world)


def test_secrets_never_reach_memory(tmp_path: Path, api: FakeModelAPI) -> None:
    """The secrets corpus in the prompt, in a file the model reads (tool output) and in the answer
    of a real ``opencode run``: captured, summarised by the nested ``opencode run``, and not one
    value on disk under ``.memsearch`` or in the summariser's request."""
    world = opencode_world(tmp_path, api, "plugin-file", "skills")
    planted = plant_journal(world)
    try:
        notes = world.project / "deploy-notes.txt"
        notes.write_text(corpus.TOOL_OUTPUT)

        def reply(call: ModelCall) -> Answer:
            if not call.after_tool:
                return Answer(tool="read", arguments={"filePath": str(notes)})
            return Answer(text=corpus.REPLY)

        api.on(lambda c: corpus.PROMPT in c.user_text and bool(c.tools) and not is_summary(c), reply)
        parrot_summaries(api, is_summary, f"- {SUMMARY_BULLET}.")
        run = world.run(["opencode", "run", corpus.PROMPT], timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        assert leftovers(world, DRAIN) == {}  # the daemon journalled the turn and exited
        assert SUMMARY_BULLET in journal(world)
        calls = api.snapshot()
        result = next(c for c in main_calls(api, corpus.PROMPT) if c.after_tool)
        assert corpus.kinds_in(corpus.TOOL_OUTPUT) <= corpus.kinds_in(result.messages[-1].tool_result or "")
        assert any(
            "for the release job" in c.user_text for c in calls if is_summary(c)
        )  # the answer, redacted
        check_secrets_kept(world, calls, is_summary, planted)
    finally:
        kill_world(world)


def test_interactive_session(tmp_path: Path, api: FakeModelAPI) -> None:
    """The TUI, the plugin named in opencode.json's ``plugin`` list (the doc's other install)."""
    world = opencode_world(tmp_path, api, "plugin-config", "skills")
    memory = world.project / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    yesterday = (dt.date.today() - dt.timedelta(days=1)).isoformat()
    (memory / f"{yesterday}.md").write_text(
        f"# {yesterday}\n\n## Session 09:00\n\n### 09:00\n"
        "- Decided: the deploy key rotates monthly (OTTERNOTE).\n"
    )
    collection = world.run(["memsearch", "hook", "opencode", "collection"], check=True).stdout.strip()
    world.run(["memsearch", "index", str(memory), "--collection", collection], check=True)
    seen: list[tuple[str, str]] = []

    def reply(call: ModelCall) -> Answer:
        if not call.after_tool:
            return Answer(tool="memory_search", arguments={"query": "deploy key rotation", "top_k": 3})
        seen.append((tool_calls(call)[-1], call.messages[-1].tool_result or ""))
        return Answer(text="The deploy key rotates monthly.")

    api.on(lambda c: "OTTERCHECK" in c.user_text and bool(c.tools), reply)
    question = "How often does the deploy key rotate? OTTERCHECK"
    terminal = Terminal(["opencode"], world)
    try:
        terminal.expect(r"Ask anything", timeout=60)
        start = len(terminal.text)
        for key in question:  # OpenCode 1.18.33's TUI drops text that arrives in one chunk
            terminal.send(key)
            terminal.pump(0.02)
        terminal.expect(r"OTTERCHECK", timeout=10, since=start)  # typed into the prompt box
        terminal.send("\r")
        terminal.expect(r"The deploy key rotates monthly\.", timeout=60)
        terminal.send("\x03")  # OpenCode 1.18.33 quits on one Ctrl+C at an empty prompt
        assert terminal.wait(30) == 0
    finally:
        terminal.close()
    try:
        turn_call = main_calls(api, "OTTERCHECK")[0]
        assert set(turn_call.tools) >= TOOLS
        assert MARK in turn_call.system and "OTTERNOTE" in turn_call.system  # 5
        assert seen and seen[0][0] == "memory_search" and "OTTERNOTE" in seen[0][1]  # 6
        assert leftovers(world, DRAIN) == {}  # 8
        check_turn_recorded(
            world, api, "OTTERCHECK", "The deploy key rotates monthly.", context=3
        )  # 2, 3, 4, 7
    finally:
        kill_world(world)
