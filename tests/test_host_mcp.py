"""``memsearch mcp`` inside the real Claude Code, Codex and OpenCode, configured by ``docs/mcp.md``.

No plugin is installed: each host knows memsearch only through the MCP block of the doc, and only
the model is fake (``fake_model_api``). The fake model uses the tools as a model would, in one
session of the host: it finds them in the request, searches, expands the first hit, opens the
transcript the expansion names, remembers a note, and answers with what it read. The test then
checks, through the host's request log and the ``memsearch`` CLI: the five tools were listed to the
model, each call reached the server and its answer reached the model, the note is in today's
journal and a CLI search finds it, and nothing of the session (the server above all) still runs.

The memory starts with one entry memsearch captured (its anchor recorded, as a plugin's capture
records it) that points at a real Claude Code transcript.

Found on the way (the real hosts, not their docs): Claude Code 2.1.197 and Codex 0.171 both start
a turn before a slow MCP server is ready, so their blocks in docs/mcp.md ask them to wait
(``alwaysLoad``, ``required``); Codex offers a server's tools as one ``namespace`` tool.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_model_api import Answer, FakeModelAPI, ModelCall, running_model_api
from memsearch.agent.hooks.collection import derive_collection
from real_hosts import World, claude_world, kill_world, leftovers, make_world, opencode_world
from test_host_codex import codex_config

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "mcp.md"
FIXTURE = ROOT / "tests" / "fixtures" / "transcripts" / "claude.jsonl"
TURN = "1b6bc284-5dfb-5e78-916b-c75956e8a024"  # the fixture's turn about the flaky watcher test
TOOLS = ("search", "expand", "transcript", "remember", "stats")
RECALL = "MCPCHECK: what did we find out about the flaky watcher test? Keep the cutover date too."
CAPTURED = "Found why the watcher test is flaky: a debounce race in the file watcher."
#: Only the transcript says this; the model has it only if the round trip reached the transcript.
IN_TRANSCRIPT = "The watcher test fails about one run in five"
NOTE = "The zebra-ledger cutover happens on Thursday at 06:00 UTC."


def doc_block(name: str) -> str:
    """The fenced block right after ``<!-- mcp:<name> -->`` in docs/mcp.md."""
    found = re.search(rf"<!-- mcp:{name} -->\s*(?:<!--.*?-->\s*)*```\w+\n(.*?)```", DOC.read_text(), re.S)
    assert found, f"docs/mcp.md has no block {name!r}"
    return found.group(1)


# --- the fake model: a user of the tools ---------------------------------------------------------


def tool_name(call: ModelCall, tool: str) -> str:
    """The host's name for memsearch's ``tool`` (hosts prefix server tools in their own way)."""
    names = [t for t in call.tools if "memsearch" in t and re.search(rf"(^|[_:.]){tool}$", t)]
    assert len(names) == 1, f"no single memsearch {tool!r} tool among {call.tools}"
    return names[0]


def results(call: ModelCall) -> list[str]:
    """The tool results of the conversation so far, oldest first."""
    return [m.tool_result for m in call.messages if m.tool_result is not None]


def agent(call: ModelCall) -> Answer:
    """One turn of a model using the tools: search → expand (the first hit) → transcript (what
    expand names) → remember, then an answer quoting what the transcript and remember returned."""
    done = results(call)
    if not done:
        return Answer(tool=tool_name(call, "search"), arguments={"query": "flaky watcher test", "top_k": 3})
    if len(done) == 1:
        hashes = re.findall(r"chunk_hash ([0-9a-f]{16})", done[0]) or ["0" * 16]
        return Answer(tool=tool_name(call, "expand"), arguments={"chunk_hash": hashes[0]})
    if len(done) == 2:
        named = re.search(r'Conversation: transcript\(path="([^"]+)", turn="([^"]+)"\)', done[1])
        path, turn = named.groups() if named else ("/nowhere", "0")
        arguments = {"path": path, "turn": turn[:8], "context": 0}
        return Answer(tool=tool_name(call, "transcript"), arguments=arguments)
    if len(done) == 3:
        return Answer(tool=tool_name(call, "remember"), arguments={"note": NOTE})
    return Answer(text=f"From memory: {done[2][:3000]}\n{done[3]}")


@pytest.fixture
def api() -> Iterator[FakeModelAPI]:
    with running_model_api() as served:
        served.on(lambda c: "MCPCHECK" in c.user_text and bool(c.tools), agent)
        yield served


# --- the memory and the checks ---------------------------------------------------------------------

SEED = """
import sys
from memsearch.engine.journal import JournalEntry, append_entry
memory, transcript, turn, bullet = sys.argv[1:]
anchor = {"session": "s-1", "turn": turn, "transcript": transcript}
append_entry(memory, JournalEntry(["- " + bullet], anchor))
"""


def seed_memory(world: World) -> Path:
    """One captured entry, written and recorded by memsearch in the world's own HOME."""
    transcript = world.home / ".claude" / "projects" / "proj" / "s-1.jsonl"
    transcript.parent.mkdir(parents=True)
    shutil.copy(FIXTURE, transcript)
    memory = world.project / ".memsearch" / "memory"
    world.run([sys.executable, "-c", SEED, str(memory), str(transcript), TURN, CAPTURED], check=True)
    return transcript


def requests(api: FakeModelAPI) -> list[ModelCall]:
    return [c for c in api.snapshot() if "MCPCHECK" in c.user_text and c.tools]


def check_session(world: World, api: FakeModelAPI, transcript: Path, output: str) -> None:
    """The tools were listed to the model, and each call's answer reached it: search found the
    captured entry, expand named its transcript, transcript showed the turn, remember wrote the
    note to today's journal, where a CLI search (the host gone) finds it."""
    calls = requests(api)
    assert calls, f"the host never asked the model:\n{output}"
    listed = [tool_name(calls[0], tool) for tool in TOOLS]  # every tool, described to the model
    assert len(set(listed)) == len(TOOLS)
    done = max((results(c) for c in calls), key=len)
    assert len(done) == 4, f"expected search, expand, transcript and remember results: {done}"
    searched, expanded, read, remembered = done
    assert CAPTURED[:40] in searched and "chunk_hash " in searched
    assert f'Conversation: transcript(path="{transcript}"' in expanded
    assert IN_TRANSCRIPT in read and "<memsearch-data" in read
    assert "Remembered in .memsearch/memory/" in remembered
    assert IN_TRANSCRIPT in output  # the model's last words, shown by the host, quote the transcript
    journals = sorted((world.project / ".memsearch" / "memory").glob("*.md"))
    assert any(NOTE in p.read_text(encoding="utf-8") for p in journals)
    collection = derive_collection(world.project)
    found = world.run(["memsearch", "search", "when is the zebra-ledger cutover", "-j", "-c", collection])
    assert found.returncode == 0, found.stderr
    assert NOTE in found.stdout


def check_nothing_left(world: World) -> None:
    """No process of the session runs any more: the host, and the server it started, above all."""
    alive = leftovers(world)
    servers = servers_of(world)
    assert not alive and not servers, f"left running: {alive} {servers}"


def servers_of(world: World) -> dict[int, str]:
    """``memsearch mcp`` processes of this world, found by HOME (a host may not pass the marker
    variable on to the servers it starts)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if " mcp" in cmdline and "memsearch" in cmdline and f"HOME={world.home}".encode() in environ:
            found[int(entry.name)] = cmdline
    return found


def host_test(world: World, api: FakeModelAPI, argv: list[str]) -> None:
    """One session of the host, run as ``argv`` + the prompt, checked end to end."""
    transcript = seed_memory(world)
    proc = world.run([*argv, RECALL], timeout=180)
    assert proc.returncode == 0, f"{argv}\n{proc.stdout}\n{proc.stderr}"
    check_session(world, api, transcript, proc.stdout)
    check_nothing_left(world)


# --- the hosts ------------------------------------------------------------------------------------


def test_claude_code(tmp_path: Path, api: FakeModelAPI) -> None:
    world = claude_world(tmp_path, api.url)
    try:
        (add,) = doc_block("claude-code").strip().splitlines()
        world.run(shlex.split(add), check=True, timeout=60)
        listed = world.run(["claude", "mcp", "list"], timeout=60)
        assert "memsearch" in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr
        example = shlex.split(doc_block("claude-code-print"))
        allowed = example[example.index("--allowedTools") :]
        host_test(world, api, ["claude", *allowed, "-p"])
    finally:
        kill_world(world)


def test_codex(tmp_path: Path, api: FakeModelAPI) -> None:
    world = make_world(tmp_path, "codex", FAKE_MODEL_KEY="sk-fake")
    try:
        config = Path(world.env["CODEX_HOME"]) / "config.toml"
        config.parent.mkdir(parents=True)
        block = doc_block("codex")
        assert block.startswith("[mcp_servers.memsearch]"), block  # Codex itself parses the rest
        config.write_text(codex_config(api, world.project) + "\n" + block)
        host_test(world, api, ["codex", "exec"])
    finally:
        kill_world(world)


def test_opencode(tmp_path: Path, api: FakeModelAPI) -> None:
    world = opencode_world(tmp_path, api.url)
    try:
        (world.project / "opencode.json").write_text(doc_block("opencode"))  # the doc's block, as is
        host_test(world, api, ["opencode", "run"])
    finally:
        kill_world(world)
