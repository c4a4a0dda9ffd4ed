"""The plugins folder holds manifests, skills and tiny shims — never logic, never copies.

Rules: every ``plugins/<platform>/`` file is a JSON (or, for DSH's Cordis patch, YAML) manifest, a
markdown skill or document, or a shim; no two files under ``plugins/`` are identical (shared logic,
prompts and parsers live once, in the package). A shim is measured by its statements, not its lines, so that
it can be written readably: a shell shim by its command lines, a JavaScript module by the
statements acorn finds in it (.ci/js/statements.mjs), and the JavaScript must be as prettier
formats it (both tools pinned in .ci/js/package.json, installed from npm once, then offline).
Also checked: the manifests parse and agree with each other and with the engine's platform table,
and each shim calls its own platform.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import memsearch
from memsearch import config
from memsearch.agent.hooks import install
from memsearch.agent.hooks.engine import ACTIONS, EVENT_ALIASES, actions_of
from memsearch.agent.hooks.events import EVENTS
from memsearch.agent.hooks.platforms import DOCTORS, INSTALLERS, PLATFORMS, ROWS

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
JS_TOOLS = ROOT / ".ci" / "js"
#: Manifests (JSON; DSH's bundle patch is YAML) and skills/docs may be long; everything else is a shim.
NOT_SHIMS = (".json", ".yml", ".md")
#: Command lines of a shell shim (block keywords such as ``fi`` do not count).
MAX_SHELL_STATEMENTS = 10
#: Statements of a JavaScript plugin module: enough to adapt the host's API to ``memsearch``
#: commands (about 50 today), far too few to hold parsing, prompts or capture logic.
MAX_JS_STATEMENTS = 60
#: Longest line of a JavaScript shim (prettier does not wrap comments or strings).
MAX_JS_LINE = 110
_SHELL_BLOCK_WORDS = frozenset({"fi", "else", "then", "do", "done", "esac", "{", "}"})


def plugin_files() -> list[Path]:
    return sorted(p for p in PLUGINS.rglob("*") if p.is_file())


def platform_dirs() -> list[Path]:
    return sorted(p for p in PLUGINS.iterdir() if p.is_dir())


def shims() -> list[Path]:
    return sorted(
        p for d in platform_dirs() for p in d.rglob("*") if p.is_file() and p.suffix not in NOT_SHIMS
    )


def js_tools() -> Path:
    """The pinned prettier and acorn (``npm ci`` into .ci/js once; later runs need no network)."""
    done = JS_TOOLS / "node_modules" / ".installed"
    with open(JS_TOOLS / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            npm = shutil.which("npm")
            assert npm is not None, "npm must be on PATH to check the JavaScript plugins"
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=JS_TOOLS,
                check=True,
                timeout=600,
            )
            done.write_text("ok\n")
    return JS_TOOLS / "node_modules" / ".bin"


def shell_statements(text: str) -> int:
    """Command lines: not blank, not a comment, not a lone block keyword (``fi``, ``else``, ...)."""
    return sum(
        1
        for line in text.splitlines()
        if (code := line.strip()) and not code.startswith("#") and code not in _SHELL_BLOCK_WORDS
    )


def js_statements(paths: list[Path]) -> dict[Path, dict[str, int]]:
    js_tools()
    out = subprocess.run(
        ["node", str(JS_TOOLS / "statements.mjs"), *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return {Path(name): counts for name, counts in json.loads(out).items()}


def test_every_platform_folder_has_only_manifests_skills_and_short_shims() -> None:
    assert {p.name for p in platform_dirs()} >= {"claude-code", "codex"}
    js = [p for p in shims() if p.suffix == ".js"]
    assert {p.parent.name for p in js} == {"opencode", "openclaw", "dsh"}
    counts = js_statements(js)
    for path in shims():
        name = path.relative_to(ROOT)
        if path.suffix == ".sh":
            n = shell_statements(path.read_text(encoding="utf-8"))
            assert n <= MAX_SHELL_STATEMENTS, f"{name} has {n} command lines"
        elif path.suffix == ".js":
            n = counts[path]["all"]
            assert n <= MAX_JS_STATEMENTS, f"{name} has {n} statements"
        else:
            raise AssertionError(f"{name}: a plugin file must be a manifest, a skill/doc, or a .sh/.js shim")


def test_shim_statements_are_counted_not_lines() -> None:
    # The same two statements squeezed on one line or spread over many count the same.
    assert shell_statements("#!/bin/sh\n# why\nif true; then\n  echo a\nfi\n") == 2
    assert shell_statements("if true; then echo a; fi") == 1
    # The probes live in node_modules, which `npm ci` (run once, maybe now by another pytest-xdist
    # worker) deletes and makes anew: install first, then write them.
    js_tools()
    folder = JS_TOOLS / "node_modules" / ".probe"
    folder.mkdir(parents=True, exist_ok=True)
    squeezed, spread = folder / "squeezed.js", folder / "spread.js"
    squeezed.write_text("const a = 1; function f(x) { if (x) { return a; } return 0; }\n")
    spread.write_text("const a = 1;\n\nfunction f(x) {\n  if (x) {\n    return a;\n  }\n  return 0;\n}\n")
    counts = js_statements([squeezed, spread])
    assert counts[squeezed] == counts[spread] == {"top": 2, "all": 5, "functions": 1}


def test_javascript_shims_are_formatted_and_readable() -> None:
    """prettier decides the layout; lines stay short enough to read (comments included)."""
    paths = [p for p in shims() if p.suffix == ".js"] + [JS_TOOLS / "statements.mjs"]
    proc = subprocess.run(
        [str(js_tools() / "prettier"), "--check", *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert len(line) <= MAX_JS_LINE, f"{path.relative_to(ROOT)}:{number} has {len(line)} characters"


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


def test_dsh_bundle_patch_mounts_the_package_it_ships_in() -> None:
    """``dsh plugin add`` links the folder under package.json's name and applies the patch that
    ``dsh.bundle.patch`` names; the row it inserts must import that same name."""
    package = json.loads((PLUGINS / "dsh" / "package.json").read_text())
    assert package["version"] == memsearch.__version__
    patch = (PLUGINS / "dsh" / package["dsh"]["bundle"]["patch"]).read_text(encoding="utf-8")
    rows = [line.strip() for line in patch.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert rows == ["- insert:", "- id: memsearch", f'name: "{package["name"]}"']
    module = (PLUGINS / "dsh" / package["main"]).read_text(encoding="utf-8")
    assert 'export const name = "memsearch";' in module
    shipped = {"index.js", package["dsh"]["bundle"]["patch"].removeprefix("./"), "skills"}
    assert set(package["files"]) >= shipped


@pytest.mark.parametrize("platform", ["claude-code", "codex", "openclaw", "opencode", "dsh"])
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
            assert action in actions_of(PLATFORMS[platform]) or action in EVENTS, action
        assert (
            "memsearch transcript" in body
            or "__MEMSEARCH__ transcript" in body
            or "memory_transcript" in body  # the OpenClaw/OpenCode tool that runs it
            or skill.parent.name != "memory-recall"
        )


def test_host_tables_are_derived_from_the_platform_rows() -> None:
    """A host is one row: every other list of hosts must agree with the rows."""
    assert list(PLATFORMS) == [row.name for row in ROWS]
    assert all(PLATFORMS[name] is row for name, row in zip(PLATFORMS, ROWS, strict=True))
    assert {row.name: row.installer for row in ROWS if row.installer is not None} == INSTALLERS
    assert {row.name: row.doctor for row in ROWS if row.doctor is not None} == DOCTORS
    assert INSTALLERS["codex"] is PLATFORMS["codex"].installer
    # config.py keeps its own literal (reading the configuration must not import the adapters).
    assert set(config.PLUGIN_PLATFORMS) == set(PLATFORMS)
    # Host-only actions never shadow a shared action or an event name.
    for row in ROWS:
        assert not set(row.actions) & (set(ACTIONS) | set(EVENTS) | set(EVENT_ALIASES)), row.name
    # The installers live in install.py but the table of them only in the rows.
    assert not hasattr(install, "INSTALLERS")
    assert not hasattr(install, "DOCTORS")
