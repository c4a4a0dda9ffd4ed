"""The plugins' ``memory-to-skill`` skill: every command it shows exists, its folders match where
``skills install --platform`` puts skills, and its capture snippet works when bash runs it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from memsearch import skills
from memsearch.agent.hooks.install import install_skills
from memsearch.cli.skills_cmd import skills as skills_group
from memsearch.config import MemSearchConfig

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = ["claude-code", "codex", "openclaw", "opencode", "dsh"]
MEMSEARCH = {
    "claude-code": "memsearch",
    "codex": "__MEMSEARCH__",
    "openclaw": "memsearch",
    "opencode": "memsearch",
    "dsh": "memsearch",
}


def skill_text(platform: str) -> str:
    return (ROOT / "plugins" / platform / "skills" / "memory-to-skill" / "SKILL.md").read_text(
        encoding="utf-8"
    )


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_skills_command_and_option_shown_exists(platform: str) -> None:
    text = skill_text(platform)
    ms = re.escape(MEMSEARCH[platform])
    shown = re.findall(rf"{ms} skills (\w+)([^\n`]*)", text)
    assert {sub for sub, _ in shown} >= {"add", "status", "list", "install"}
    for sub, rest in shown:
        command = skills_group.commands[sub]
        known = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
        for flag in re.findall(r"(?<![\w-])(--[a-z-]+)", rest):
            assert flag in known, f"{platform}: skills {sub} {flag}"
        for value in re.findall(r"--platform (\S+)", rest):
            assert value == platform


@pytest.mark.parametrize("platform", PLATFORMS)
def test_config_keys_shown_exist(platform: str) -> None:
    text = skill_text(platform)
    keys = set(re.findall(r"config (?:get|set) (plugins\.[\w.-]+)", text))
    assert keys == {
        f"plugins.{platform}.memory_to_skill.{k}" for k in ("enabled", "min_occurrences", "paths")
    }
    task = MemSearchConfig().plugins.claude_code.memory_to_skill
    for key in keys:
        assert hasattr(task, key.rsplit(".", 1)[1])


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_folders_named_are_where_install_puts_skills(platform: str, tmp_path: Path) -> None:
    text = " ".join(skill_text(platform).split())
    project_rel, user_dir = skills.HOST_SKILL_DIRS[platform]
    assert f"`{project_rel}` in the" in text
    assert f"`{user_dir}` for all" in text or f"`{user_dir}` for every" in text


def test_codex_installer_ships_it_with_the_real_memsearch(tmp_path: Path) -> None:
    names = install_skills(
        ROOT / "plugins" / "codex" / "skills", tmp_path, {"__MEMSEARCH__": "/opt/ms/memsearch"}
    )
    assert "memory-to-skill" in names
    text = (tmp_path / "memory-to-skill" / "SKILL.md").read_text()
    assert "__MEMSEARCH__" not in text and "/opt/ms/memsearch skills add" in text


def test_the_capture_snippet_runs_as_written(tmp_path: Path) -> None:
    (block,) = [b for b in code_blocks(skill_text("claude-code")) if "skills add" in b]
    script = (
        block.replace("<short name, e.g. deploy-staging>", "Deploy staging")
        .replace(
            "<what it does, then when to use it, in the words a user would type>", "Deploy. Use to ship."
        )
        .replace("<title>", "Deploy staging")
        .replace("1. ...", "1. make build")
        .replace("2. ...", "2. ./deploy.sh staging")
    )
    project = tmp_path / "proj"
    project.mkdir()
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    env.pop("MEMSEARCH_DIR", None)
    proc = subprocess.run(
        ["bash", "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Added candidate skill: deploy-staging")
    (candidate,) = skills.list_candidates(project / ".memsearch")
    assert candidate.description == "Deploy. Use to ship."
    assert candidate.body() == "## Deploy staging\n\n1. make build\n2. ./deploy.sh staging"
    # The review commands it shows then work on that store, as written.
    (review,) = [b for b in code_blocks(skill_text("claude-code")) if "skills status" in b]
    for line in review.splitlines():
        command = line.split("  #")[0].strip()
        if not command or "<commit>" in command:
            continue
        ran = subprocess.run(
            shlex.split(command), cwd=project, env=env, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, (command, ran.stderr)
