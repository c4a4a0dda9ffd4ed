"""The plugins folder holds manifests, skills and tiny shims — never logic, never copies.

Rules: every ``plugins/<platform>/`` file is a JSON manifest, a markdown skill or
document, or a shim of at most 15 lines; no two files under ``plugins/`` are identical (shared
logic, prompts and parsers live once, in the package). Also checked: the manifests parse and agree
with each other and with the engine's platform table, and each shim calls its own platform.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

import memsearch
from memsearch.hooks.engine import ACTIONS, EVENT_ALIASES
from memsearch.hooks.events import EVENTS
from memsearch.hooks.platforms import PLATFORMS

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
MAX_SHIM_LINES = 15
#: Manifests and skills/docs may be long; everything else is a shim.
NOT_SHIMS = (".json", ".md")


def plugin_files() -> list[Path]:
    return sorted(p for p in PLUGINS.rglob("*") if p.is_file())


def platform_dirs() -> list[Path]:
    return sorted(p for p in PLUGINS.iterdir() if p.is_dir())


def test_every_platform_folder_has_only_manifests_skills_and_short_shims() -> None:
    assert {p.name for p in platform_dirs()} >= {"claude-code", "codex"}
    for platform in platform_dirs():
        for path in sorted(p for p in platform.rglob("*") if p.is_file()):
            if path.suffix in NOT_SHIMS:
                continue
            lines = path.read_text(encoding="utf-8").splitlines()
            assert len(lines) <= MAX_SHIM_LINES, f"{path.relative_to(ROOT)} has {len(lines)} lines"


def test_no_two_files_under_plugins_are_identical() -> None:
    seen: dict[str, Path] = {}
    for path in plugin_files():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert digest not in seen, f"{path.relative_to(ROOT)} duplicates {seen[digest].relative_to(ROOT)}"
        seen[digest] = path


def test_json_files_parse() -> None:
    for path in [*plugin_files(), ROOT / ".claude-plugin" / "marketplace.json"]:
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))


def test_shims_are_executable_and_call_their_own_platform() -> None:
    for platform in ("claude-code", "codex"):
        shim = PLUGINS / platform / "hooks" / "run.sh"
        assert os.access(shim, os.X_OK)
        text = shim.read_text(encoding="utf-8")
        calls = re.findall(r"memsearch hook (\S+)", text)
        assert calls and set(calls) == {platform}, calls
    assert os.access(PLUGINS / "codex" / "install.sh", os.X_OK)


def test_marketplace_points_at_the_claude_code_plugin() -> None:
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    (entry,) = market["plugins"]
    source = (ROOT / entry["source"]).resolve()
    assert source == PLUGINS / "claude-code"
    manifest = json.loads((source / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == entry["name"] == "memsearch"
    assert manifest["version"] == entry["version"] == memsearch.__version__


def test_claude_code_hooks_cover_every_event_of_the_engine() -> None:
    config = json.loads((PLUGINS / "claude-code" / "hooks" / "hooks.json").read_text())["hooks"]
    platform = PLATFORMS["claude-code"]
    assert set(config) == set(platform.events.values())
    for host_event, groups in config.items():
        ((hook,),) = [g["hooks"] for g in groups]
        match = re.fullmatch(r'bash "\$\{CLAUDE_PLUGIN_ROOT\}/hooks/run\.sh" (\S+)', hook["command"])
        assert match, hook["command"]
        event = match.group(1)
        assert platform.events[event] == host_event
        assert EVENT_ALIASES.get(host_event.lower(), event) == event
        # No async hook: claude -p (2.1.197) kills one still running at exit; Stop detaches its own worker.
        assert "async" not in hook


@pytest.mark.parametrize("platform", ["claude-code", "codex", "openclaw", "opencode"])
def test_skills_have_frontmatter_naming_their_folder(platform: str) -> None:
    skills = sorted((PLUGINS / platform / "skills").glob("*/SKILL.md"))
    assert {s.parent.name for s in skills} == {"memory-recall", "memory-config", "memory-to-skill"}
    for skill in skills:
        text = skill.read_text(encoding="utf-8")
        head, sep, body = text.removeprefix("---\n").partition("\n---\n")
        assert sep and body.strip(), skill
        fields = dict(line.split(": ", 1) for line in head.splitlines())
        assert fields["name"] == skill.parent.name
        assert len(fields["description"]) > 80
        # Claude Code runs these skills in a forked context; the other hosts have no such field.
        # memory-to-skill runs in the conversation: capturing "what we just did" needs it.
        assert ("context" in fields) is (platform == "claude-code" and skill.parent.name != "memory-to-skill")
        if platform == "openclaw":  # OpenClaw reads its own metadata block as JSON
            assert "openclaw" in json.loads(fields["metadata"])
        # Every command a skill shows for this platform is one the hook engine has.
        for action in re.findall(rf"hook {platform} ([a-z-]+)", body):
            assert action in ACTIONS or action in EVENTS, action
        assert (
            "memsearch transcript" in body
            or "__MEMSEARCH__ transcript" in body
            or "memory_transcript" in body  # the OpenClaw/OpenCode tool that runs it
            or skill.parent.name != "memory-recall"
        )
