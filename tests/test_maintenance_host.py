"""The maintenance tasks' no-key path with the real Claude Code (from npm) as the model's host.

``memsearch maintenance run`` asks ``claude -p`` (the summariser's invocation: no tools, hooks off,
outside the project), which talks to the fake model API; memsearch itself has no API key. The
fake model answers the PROJECT.md prompt; the file is written, indexed and found.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_model_api import Answer, FakeModelAPI, running_model_api
from real_hosts import World, claude_world, kill_world

pytestmark = pytest.mark.host

PROJECT = "# Project\n\nZebra-ledger service; the migration ships behind a blue-green switch."


@pytest.fixture
def api() -> Iterator[FakeModelAPI]:
    with running_model_api() as fake:
        answer = json.dumps({"action": "replace", "reason": "first review", "content": PROJECT})
        fake.on(lambda c: "You keep PROJECT.md" in c.user_text, Answer(text=answer))
        yield fake


@pytest.fixture
def world(tmp_path: Path, api: FakeModelAPI) -> Iterator[World]:
    world = claude_world(tmp_path, api.url)
    try:
        yield world
    finally:
        kill_world(world)


def test_project_review_through_the_real_claude_cli(world: World, api: FakeModelAPI) -> None:
    memory = world.project / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    for day in range(1, 4):
        (memory / f"2026-06-0{day}.md").write_text(
            f"# 2026-06-0{day}\n\n## Session 09:00\n\n### 09:00\n"
            "- Decided: the zebra-ledger migration ships behind a blue-green switch.\n",
            encoding="utf-8",
        )
    (world.home / ".memsearch").mkdir(exist_ok=True)
    (world.home / ".memsearch" / "config.toml").write_text(
        f'[milvus]\nuri = "{world.home / "milvus.db"}"\n\n'
        "[plugins.claude-code.project_review]\nenabled = true\nmin_interval_hours = 0\n",
        encoding="utf-8",
    )
    proc = world.run(["memsearch", "maintenance", "run"], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].startswith("project_review: replace"), proc.stdout
    assert (world.project / ".memsearch" / "PROJECT.md").read_text() == PROJECT + "\n"

    [call] = [c for c in api.snapshot() if "You keep PROJECT.md" in c.user_text]
    assert call.protocol == "anthropic" and "sonnet" in call.model, call.model  # Claude Code's sonnet
    assert "blue-green switch" in call.user_text and "2026-06-03.md" in call.user_text
    assert call.tools == []  # the host CLI runs without tools

    collection = world.run(["memsearch", "hook", "claude-code", "collection"], check=True).stdout.strip()
    found = world.run(
        ["memsearch", "search", "blue-green switch", "--json-output", "--collection", collection], check=True
    )
    assert str(world.project / ".memsearch" / "PROJECT.md") in {h["source"] for h in json.loads(found.stdout)}
