"""DeepSeek Harness 0.1.0-rc.8 (on node 24.21.0) itself running the memsearch plugin, against the fake
model API: two one-shot ``dsh --profile headless`` sessions in one project.

DSH is installed by tests/real_hosts.py from npm with ``--legacy-peer-deps`` (the only way npm takes
it: its peer packages are named and its Cordis packages pinned, see ``real_hosts.DSH_PACKAGES``),
together with pnpm 10.34.9 for ``dsh plugin``. The world's HOME is empty apart from what the test
writes; DSH talks to the fake API through ``DEEPSEEK_BASE_URL`` (OpenAI chat completions, streamed).

What it proves, in the order of the common checklist:

1. the plugin installs as docs/platforms/dsh.md says (its ``<!-- install:plugin -->`` block, run
   verbatim with this checkout for ``/path/to/memsearch``: ``dsh plugin --profile headless add``);
2. ``turn/end`` reaches memsearch: the first session's turn is journaled, with the original's
   anchor ``<!-- session:<id> turn:1 db:<session artifact> -->``;
3. the summary came from the nested ``dsh --profile headless`` (its request carried the turn, offered
   no ``bash`` tool, and left no session in the user's ``~/.dsh/sessions``);
4. ``memsearch transcript`` on the anchor's ``db`` (DSH's zstd-compressed file) shows that turn;
5. ``agent/pre-step`` reaches the model: the second session's first request carries the recall hint
   and the first session's journal bullets;
6. the ``memory-recall`` skill is offered; the fake model loads it with DSH's ``skill`` tool, runs its
   first command with DSH's ``bash`` tool (a real ``memsearch search``), and the hits come back to it;
7. nothing of the world is left running once the detached workers are done.

A second test mounts the plugin the doc's other way, ``~/.dsh/cordis.patch.yml`` (no pnpm), and
checks that a session there gets the skills and the memory note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_model_api import Answer, FakeModelAPI, ModelCall, running_model_api
from fixtures.privacy import corpus
from real_hosts import (
    World,
    check_secrets_kept,
    kill_world,
    leftovers,
    make_world,
    parrot_summaries,
    plant_journal,
)

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "platforms" / "dsh.md"
CHECKOUT = "/path/to/memsearch"
QUESTION = "Which queue should the invoice exporter use? Codeword ZEBRAFISH-7"
ANSWER = "Use the fast queue for the invoice exporter."
BULLET = "Decided: the invoice exporter uses the fast queue (ZEBRAFISH-7)."
RECALL = "What did we decide about the exporter queue earlier? RECALLCHECK"
FINAL = "From memory: the fast queue."
SUMMARY_MARK = "=== Transcript of a conversation between User and DeepSeek Harness ==="
HINT = "load the memory-recall skill"
ANCHOR = re.compile(r"<!-- session:(session-\S+) turn:(\d+) db:(\S+) -->")
#: Seconds for a detached worker to summarise (a nested DSH), write and index, and for the memory
#: service a search started to time out (the world sets 3 s): about 15 s on an idle machine, but
#: several times that on 2 cores shared with other test runs.
DRAIN = 240.0


def doc_block(name: str) -> str:
    """The bash block after ``<!-- install:<name> -->`` in the doc, for this checkout."""
    match = re.search(rf"<!-- install:{name} -->\s*```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match, f"docs/platforms/dsh.md has no install block {name!r}"
    return match.group(1).replace(CHECKOUT, str(ROOT))


def is_summary(call: ModelCall) -> bool:
    return SUMMARY_MARK in call.everything


def typed(call: ModelCall) -> str:
    """What the person typed: the first user message (DSH and plugins add theirs after it)."""
    return next((m.text for m in call.messages if m.role == "user"), "")


def recall_step(call: ModelCall) -> Answer:
    """memory-recall through DSH's tools: load the skill, run its search command, then answer."""
    called = [m.tool_call for m in call.messages if m.tool_call]
    if not called:
        return Answer(tool="skill", arguments={"name": "memory-recall"})
    if called[-1] == "skill":
        skill = call.messages[-1].tool_result or ""
        command = re.search(r"^memsearch search .*$", skill, re.M)
        assert command, f"the skill's body did not reach the model: {skill[:500]}"
        line = command.group(0).replace("<what you are looking for>", "invoice exporter queue")
        return Answer(tool="bash", arguments={"command": line, "description": "search memsearch"})
    return Answer(text=FINAL)


@pytest.fixture
def api() -> Iterator[FakeModelAPI]:
    with running_model_api() as served:
        served.on(is_summary, Answer(text=f"- User asked which queue the invoice exporter uses.\n- {BULLET}"))
        served.on(lambda c: bool(c.tools) and RECALL in typed(c), recall_step)
        served.on(lambda c: bool(c.tools) and QUESTION in typed(c), Answer(text=ANSWER))
        yield served


@pytest.fixture
def world(tmp_path: Path, api: FakeModelAPI) -> Iterator[World]:
    w = make_world(
        tmp_path,
        "dsh",
        DEEPSEEK_BASE_URL=api.url,
        DEEPSEEK_API_KEY="sk-fake",
        DSH_TELEMETRY_DISABLED="1",
        npm_config_update_notifier="false",
    )
    try:
        yield w
    finally:
        kill_world(w)


def headless(world: World, api: FakeModelAPI, task: str) -> str:
    proc = world.run(["dsh", "--profile", "headless", task], timeout=180)
    trace = [(c.path, len(c.tools), typed(c)[:80]) for c in api.snapshot()]
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-3000:]}\nmodel calls: {trace}"
    return proc.stdout


def journal(world: World) -> str:
    return "\n".join(p.read_text() for p in sorted((world.project / ".memsearch" / "memory").glob("*.md")))


def agent_calls(api: FakeModelAPI, text: str) -> list[ModelCall]:
    """The agent's requests (tools offered) of the session whose task is ``text``."""
    return [c for c in api.snapshot() if c.tools and text in typed(c) and not is_summary(c)]


def test_two_headless_sessions(world: World, api: FakeModelAPI) -> None:
    world.run(["bash", "-euc", doc_block("plugin")], check=True, timeout=120)  # 1
    manifest = json.loads((world.home / ".dsh" / "profiles" / "headless" / "package.json").read_text())
    assert "@memsearch/dsh" in manifest["dsh"]["profile"]["bundles"]

    assert ANSWER in headless(world, api, QUESTION)
    # The detached worker summarises, writes and indexes, then nothing of the session is left.
    assert leftovers(world, DRAIN) == {}  # 7
    entry = journal(world)
    assert BULLET in entry
    session, turn, db = ANCHOR.findall(entry)[-1]  # 2
    assert turn == "1" and entry.startswith("# ")
    assert Path(db).name == "session.jsonl.zstd" and session in db
    summaries = [c for c in api.snapshot() if is_summary(c)]  # 3
    assert summaries and QUESTION in summaries[0].everything and ANSWER in summaries[0].everything
    assert "bash" not in summaries[0].tools and "skill" not in summaries[0].tools
    assert [p.name for p in (world.home / ".dsh" / "sessions").iterdir()] == [Path(db).parent.parent.name]
    shown = world.run(["memsearch", "transcript", db, "--turn", turn], check=True).stdout  # 4
    assert f"### User (1) [selected]\n{QUESTION}" in shown and ANSWER in shown

    assert FINAL in headless(world, api, RECALL)
    first, *later = agent_calls(api, RECALL)
    assert HINT in first.everything and BULLET in first.everything  # 5
    assert "memory-recall" in first.everything  # 6: the skill is in DSH's skill list
    results = [m.tool_result or "" for c in later for m in c.messages if m.tool_result is not None]
    assert any("<skill_content" in r and "memsearch search" in r for r in results), results
    hits = [r for r in results if '"chunk_hash"' in r]
    assert hits and "ZEBRAFISH-7" in hits[-1] and f"turn:{turn}" in hits[-1], results
    assert leftovers(world, DRAIN) == {}  # 7
    assert len(ANCHOR.findall(journal(world))) == 2  # the recall turn is journaled too


def test_secrets_never_reach_memory(world: World, api: FakeModelAPI) -> None:
    """The secrets corpus in the task, in a ``bash`` tool's output and in the answer of a real
    headless DSH session: captured, summarised by the nested DSH, and not one value on disk under
    ``.memsearch`` or in the summariser's request."""
    planted = plant_journal(world)
    world.run(["bash", "-euc", doc_block("plugin")], check=True, timeout=120)
    (world.project / "deploy-notes.txt").write_text(corpus.TOOL_OUTPUT)
    parrot_summaries(api, is_summary, f"- User asked which queue the invoice exporter uses.\n- {BULLET}")

    def step(call: ModelCall) -> Answer:
        if not any(m.tool_call for m in call.messages):
            return Answer(
                tool="bash", arguments={"command": "cat deploy-notes.txt", "description": "read notes"}
            )
        return Answer(text=corpus.REPLY)

    api.on(lambda c: bool(c.tools) and corpus.PROMPT in typed(c) and not is_summary(c), step)
    assert "for the release job" in headless(world, api, corpus.PROMPT)
    assert leftovers(world, DRAIN) == {}  # the worker is done writing and indexing
    assert BULLET in journal(world)
    calls = api.snapshot()
    results = "".join(m.tool_result or "" for c in agent_calls(api, corpus.PROMPT) for m in c.messages)
    assert corpus.kinds_in(corpus.TOOL_OUTPUT) <= corpus.kinds_in(results)
    assert any("for the release job" in c.everything for c in calls if is_summary(c))  # the answer, redacted
    check_secrets_kept(world, calls, is_summary, planted)


def test_home_patch_mounts_the_plugin_without_pnpm(world: World, api: FakeModelAPI) -> None:
    world.run(["bash", "-euc", doc_block("home-patch")], check=True)
    memory = world.project / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-01-05.md").write_text("# 2026-01-05\n\n## Session 09:00\n\n### 09:00\n- " + BULLET + "\n")
    assert ANSWER in headless(world, api, QUESTION)
    (call,) = agent_calls(api, QUESTION)
    assert HINT in call.everything and BULLET in call.everything and "memory-recall" in call.everything
    assert leftovers(world, DRAIN) == {}
