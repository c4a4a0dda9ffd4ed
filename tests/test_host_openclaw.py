"""OpenClaw 2026.9.6 (on node 24.21.0) end to end: the real host runs our plugin against a fake model.

What each test proves, in the order of the common checklist:

1. the install commands of ``docs/platforms/openclaw.md`` (its ``## Install`` block, read from the
   file) succeed verbatim; the only substitutions: ``/path/to/memsearch`` becomes this checkout, and
   the line installing memsearch itself (``uv tool install ...``) is skipped (the test runs this
   checkout's memsearch, on PATH);
2. the hooks fire: ``before_prompt_build`` (the injected memory reaches the model) and ``agent_end``
   (a journal entry appears);
3. the entry has its anchor ``<!-- session:... transcript:<agent database> turn:... -->``;
4. ``memsearch search`` finds it, ``expand`` shows the anchor and ``transcript`` renders that turn
   from OpenClaw's SQLite transcript (question and answer);
5. the injected journal bullets are in the next run's request;
6. the three tools are offered, and memory_search -> memory_get -> memory_transcript called by the
   fake model each come back to it with their result (the next request carries it);
7. the nested summary request (``openclaw agent exec``) carried the question and the answer;
8. no process of the world is left.

The model is the fake API of ``fake_model_api`` (OpenAI chat completions), configured as a custom
provider in ``~/.openclaw/openclaw.json`` of the world's HOME; the agent's workspace is the world's
project folder.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import subprocess
import uuid
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
    make_world,
    parrot_summaries,
    plant_journal,
    wait_for,
)

pytestmark = pytest.mark.host

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "platforms" / "openclaw.md"

QUESTION = "How should the webhook sender retry failed deliveries?"
ANSWER = "Retry five times with exponential backoff starting at two seconds, then park the event."
BULLET = "OpenClaw settled on five retries with exponential backoff (BACKOFF-ZEBRA-42)."
RECALL = "What did we decide earlier about webhook retries? Check memory."
FINAL = "From memory: five retries with exponential backoff."
SUMMARY_MARK = "You take notes on a conversation between User and OpenClaw"
TOOLS = ("memory_search", "memory_get", "memory_transcript")


# --- the world ------------------------------------------------------------------------------------


def install_commands() -> list[list[str]]:
    """The ``bash`` block under ``## Install`` of the doc, as argv lists (see the module docstring)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Install", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "docs/platforms/openclaw.md has no bash block under ## Install"
    commands = []
    for line in block.group(1).splitlines():
        line = line.split("  #", 1)[0].strip()
        if not line or line.startswith("#") or line.startswith("uv tool install"):
            continue
        commands.append(shlex.split(line.replace("/path/to/memsearch", str(REPO))))
    return commands


def configure(world: World, api: FakeModelAPI) -> None:
    """Point OpenClaw at the fake model: a custom OpenAI-completions provider and the agent's model,
    the world's project as the workspace, no bootstrap files."""
    config = {
        "models": {
            "mode": "merge",
            "providers": {
                "fake": {
                    "baseUrl": f"{api.url}/v1",
                    "apiKey": "fake-key",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-model",
                            "name": "Fake",
                            "reasoning": False,
                            "input": ["text"],
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
        "agents": {
            "defaults": {
                "model": {"primary": "fake/fake-model"},
                "utilityModel": "",
                "workspace": str(world.project),
                "skipBootstrap": True,
            }
        },
    }
    folder = world.home / ".openclaw"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "openclaw.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


@pytest.fixture
def model_api() -> Iterator[FakeModelAPI]:
    with running_model_api() as api:
        script_model(api)
        yield api


@pytest.fixture
def world(tmp_path: Path, model_api: FakeModelAPI) -> Iterator[World]:
    w = make_world(tmp_path, "openclaw")
    configure(w, model_api)
    try:
        yield w
    finally:
        kill_world(w)


def install(world: World) -> None:
    """Run the doc's install commands; every one must succeed."""
    for argv in install_commands():
        proc = world.run(argv, timeout=120)
        assert proc.returncode == 0, f"{shlex.join(argv)} failed:\n{proc.stdout}\n{proc.stderr}"


# --- the fake model's script ------------------------------------------------------------------------


def _last_tool(call: ModelCall) -> tuple[str, str]:
    """The newest tool result in the request and the name of the tool called for it ('' if none).

    OpenClaw 2026.9.6 appends a user message of internal context (active exec sessions, subagents)
    after the tool result, so the result is not the request's last message.
    """
    results = [i for i, m in enumerate(call.messages) if m.tool_result is not None]
    if not results:
        return "", ""
    last = results[-1]
    name = next((m.tool_call for m in reversed(call.messages[:last]) if m.tool_call), "")
    return name, call.messages[last].tool_result or ""


def recall_step(call: ModelCall) -> Answer:
    """memory_search -> memory_get (chunk_hash of the hit) -> memory_transcript (the anchor) -> answer."""
    tool, result = _last_tool(call)
    if tool == "memory_search":
        return Answer(tool="memory_get", arguments={"chunk_hash": json.loads(result)[0]["chunk_hash"]})
    if tool == "memory_get":
        anchor = re.search(r"session:(\S+) transcript:(\S+) turn:(\S+) -->", result)
        assert anchor, result
        session, path, turn = anchor.groups()
        return Answer(
            tool="memory_transcript",
            arguments={"transcript_path": path, "session": session, "turn": turn, "context": 1},
        )
    if tool == "memory_transcript":
        return Answer(text=FINAL)
    return Answer(tool="memory_search", arguments={"query": "webhook retry backoff"})


def script_model(api: FakeModelAPI) -> None:
    api.on(
        lambda c: SUMMARY_MARK in c.everything,
        Answer(text=f"- User asked how webhook retries work.\n- {BULLET}"),
    )
    api.on(lambda c: RECALL in c.everything, recall_step)
    api.on(lambda c: QUESTION in c.everything, Answer(text=ANSWER))


def requests_with(api: FakeModelAPI, text: str) -> list[ModelCall]:
    return [c for c in api.snapshot() if text in c.everything and SUMMARY_MARK not in c.everything]


# --- checks shared by the modes ---------------------------------------------------------------------


def journal_entry(world: World) -> str:
    """Today's journal once it holds the summarised entry with its anchor (waits for the worker)."""
    day = world.project / ".memsearch" / "memory" / f"{dt.date.today():%Y-%m-%d}.md"

    def ready() -> str:
        text = day.read_text(encoding="utf-8") if day.exists() else ""
        return text if BULLET in text else ""

    return wait_for(ready, 90, f"the summarised entry in {day}")


def check_recall_cli(world: World, entry: str, session: str = r"\S+") -> None:
    """Item 3 and 4: the anchor, then search -> expand -> transcript from a terminal."""
    db = world.home / ".openclaw" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    anchor = re.search(rf"<!-- session:({session}) transcript:(\S+) turn:(\S+) -->", entry)
    assert anchor, entry
    session, path, turn = anchor.groups()
    assert path == str(db)
    collection = world.run(["memsearch", "hook", "openclaw", "collection"], check=True).stdout.strip()

    def hits() -> list[dict]:
        proc = world.run(
            ["memsearch", "search", "webhook retry backoff", "--json-output", "--collection", collection]
        )
        found = json.loads(proc.stdout or "[]") if proc.returncode == 0 else []
        return [h for h in found if "BACKOFF-ZEBRA-42" in h.get("content", "")]

    hit = wait_for(hits, 60, "the entry in the index")[0]
    expanded = world.run(["memsearch", "expand", hit["chunk_hash"], "--collection", collection], check=True)
    assert anchor.group(0) in expanded.stdout
    shown = world.run(["memsearch", "transcript", path, "--session", session, "--turn", turn], check=True)
    assert QUESTION in shown.stdout and ANSWER in shown.stdout, shown.stdout
    assert "[selected]" in shown.stdout


def check_summary_request(api: FakeModelAPI) -> None:
    """Item 7: the nested summariser's request carried the question and the answer."""
    summaries = [c for c in api.snapshot() if SUMMARY_MARK in c.everything]
    assert any(QUESTION in c.everything and ANSWER in c.everything for c in summaries), summaries


def check_recall_round_trip(api: FakeModelAPI) -> None:
    """Items 5 and 6: the injected memory and the three tools in the first request of the recall run,
    then each tool's result in the request after its call."""
    recall = requests_with(api, RECALL)
    assert recall, "the recall run never reached the model"
    first = recall[0]
    assert BULLET in first.everything, "the injected journal bullets did not reach the model"
    assert set(TOOLS) <= set(first.tools), first.tools
    results = dict(_last_tool(c) for c in recall if _last_tool(c)[0])
    assert set(results) == set(TOOLS), results.keys()
    assert "BACKOFF-ZEBRA-42" in results["memory_search"]
    assert "<!-- session:" in results["memory_get"] and BULLET in results["memory_get"]
    assert QUESTION in results["memory_transcript"] and ANSWER in results["memory_transcript"]


def check_no_leftovers(world: World) -> None:
    """Item 8: the detached capture worker (summary, journal, index) finishes and nothing stays."""
    assert leftovers(world, wait=90) == {}


# --- one-shot: openclaw agent --local --------------------------------------------------------------


def trace(api: FakeModelAPI) -> str:
    """What the model was asked and answered so far, for failure messages."""
    lines = []
    for call in api.snapshot():
        tool, result = _last_tool(call)
        lines.append(f"{call.path} tools={len(call.tools)} last tool={tool or '-'} result={result[:200]!r}")
    return "\n".join([*lines, f"unknown: {api.unknown}"])


def agent_turn(world: World, api: FakeModelAPI, session: str, message: str) -> str:
    argv = ["openclaw", "agent", "--local", "--agent", "main", "--session-id", session, "-m", message]
    try:
        proc = world.run(argv, timeout=120)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"openclaw agent timed out; the model saw:\n{trace(api)}") from exc
    assert proc.returncode == 0, f"openclaw agent failed:\n{proc.stdout}\n{proc.stderr[-3000:]}\n{trace(api)}"
    return proc.stdout


def test_one_shot(world: World, model_api: FakeModelAPI) -> None:
    install(world)
    first, second = f"oc-{uuid.uuid4().hex[:8]}", f"oc-{uuid.uuid4().hex[:8]}"

    assert ANSWER in agent_turn(world, model_api, first, QUESTION)
    entry = journal_entry(world)  # agent_end fired; the worker summarised and wrote
    check_summary_request(model_api)
    check_recall_cli(world, entry, re.escape(first))

    assert FINAL in agent_turn(world, model_api, second, RECALL)  # before_prompt_build fired: memory injected
    check_recall_round_trip(model_api)
    check_no_leftovers(world)


def is_summary(call: ModelCall) -> bool:
    return SUMMARY_MARK in call.everything


def test_secrets_never_reach_memory(world: World, model_api: FakeModelAPI) -> None:
    """The secrets corpus in the prompt and in the answer of a real ``openclaw agent --local`` turn:
    captured (agent_end), summarised by the nested summariser, and not one value on disk under
    ``.memsearch`` or in the summariser's request."""
    planted = plant_journal(world)
    install(world)
    parrot_summaries(model_api, is_summary, f"- User asked how webhook retries work.\n- {BULLET}")
    model_api.on(lambda c: corpus.PROMPT in c.everything and not is_summary(c), Answer(text=corpus.REPLY))
    assert "for the release job" in agent_turn(world, model_api, f"oc-{uuid.uuid4().hex[:8]}", corpus.PROMPT)
    journal_entry(world)
    check_no_leftovers(world)  # the worker is done writing and indexing
    calls = model_api.snapshot()
    assert any("for the release job" in c.everything for c in calls if is_summary(c))  # the answer, redacted
    check_secrets_kept(world, calls, is_summary, planted)


# --- interactive: openclaw tui against a gateway -----------------------------------------------------
#
# `openclaw tui --local` (the embedded runtime, no gateway) runs the model and offers the plugin's
# tools, but OpenClaw 2026.9.6 dispatches no typed plugin hooks on that path (neither
# before_prompt_build nor agent_end run), so there memsearch neither injects nor captures. The
# interactive session people use is `openclaw tui` against a gateway, which runs the hooks; the test
# starts one on 127.0.0.1 and stops it.


def start_gateway(world: World) -> tuple[subprocess.Popen[bytes], str, str]:
    """``openclaw gateway run`` on a free loopback port with a token; returns it, its URL and token."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = uuid.uuid4().hex
    log = world.home / "gateway.log"
    argv = ["openclaw", "gateway", "run", "--port", str(port), "--bind", "loopback", "--auth", "token"]
    argv += ["--token", token, "--allow-unconfigured"]
    with open(log, "wb") as out:
        gateway = subprocess.Popen(
            argv,
            cwd=world.project,
            env=world.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def ready() -> bool:
        text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))
        return gateway.poll() is not None or "[gateway] ready" in text

    wait_for(ready, 90, "the gateway")
    assert gateway.poll() is None, log.read_text(errors="replace")[-3000:]
    return gateway, f"ws://127.0.0.1:{port}", token


def stop_gateway(gateway: subprocess.Popen[bytes]) -> int:
    """SIGTERM, as a service manager would (OpenClaw drains and exits cleanly); its exit status."""
    if gateway.poll() is None:
        gateway.terminate()
        try:
            gateway.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gateway.kill()
            gateway.wait()
    return gateway.returncode


def wait_idle(tui: Terminal, timeout: float = 30) -> None:
    """Until the TUI's status line last said ``connected | idle``. Busy, it reads
    ``<spinner> <activity> • Ns | gateway connected``; a redraw can land anywhere in the output, so
    the newest of the two decides (a window of recent output can miss an idle line drawn earlier)."""

    def idle() -> bool:
        tui.pump(0.2)
        return tui.text.rfind("connected | idle") > tui.text.rfind("| gateway connected")

    wait_for(idle, timeout, "the TUI to be idle", interval=0)


def test_interactive(world: World, model_api: FakeModelAPI) -> None:
    install(world)
    gateway, url, token = start_gateway(world)
    tui = Terminal(["openclaw", "tui", "--url", url, "--token", token], world)
    try:
        tui.expect(r"connected \| idle", 90)
        start = len(tui.text)
        tui.type_line(QUESTION)
        tui.expect(re.escape(ANSWER[:40]), 90, since=start)
        entry = journal_entry(world)  # agent_end ran in the gateway; the worker summarised and wrote
        check_summary_request(model_api)
        check_recall_cli(world, entry)

        wait_idle(tui)
        start = len(tui.text)
        tui.type_line(RECALL)  # the next run of the session: before_prompt_build injects the entry
        tui.expect(re.escape(FINAL), 120, since=start)
        check_recall_round_trip(model_api)
        wait_idle(tui)
        tui.type_line("/exit")
        assert tui.wait(30) == 0, tui.text[-2000:]
    finally:
        tui.close()
        status = stop_gateway(gateway)
    assert status == 0, f"the gateway exited with status {status}"
    check_no_leftovers(world)
