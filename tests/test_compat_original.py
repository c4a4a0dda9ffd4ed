"""Drop-in, measured: the original memsearch 0.4.23 and this package on one Milvus Lite database.

A user who switches tools (either way) keeps the index: every chunk ID the one wrote is the ID the
other computes, so the first ``index`` after the switch embeds nothing; searches find the same
chunks; ``expand`` shows the same text. Both tools run as real CLIs (the original from a side venv
installed from the registry) and embed through one local endpoint serving our packaged model.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.chunker import chunk_markdown
from memsearch.store import MilvusStore
from original_memsearch import MODEL, flags, original_cli, original_source, run, serving_packaged_model

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parents[1]
OURS = Path(sys.executable).parent / "memsearch"
QUERIES = ["file watcher missed renamed files", "订单导出失败"]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with serving_packaged_model() as url:
        yield url


@pytest.fixture(scope="module")
def original() -> Path:
    return original_cli()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """Hand-written notes and plugin journals (English and Chinese, with and without a final line
    break): what a migrating user has."""
    root = tmp_path / "notes"
    shutil.copytree(ROOT / "examples" / "memory", root)
    shutil.copytree(ROOT / "tests" / "fixtures" / "hooks" / "memory", root / "journal")
    (root / "no-final-newline.md").write_text(
        "# Orders\n\n订单导出失败：CSV 编码错误，改用 UTF-8 BOM。", "utf-8"
    )
    (root / HEADING_ONLY).write_text("# Renew the wildcard TLS certificate before 2026-12-20\n", "utf-8")
    return root


#: A note that is only a heading: the original gives it no chunk, we give it one (issue 38).
HEADING_ONLY = "todo.md"


def stored_ids(db: Path, collection: str) -> set[str]:
    with MilvusStore(str(db), collection=collection, dimension=None) as store:
        return {row["chunk_hash"] for row in store.query()}


def our_ids(notes: Path, *, only: str | None = None) -> set[str]:
    return {
        chunk.chunk_id(MODEL)
        for path in sorted(notes.rglob("*.md"))
        if only is None or path.name == only
        for chunk in chunk_markdown(path.read_text(encoding="utf-8"), str(path))
    }


def search(cli: Path, query: str, common: list[str]) -> list[str]:
    result = run(cli, "search", query, "--top-k", "5", "--json-output", *common)
    assert result.returncode == 0, result.stderr
    return [hit["chunk_hash"] for hit in json.loads(result.stdout)]


def expand(cli: Path, chunk_hash: str, common: list[str]) -> str:
    result = run(cli, "expand", chunk_hash, *common)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("first", ["original", "ours"])
def test_switching_tools_keeps_the_index(
    first: str, original: Path, endpoint: str, notes: Path, tmp_path: Path
) -> None:
    writer, switcher = (original, OURS) if first == "original" else (OURS, original)
    db = tmp_path / "milvus.db"
    common = flags(endpoint, db, "compat")

    # Every chunk gets the same ID from both tools; the one difference is the heading-only note,
    # which only we index (and the original, finding our chunk of it stale, removes).
    heading_only = our_ids(notes, only=HEADING_ONLY)
    assert len(heading_only) == 1
    shared = our_ids(notes) - heading_only

    built = run(writer, "index", str(notes), *common)
    assert built.returncode == 0, built.stderr
    written = stored_ids(db, "compat")
    assert written == (shared if writer == original else shared | heading_only)

    switched = run(switcher, "index", str(notes), *common)
    assert switched.returncode == 0, switched.stderr
    embedded = "Indexed 1 chunk." if switcher == OURS else "Indexed 0 chunks."  # nothing else re-embedded
    assert switched.stdout.strip().splitlines()[-1] == embedded
    assert stored_ids(db, "compat") == (shared | heading_only if switcher == OURS else shared)

    for query in QUERIES:
        hits = search(original, query, common)
        assert set(search(OURS, query, common)) == set(hits), query
        for chunk_hash in hits[:1]:
            assert expand(OURS, chunk_hash, common) == expand(original, chunk_hash, common)


# --- the original's own plugin hooks, driving our CLI ----------------------------------------


def _claude_transcript(path: Path, session: str, cwd: Path) -> str:
    """A three-record Claude Code transcript (one turn); returns the user turn's uuid."""
    turn = "b2c0d1e2-0001-4000-8000-000000000001"
    base = {"sessionId": session, "cwd": str(cwd), "version": "2.1.197", "isSidechain": False}
    records = [
        {"type": "summary", "summary": "Invoice rounding", "leafUuid": turn},
        {
            **base,
            "type": "user",
            "uuid": turn,
            "parentUuid": None,
            "timestamp": "2026-12-01T09:00:00Z",
            "message": {"role": "user", "content": "How should invoice totals be rounded per line?"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "b2c0d1e2-0002-4000-8000-000000000002",
            "parentUuid": turn,
            "timestamp": "2026-12-01T09:00:05Z",
            "message": {
                "role": "assistant",
                "model": "claude",
                "content": [
                    {"type": "text", "text": "Use Decimal with ROUND_HALF_UP on every line, then sum."}
                ],
            },
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return turn


def test_original_claude_code_hooks_accept_our_cli_and_capture(tmp_path: Path) -> None:
    """A user who keeps the original 0.4.23 Claude Code plugin and installs our CLI keeps memory:
    its hooks accept our CLI (they check --default-collection), capture a turn through the real
    `claude -p` summariser, and index it where our `search` finds it."""
    from fake_model_api import Answer, running_model_api
    from memsearch.agent.hooks.collection import derive_collection
    from real_hosts import kill_world, leftovers, make_world

    plugin = original_source() / "plugins" / "claude-code"
    with running_model_api() as api:
        api.on(
            lambda call: "note-taker" in call.everything,
            Answer(
                text="- User asked how to round invoice totals.\n"
                "- Claude Code: Decimal, ROUND_HALF_UP per line."
            ),
        )
        world = make_world(
            tmp_path,
            "claude-code",
            ANTHROPIC_BASE_URL=api.url,
            ANTHROPIC_API_KEY="sk-fake",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            CLAUDE_PLUGIN_ROOT=str(plugin),
            CLAUDE_PROJECT_DIR=str(tmp_path / "project"),
        )
        try:
            session = "5e55a0e1-0000-4000-8000-00000000c0de"
            transcript = tmp_path / "session.jsonl"
            turn = _claude_transcript(transcript, session, world.project)
            # An existing user has a config file (on a first run the original's session-start writes
            # one and its own `config set` line lands in the hook's JSON: the original's bug, either CLI).
            world.run([str(OURS), "config", "set", "embedding.provider", "onnx"], check=True)
            hook_input = {
                "session_id": session,
                "transcript_path": str(transcript),
                "cwd": str(world.project),
            }

            start = world.run(
                ["bash", str(plugin / "hooks" / "session-start.sh")],
                stdin=json.dumps({**hook_input, "hook_event_name": "SessionStart", "source": "startup"}),
            )
            assert start.returncode == 0, start.stderr
            assert "incompatible" not in start.stdout, start.stdout
            assert "collection:" in json.loads(start.stdout)["systemMessage"]

            stop = world.run(
                ["bash", str(plugin / "hooks" / "stop.sh")],
                stdin=json.dumps({**hook_input, "hook_event_name": "Stop", "stop_hook_active": False}),
            )
            assert stop.returncode == 0, stop.stderr
            journals = list((world.project / ".memsearch" / "memory").glob("*.md"))
            assert len(journals) == 1
            entry = journals[0].read_text(encoding="utf-8")
            assert f"turn:{turn}" in entry and "Decimal, ROUND_HALF_UP" in entry
            summary = [c for c in api.snapshot() if "note-taker" in c.everything]
            assert summary and "invoice totals be rounded" in summary[0].everything

            collection = derive_collection(str(world.project))
            found = world.run(
                [
                    str(OURS),
                    "index",
                    str(world.project / ".memsearch" / "memory"),
                    "--default-collection",
                    collection,
                ],
                check=True,
            )
            assert found.returncode == 0
            hits = json.loads(
                world.run(
                    [
                        str(OURS),
                        "search",
                        "invoice rounding",
                        "--json-output",
                        "--default-collection",
                        collection,
                    ],
                    check=True,
                ).stdout
            )
            assert hits and f"turn:{turn}" in hits[0]["content"]

            end = world.run(
                ["bash", str(plugin / "hooks" / "session-end.sh")],
                stdin=json.dumps({**hook_input, "hook_event_name": "SessionEnd"}),
            )
            assert end.returncode == 0, end.stderr
            assert leftovers(world, wait=30) == {}
        finally:
            kill_world(world)


def test_original_codex_hooks_accept_our_cli_and_capture(tmp_path: Path) -> None:
    """The same for the original 0.4.23 Codex hooks: session start accepts our CLI, and Stop's
    detached worker summarises through the real `codex exec` and writes an entry we can search."""
    from fake_model_api import Answer, running_model_api
    from memsearch.agent.hooks.collection import derive_collection
    from real_hosts import kill_world, leftovers, make_world
    from test_host_codex import codex_config

    plugin = original_source() / "plugins" / "codex"
    rollout = tmp_path / "rollout-2026-12-01T10-00-00-0199d2a0-0000-7c00-8a00-00000000abcd.jsonl"
    shutil.copy(ROOT / "tests" / "fixtures" / "hooks" / "codex-rollout.jsonl", rollout)
    with running_model_api() as api:
        api.on(
            lambda call: "Final exchange, authoritative" in call.everything,
            Answer(text="- User asked to list the CSV exporters.\n- Codex listed them."),
        )
        world = make_world(tmp_path, "codex", FAKE_MODEL_KEY="sk-fake")
        try:
            codex_home = Path(world.env["CODEX_HOME"])
            codex_home.mkdir(parents=True)
            (codex_home / "config.toml").write_text(codex_config(api, world.project))
            world.run([str(OURS), "config", "set", "embedding.provider", "onnx"], check=True)
            hook_input = {
                "session_id": "0199d2a0-0000-7c00-8a00-00000000abcd",
                "cwd": str(world.project),
                "transcript_path": str(rollout),
            }
            start = world.run(
                ["bash", str(plugin / "hooks" / "session-start.sh")],
                stdin=json.dumps({**hook_input, "hook_event_name": "SessionStart"}),
            )
            assert start.returncode == 0, start.stderr
            assert "incompatible" not in start.stdout and "collection:" in start.stdout, start.stdout

            stop = world.run(
                ["bash", str(plugin / "hooks" / "stop.sh")],
                stdin=json.dumps(
                    {
                        **hook_input,
                        "hook_event_name": "Stop",
                        "last_assistant_message": "Three exporters: a, b, c.",
                    }
                ),
            )
            assert stop.returncode == 0, stop.stderr
            memory = world.project / ".memsearch" / "memory"
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and "Codex listed them" not in _read_all(memory):
                time.sleep(0.5)
            entry = _read_all(memory)
            assert "Codex listed them" in entry and f"rollout:{rollout}" in entry, entry
            summary = [c for c in api.snapshot() if "Final exchange, authoritative" in c.everything]
            assert summary and "CSV exporter quote every field" in summary[0].everything  # the last turn

            collection = derive_collection(str(world.project))
            world.run([str(OURS), "index", str(memory), "--default-collection", collection], check=True)
            hits = json.loads(
                world.run(
                    [
                        str(OURS),
                        "search",
                        "CSV exporters",
                        "--json-output",
                        "--default-collection",
                        collection,
                    ],
                    check=True,
                ).stdout
            )
            assert hits and "Codex listed them" in hits[0]["content"]
            assert leftovers(world, wait=60) == {}
        finally:
            kill_world(world)


def _read_all(folder: Path) -> str:
    return (
        "".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))) if folder.is_dir() else ""
    )
