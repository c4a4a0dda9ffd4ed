"""Collection names (the original's test vectors), the Codex installer run through its real shim, and
the shims' behaviour when memsearch is or is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsearch.agent.hooks import derive_collection
from memsearch.agent.hooks.install import CODEX_HOOKS, enable_codex_hooks_feature, merge_codex_hooks
from memsearch.agent.hooks.platforms import PLATFORMS

ROOT = Path(__file__).resolve().parents[1]
CODEX_PLUGIN = ROOT / "plugins" / "codex"
CLAUDE_PLUGIN = ROOT / "plugins" / "claude-code"
SYSTEM_PATH = "/usr/bin:/bin"


# --- collection names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/home/user/my-app", "ms_my_app_62c1f414"),
        ("/home/user/My.App", "ms_my_app_6572ec17"),
        ("/tmp", "ms_tmp_e9671acd"),
        ("/home/user/x/", "ms_x_2657567a"),
        ("/home/user/__Foo--Bar__", "ms_foo_bar_1adca7df"),
        ("/home/user/日本語", "ms__c37987c5"),
        ("/", "ms__8a5edab2"),
        ("/home/user/" + "a" * 39 + "_" + "b" * 9, "ms_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa__8c3b43a0"),
    ],
)
def test_collection_names_match_the_reference_vectors(path: str, expected: str) -> None:
    assert derive_collection(path) == expected


def test_collection_names_resolve_like_realpath(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "Real-Project"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    expected = derive_collection(str(real))
    assert expected.startswith("ms_real_project_")
    assert derive_collection(str(link)) == expected  # symlinks of the existing prefix resolved
    assert derive_collection(f"{real}/sub/..") == expected
    monkeypatch.chdir(real)
    assert derive_collection() == derive_collection(".") == derive_collection("") == expected
    # Only ASCII letters are lower-cased (str.lower() would turn the Kelvin sign into "k").
    assert derive_collection("KELVIN\u212a").rsplit("_", 1)[0] == "ms_kelvin"


def test_memsearch_dir_decides_the_collection_and_folder(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    shared = tmp_path / "shared-memory"
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMSEARCH_")}

    def action(name: str, **env: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "memsearch", "hook", "codex", name],
            capture_output=True,
            text=True,
            cwd=project / "src",
            env={**base, **env},
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert action("collection") == derive_collection(str(project))  # the git root, not the cwd
    assert action("memory-dir") == str(project / ".memsearch" / "memory")
    assert action("collection", MEMSEARCH_DIR=str(shared)) == derive_collection(str(shared))
    assert action("memory-dir", MEMSEARCH_DIR=str(shared)) == str(shared / "memory")


# --- the Codex installer ----------------------------------------------------------------------

USER_HOOKS = {
    "hooks": {
        "Stop": [
            {"matcher": "", "hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]},
            {
                "matcher": "",
                "hooks": [{"type": "command", "command": "bash /old/plugins/codex/hooks/stop.sh"}],
            },
        ],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    }
}
USER_CONFIG = (
    'model = "gpt-5-codex"\n\n[features]\ncodex_hooks = true\nweb_search = true\n\n'
    '[profiles.fast]\nmodel = "o4-mini"\n'
)


def run_install(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSEARCH_", "CODEX_"))}
    return subprocess.run(
        ["bash", str(CODEX_PLUGIN / "install.sh")],
        capture_output=True,
        text=True,
        env={**base, "HOME": str(home), "PATH": SYSTEM_PATH, "MEMSEARCH_PYTHON": sys.executable, **env},
    )


def test_codex_install_is_idempotent_and_keeps_the_users_setup(tmp_path: Path) -> None:
    home = tmp_path / "home"
    codex = home / ".codex"
    codex.mkdir(parents=True)
    (codex / "hooks.json").write_text(json.dumps(USER_HOOKS))
    (codex / "config.toml").write_text(USER_CONFIG)

    first = run_install(home)
    assert first.returncode == 0, first.stderr
    assert "Start a new Codex session" in first.stdout
    # No `codex` on this PATH: the installer cannot trust the hooks and says what to do instead.
    assert "NOTE: `codex` is not on PATH, so the hooks are not trusted yet" in first.stdout
    assert "open `/hooks`" in first.stdout
    hooks = json.loads((codex / "hooks.json").read_text())["hooks"]
    shim = CODEX_PLUGIN / "hooks" / "run.sh"
    for event, (name, timeout) in CODEX_HOOKS.items():
        ours = [h for g in hooks[event] for h in g["hooks"] if str(shim) in h["command"]]
        assert ours == [
            {"type": "command", "command": f"bash {shim} {name} {sys.executable}", "timeout": timeout}
        ]
    assert next(h["command"] for g in hooks["Stop"] for h in g["hooks"]) == "notify-send done"
    assert not any("/old/plugins/codex" in h["command"] for g in hooks["Stop"] for h in g["hooks"])
    assert hooks["PreToolUse"] == USER_HOOKS["hooks"]["PreToolUse"]
    assert json.loads((codex / "hooks.json.bak").read_text()) == USER_HOOKS
    config = (codex / "config.toml").read_text()
    assert config == USER_CONFIG.replace("codex_hooks = true", "hooks = true")

    skills = home / ".agents" / "skills"
    for name in ("memory-recall", "memory-config"):
        text = (skills / name / "SKILL.md").read_text()
        assert "__INSTALL_DIR__" not in text and "__MEMSEARCH__" not in text
        assert str(Path(sys.executable).with_name("memsearch")) in text
    assert str(CODEX_PLUGIN) in (skills / "memory-config" / "SKILL.md").read_text()

    snapshot = {p: p.read_bytes() for p in (codex / "hooks.json", codex / "config.toml")}
    second = run_install(home)
    assert second.returncode == 0, second.stderr
    assert {p: p.read_bytes() for p in snapshot} == snapshot  # nothing moves on a re-run


def test_codex_install_from_scratch_and_the_installed_hook_runs(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    assert run_install(home, CODEX_HOME=str(home / "codex-home")).returncode == 0
    codex = home / "codex-home"  # CODEX_HOME is honoured
    assert (codex / "config.toml").read_text() == "[features]\nhooks = true\n"
    hooks = json.loads((codex / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(CODEX_HOOKS) == set(PLATFORMS["codex"].events.values())
    (command,) = [h["command"] for g in hooks["UserPromptSubmit"] for h in g["hooks"]]
    # Codex runs the command through a shell, with a PATH that need not contain memsearch.
    proc = subprocess.run(
        ["bash", "-c", command],
        input=json.dumps({"prompt": "anything we learned about exporters?", "cwd": str(project)}),
        capture_output=True,
        text=True,
        env={"HOME": str(home), "PATH": SYSTEM_PATH},
        cwd=project,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout) == {}, proc.stderr  # no memory yet


def test_codex_install_refuses_broken_files_and_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    codex = home / ".codex"
    codex.mkdir(parents=True)
    (codex / "config.toml").write_text("[features\nhooks = ")
    proc = run_install(home)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: cannot update ") and "config.toml" in proc.stderr
    assert not (codex / "hooks.json").exists() and not (home / ".agents").exists()


def test_earlier_memsearch_hooks_are_updated_in_place() -> None:
    """Codex keys a hook's trust by its position, so ours must not move (nor shift the user's)."""
    data = {
        "hooks": {
            "Stop": [
                {
                    "matcher": "",
                    "hooks": [{"type": "command", "command": "bash /old/plugins/codex/hooks/run.sh stop"}],
                },
                {"matcher": "", "hooks": [{"type": "command", "command": "notify-send done"}]},
            ]
        }
    }
    merged = merge_codex_hooks(data, {"Stop": ("bash /new/plugins/codex/hooks/run.sh stop py", 30)})
    assert [g["hooks"][0]["command"] for g in merged["hooks"]["Stop"]] == [
        "bash /new/plugins/codex/hooks/run.sh stop py",
        "notify-send done",
    ]


def test_legacy_list_shaped_hooks_are_converted() -> None:
    legacy = [{"event": "Stop", "command": "say done", "timeout_ms": 1500, "matcher": ""}]
    merged = merge_codex_hooks(legacy, {"Stop": ("bash /p/plugins/codex/hooks/run.sh stop py", 30)})
    assert merged == {
        "hooks": {
            "Stop": [
                {"matcher": "", "hooks": [{"type": "command", "command": "say done", "timeout": 2}]},
                {
                    "matcher": "",
                    "hooks": [
                        {
                            "type": "command",
                            "command": "bash /p/plugins/codex/hooks/run.sh stop py",
                            "timeout": 30,
                        }
                    ],
                },
            ]
        }
    }


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", "[features]\nhooks = true\n"),
        ('model = "x"\n', 'model = "x"\n\n[features]\nhooks = true\n'),
        ("[features] # flags\nhooks = false\n", "[features] # flags\nhooks = true\n"),
        ("[features]\n[[mcp]]\nname = 'a'\n", "[features]\nhooks = true\n[[mcp]]\nname = 'a'\n"),
        ("[features.extra]\nx = 1\n", "[features.extra]\nx = 1\n\n[features]\nhooks = true\n"),
    ],
)
def test_codex_feature_flag_edits(before: str, after: str) -> None:
    assert enable_codex_hooks_feature(before) == after
    assert enable_codex_hooks_feature(after) == after


# --- the Claude Code shim ---------------------------------------------------------------------


def test_claude_shim_without_memsearch_says_so_once(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": SYSTEM_PATH}
    shim = CLAUDE_PLUGIN / "hooks" / "run.sh"
    start = subprocess.run(
        ["bash", str(shim), "session-start"], input="{}", capture_output=True, text=True, env=env
    )
    assert "not installed" in json.loads(start.stdout)["systemMessage"]
    stop = subprocess.run(["bash", str(shim), "stop"], input="{}", capture_output=True, text=True, env=env)
    assert json.loads(stop.stdout) == {}


def test_claude_shim_runs_the_installed_memsearch(tmp_path: Path) -> None:
    bin_dir = tmp_path / ".local" / "bin"  # where `uv tool install` puts it; not on the host's PATH
    bin_dir.mkdir(parents=True)
    (bin_dir / "memsearch").symlink_to(Path(sys.executable).with_name("memsearch"))
    env = {"HOME": str(tmp_path), "PATH": SYSTEM_PATH, "MEMSEARCH_NO_WATCH": "1"}
    proc = subprocess.run(
        ["bash", str(CLAUDE_PLUGIN / "hooks" / "run.sh"), "session-start"],
        input="{}",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["systemMessage"].startswith("[memsearch v")


def test_hook_command_works_but_is_hidden_from_help() -> None:
    from click.testing import CliRunner

    from memsearch.cli import cli

    runner = CliRunner()
    listing = runner.invoke(cli, ["--help"])
    assert listing.exit_code == 0 and "\n  hook " not in listing.output and "\n  search " in listing.output
    collection = runner.invoke(cli, ["hook", "claude-code", "collection"])
    assert collection.exit_code == 0 and collection.output.startswith("ms_")
