"""``memsearch skills install --platform`` inside the real hosts: the skill reaches the model.

For each host (the versions ``real_hosts`` pins), a world with its own HOME and project: two
candidates are saved with ``memsearch skills add``, one installed for the project
(``--platform HOST``) and one for the user (``--platform HOST --user``), then the host runs one
turn against the fake model API. Both skills' descriptions must be in what the host sent the model
(its list of available skills): proof that each folder is one the host really reads.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_model_api import Answer, FakeModelAPI, running_model_api
from real_hosts import World, claude_world, kill_world, make_world, opencode_world

pytestmark = pytest.mark.host

PROJECT_MARK = "QZX-PROJECT-SKILL"
USER_MARK = "QZX-USER-SKILL"


@pytest.fixture
def api() -> Iterator[FakeModelAPI]:
    with running_model_api() as served:
        served.on(lambda call: True, Answer(text="ok"))
        yield served


def add_and_install(world: World, platform: str) -> None:
    for name, mark, extra in (("zebra-deploy", PROJECT_MARK, []), ("zebra-rollback", USER_MARK, ["--user"])):
        description = f"Use when asked to {name.replace('-', ' ')} the zebra service ({mark})."
        world.run(
            ["memsearch", "skills", "add", "--name", name, "--description", description, "--body-file", "-"],
            stdin=f"## {name}\n\n1. run `make {name}`\n",
            check=True,
        )
        world.run(["memsearch", "skills", "install", name, "--platform", platform, *extra], check=True)


def seen_by_model(api: FakeModelAPI) -> str:
    return "\n".join(json.dumps(call.body, ensure_ascii=False) for call in api.snapshot())


def check(api: FakeModelAPI, out: str) -> None:
    seen = seen_by_model(api)
    assert seen, f"no request reached the model: {out}"
    assert PROJECT_MARK in seen, "the project-level skill was not offered"
    assert USER_MARK in seen, "the user-level skill was not offered"


def test_claude_code(tmp_path: Path, api: FakeModelAPI) -> None:
    world = claude_world(tmp_path, api.url)
    try:
        add_and_install(world, "claude-code")
        assert (world.project / ".claude/skills/zebra-deploy/SKILL.md").is_file()
        assert (world.home / ".claude/skills/zebra-rollback/SKILL.md").is_file()
        proc = world.run(["claude", "-p", "Say ok."], timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        check(api, proc.stdout + proc.stderr)
    finally:
        kill_world(world)


def test_codex(tmp_path: Path, api: FakeModelAPI) -> None:
    world = make_world(tmp_path, "codex", FAKE_MODEL_KEY="sk-fake")
    try:
        codex_home = Path(world.env["CODEX_HOME"])
        codex_home.mkdir(parents=True)
        (codex_home / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "{api.url}/v1"\nwire_api = "responses"\n'
            f'env_key = "FAKE_MODEL_KEY"\n\n[projects."{world.project}"]\ntrust_level = "trusted"\n'
        )
        add_and_install(world, "codex")
        assert (world.project / ".agents/skills/zebra-deploy/SKILL.md").is_file()
        assert (world.home / ".agents/skills/zebra-rollback/SKILL.md").is_file()
        proc = world.run(["codex", "exec", "Say ok."], timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        check(api, proc.stdout + proc.stderr)
    finally:
        kill_world(world)


def test_opencode(tmp_path: Path, api: FakeModelAPI) -> None:
    world = opencode_world(tmp_path, api.url)
    try:
        add_and_install(world, "opencode")
        assert (world.project / ".opencode/skills/zebra-deploy/SKILL.md").is_file()
        assert (world.home / ".config/opencode/skills/zebra-rollback/SKILL.md").is_file()
        proc = world.run(["opencode", "run", "Say ok."], timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        check(api, proc.stdout + proc.stderr)
    finally:
        kill_world(world)


def test_openclaw(tmp_path: Path, api: FakeModelAPI) -> None:
    world = make_world(tmp_path, "openclaw")
    try:
        model = {"id": "fake-model", "name": "Fake", "reasoning": False, "input": ["text"]}
        config = {
            "models": {
                "mode": "merge",
                "providers": {
                    "fake": {
                        "baseUrl": f"{api.url}/v1",
                        "apiKey": "fake-key",
                        "api": "openai-completions",
                        "models": [{**model, "contextWindow": 128000, "maxTokens": 4096}],
                    }
                },
            },
            "agents": {
                "defaults": {
                    "model": {"primary": "fake/fake-model"},
                    "utilityModel": "",
                    "workspace": str(world.project),  # the project is the agent's workspace
                    "skipBootstrap": True,
                }
            },
        }
        (world.home / ".openclaw").mkdir(parents=True, exist_ok=True)
        (world.home / ".openclaw" / "openclaw.json").write_text(json.dumps(config))
        add_and_install(world, "openclaw")
        assert (world.project / "skills/zebra-deploy/SKILL.md").is_file()
        assert (world.home / ".openclaw/skills/zebra-rollback/SKILL.md").is_file()
        session = f"sk-{uuid.uuid4().hex[:8]}"
        argv = ["openclaw", "agent", "--local", "--agent", "main", "--session-id", session, "-m", "Say ok."]
        proc = world.run(argv, timeout=180)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        check(api, proc.stdout + proc.stderr)
    finally:
        kill_world(world)
