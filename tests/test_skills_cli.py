"""``memsearch skills add|list|status|install`` as real processes, and the session-start hint.

Every run has its own project folder and HOME, so installing "for the user" lands in a temporary
home; the hosts' folders are checked against where each host reads skills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks"))

import hookkit
from hookkit import HookEnv, hook_json

from memsearch import skills

BODY = "## Deploy to staging\n\n1. `make build`\n2. `./deploy.sh staging`\n"
DESC = "Deploy the app to staging. Use when asked to deploy or ship to staging."


class World:
    def __init__(self, root: Path) -> None:
        self.project = root / "proj"
        self.home = root / "userhome"
        self.project.mkdir(parents=True)
        self.home.mkdir()
        self.ms = self.project / ".memsearch"

    def run(self, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSEARCH_", "CLAUDE", "XDG_"))}
        base.pop("OPENCLAW_STATE_DIR", None)
        return subprocess.run(
            [sys.executable, "-m", "memsearch", "skills", *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.project,
            env={**base, "HOME": str(self.home), **env},
            timeout=120,
        )

    def add(self, name: str = "Deploy to staging", body: str = BODY) -> subprocess.CompletedProcess[str]:
        proc = self.run("add", "--name", name, "--description", DESC, "--body-file", "-", stdin=body)
        assert proc.returncode == 0, proc.stderr
        return proc


@pytest.fixture
def w(tmp_path: Path) -> World:
    return World(tmp_path)


def test_add_list_status_round_trip(w: World) -> None:
    # original: test_add_persists_candidate_without_llm, test_cli_skills_status_outputs_hint
    proc = w.add()
    assert proc.stdout.splitlines()[0] == "Added candidate skill: deploy-to-staging"
    assert "memsearch skills install deploy-to-staging" in proc.stdout
    assert w.add().stdout.startswith("Candidate skill deploy-to-staging is unchanged.")

    listed = w.run("list")
    assert listed.stdout == f"- deploy-to-staging [candidate, install ready] - {DESC}\n"
    (row,) = json.loads(w.run("list", "--json-output").stdout)
    assert row["slug"] == row["name"] == "deploy-to-staging"
    assert row["status"] == "pending" and row["pending_install"] is True
    assert row["path"] == str(w.ms / "skill-candidates" / "deploy-to-staging" / "SKILL.md")

    hint = w.run("status", "--hint")
    assert hint.stdout == (
        "SKILLS: 1 candidate skill version(s) pending install - "
        "run the memory-to-skill skill to review and install.\n"
    )
    assert w.run("status").stdout.endswith("New: 1; updated: 0.\n")
    summary = json.loads(w.run("status", "-j").stdout)
    assert {k: summary[k] for k in ("candidate_count", "pending_count", "new_count", "updated_count")} == {
        "candidate_count": 1,
        "pending_count": 1,
        "new_count": 1,
        "updated_count": 0,
    }
    assert summary["pending_names"] == ["deploy-to-staging"]


def test_empty_store_messages(w: World) -> None:
    assert w.run("list").stdout == "No skills in the store yet.\n"
    assert json.loads(w.run("list", "-j").stdout) == []
    assert w.run("status").stdout == "No candidate skill versions pending install.\n"
    hint = w.run("status", "--hint")
    assert hint.returncode == 0 and hint.stdout == ""
    assert not (w.ms / "skill-candidates").exists()  # looking creates nothing


def test_install_folders_can_be_kept_in_the_config(w: World) -> None:
    # original: test_config_set_paths_parses_json_list (the skill reads them back, then --path each)
    key = "plugins.claude-code.memory_to_skill.paths"
    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", "config", "set", key, '[".claude/skills", "~/.codex/skills"]'],
        capture_output=True,
        text=True,
        cwd=w.project,
        env={**os.environ, "HOME": str(w.home)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    got = subprocess.run(
        [sys.executable, "-m", "memsearch", "config", "get", key],
        capture_output=True,
        text=True,
        cwd=w.project,
        env={**os.environ, "HOME": str(w.home)},
        timeout=60,
    )
    assert json.loads(got.stdout) == [".claude/skills", "~/.codex/skills"]


def test_memsearch_dir_is_honoured(w: World) -> None:
    proc = w.run(
        "add", "--name", "x", "--description", "d", "--body-file", "-", stdin="b", MEMSEARCH_DIR="shared"
    )
    assert proc.returncode == 0, proc.stderr
    assert (w.project / "shared" / "skill-candidates" / "x" / "SKILL.md").is_file()
    assert w.run("list").stdout == "No skills in the store yet.\n"
    assert "- x [" in w.run("list", MEMSEARCH_DIR=str(w.project / "shared")).stdout


# Where each host reads skills, in the project and for the user (its docs).
HOSTS = {
    "claude-code": (".claude/skills", ".claude/skills"),
    "codex": (".agents/skills", ".agents/skills"),
    "openclaw": ("skills", ".openclaw/skills"),
    "opencode": (".opencode/skills", ".config/opencode/skills"),
}


@pytest.mark.parametrize("platform", sorted(HOSTS))
def test_install_puts_the_skill_where_each_host_reads_it(w: World, platform: str) -> None:
    w.add()
    project_rel, user_rel = HOSTS[platform]
    proc = w.run("install", "deploy-to-staging", "--platform", platform)
    assert proc.returncode == 0, proc.stderr
    installed = w.project / project_rel / "deploy-to-staging" / "SKILL.md"
    assert proc.stdout.splitlines()[0] == f"Installed: {installed}"
    source = (w.ms / "skill-candidates" / "deploy-to-staging" / "SKILL.md").read_text()
    assert installed.read_text() == source
    assert source.startswith("---\nname: deploy-to-staging\n")

    proc = w.run("install", "deploy-to-staging", "--platform", platform, "--user", "-j")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row == {
        "path": str(w.home / user_rel / "deploy-to-staging" / "SKILL.md"),
        "action": "created",
        "backup": None,
    }
    assert w.run("status", "--hint").stdout == ""
    assert "[installed]" in w.run("list").stdout


def test_install_by_path_and_install_history_in_git(w: World) -> None:
    # original: test_install_copies_to_paths_and_updates_meta (--path, repeatable)
    w.add()
    proc = w.run("install", "deploy-to-staging", "--path", ".claude/skills", "--path", "~/.agents/skills")
    assert proc.returncode == 0, proc.stderr
    assert (w.project / ".claude/skills/deploy-to-staging/SKILL.md").is_file()
    assert (w.home / ".agents/skills/deploy-to-staging/SKILL.md").is_file()
    log = subprocess.run(
        ["git", "-C", str(w.ms / "skill-candidates"), "log", "--format=%s"], capture_output=True, text=True
    ).stdout.splitlines()
    assert log == ["Install deploy-to-staging -> 2 folder(s)", "Add candidate deploy-to-staging (manual)"]


def test_install_refuses_to_overwrite_a_users_skill(w: World) -> None:
    w.add()
    mine = w.project / ".claude/skills/deploy-to-staging/SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: deploy-to-staging\ndescription: my own\n---\n\nMINE\n")
    proc = w.run("install", "deploy-to-staging", "--platform", "claude-code")
    assert proc.returncode == 1 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"Error: {mine} already exists and is not a copy memsearch installed")
    assert "Hint: " in line and "--force" in line
    assert "MINE" in mine.read_text()

    proc = w.run("install", "deploy-to-staging", "--platform", "claude-code", "--force")
    assert proc.returncode == 0, proc.stderr
    assert "replaced; the previous file is" in proc.stdout
    assert "MINE" in mine.with_name("SKILL.md.bak").read_text()
    assert "deploy.sh" in mine.read_text()


def test_an_update_is_reported_and_reinstalled(w: World) -> None:
    # original: test_installed_skill_source_keeps_evolving (update ready after the source evolved)
    w.add()
    assert w.run("install", "deploy-to-staging", "--platform", "codex").returncode == 0
    w.add(body=BODY + "3. `./smoke.sh`\n")
    assert "[installed, update ready]" in w.run("list").stdout
    assert w.run("status").stdout.endswith("New: 0; updated: 1.\n")
    installed = w.project / ".agents/skills/deploy-to-staging/SKILL.md"
    assert "smoke" not in installed.read_text()
    proc = w.run("install", "deploy-to-staging", "--platform", "codex")
    assert proc.returncode == 0, proc.stderr
    assert "smoke" in installed.read_text()
    installed.write_text("edited\n")
    assert f"deploy-to-staging: installed copy {installed} is edited" in w.run("status").stdout


def test_a_rejected_version_stops_waiting_until_it_is_revised(w: World) -> None:
    w.add()
    proc = w.run("reject", "Deploy to staging")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Rejected candidate skill: deploy-to-staging (it no longer waits for review).\n"
    assert w.run("list").stdout == f"- deploy-to-staging [rejected] - {DESC}\n"
    (row,) = json.loads(w.run("list", "-j").stdout)
    assert (row["status"], row["pending_install"]) == ("rejected", False)
    assert w.run("status", "--hint").stdout == ""  # the session-start hint no longer counts it
    assert json.loads(w.run("status", "-j").stdout)["pending_count"] == 0
    log = subprocess.run(
        ["git", "-C", str(w.ms / "skill-candidates"), "log", "--format=%s"], capture_output=True, text=True
    )
    assert log.stdout.splitlines()[0] == "Reject candidate deploy-to-staging"
    w.add(body=BODY + "3. `./smoke.sh`\n")  # the distiller revises it: it waits again
    assert w.run("list").stdout == f"- deploy-to-staging [candidate, install ready] - {DESC}\n"
    assert w.run("reject", "nope").stderr.startswith("Error: no candidate skill named 'nope'")


@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        (
            ["install", "deploy-to-staging"],
            "",
            2,
            "Error: no install destination given. Hint: pass --platform",
        ),
        (["install", "nope", "--path", "x"], "", 1, "Error: no candidate skill named 'nope'"),
        (
            ["install", "deploy-to-staging", "--user", "--path", "x"],
            "",
            2,
            "Error: --user needs --platform. Hint: ",
        ),
        (
            ["add", "--name", "x", "--description", "d", "--body-file", "-"],
            "  ",
            1,
            "Error: a skill needs both a description and a body. Hint: ",
        ),
    ],
)
def test_expected_failures_are_one_error_line(
    w: World, args: list[str], stdin: str, code: int, message: str
) -> None:
    # original: test_install_empty_paths_raises, test_install_missing_candidate_raises,
    # test_add_rejects_empty_body
    w.add()
    proc = w.run(*args, stdin=stdin)
    assert proc.returncode == code
    (line,) = proc.stderr.splitlines()
    assert line.startswith(message), line
    assert "Traceback" not in proc.stderr


def test_an_unwritable_store_is_one_error_line(w: World) -> None:
    (w.project / "blocker").write_text("a file, not a folder")
    proc = w.run(
        "add", "--name", "x", "--description", "d", "--body-file", "-", stdin="b", MEMSEARCH_DIR="blocker/ms"
    )
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    assert line.startswith("Error: cannot write the skill candidate x: Not a directory")
    assert "Hint: check that the folder exists and is writable" in line
    w.add()
    proc = w.run("install", "deploy-to-staging", "--path", "blocker/skills")
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    assert line.startswith("Error: cannot install deploy-to-staging: Not a directory")


def test_without_git_add_fails_with_one_line_and_reading_still_works(w: World, tmp_path: Path) -> None:
    w.add()
    nogit = tmp_path / "nogit"
    nogit.mkdir()
    proc = w.run("add", "--name", "y", "--description", "d", "--body-file", "-", stdin="b", PATH=str(nogit))
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    assert line.startswith("Error: git is not installed (or not on PATH)")
    assert "Hint: install git" in line
    assert "deploy-to-staging" in w.run("list", PATH=str(nogit)).stdout


# --- the session-start hint ------------------------------------------------------------------


@pytest.fixture
def hk(tmp_path: Path) -> Iterator[HookEnv]:
    with hookkit.hook_env(tmp_path / "t", None) as world:
        yield world


@pytest.mark.parametrize("platform", ["claude-code", "codex"])
def test_session_start_says_when_candidates_wait(hk: HookEnv, platform: str) -> None:
    before = hook_json(hk.hook(platform, "session-start", "{}", MEMSEARCH_NO_WATCH="1"))
    assert "SKILLS" not in before["systemMessage"]
    skills.write_candidate(hk.memsearch_dir, "deploy", DESC, BODY, message="distill: add deploy")
    after = hook_json(hk.hook(platform, "session-start", "{}", MEMSEARCH_NO_WATCH="1"))
    assert after["systemMessage"].endswith(
        " | SKILLS: 1 candidate skill version(s) pending install - run the memory-to-skill skill to review "
        "and install."
    )
    skills.install_candidate(hk.memsearch_dir, "deploy", [hk.project / ".claude" / "skills"])
    done = hook_json(hk.hook(platform, "session-start", "{}", MEMSEARCH_NO_WATCH="1"))
    assert "SKILLS" not in done["systemMessage"]


@pytest.mark.parametrize(
    ("platform", "field"), [("opencode", "system"), ("openclaw", "prependContext"), ("dsh", "context")]
)
def test_hosts_without_a_status_line_tell_the_model(hk: HookEnv, platform: str, field: str) -> None:
    # OpenCode merges "system" into the system prompt, OpenClaw prepends "prependContext" and DSH adds
    # "context" to the step; none shows the status line to the user, so the hint goes where the model
    # reads it.
    fields = {"sessionId": "s1", "agentId": "main", "workspaceDir": str(hk.project), "cwd": str(hk.project)}
    stdin = json.dumps(fields)
    before = hook_json(hk.hook(platform, "session-start", stdin, MEMSEARCH_NO_WATCH="1"))
    assert "SKILLS" not in json.dumps(before)
    skills.write_candidate(hk.memsearch_dir, "deploy", DESC, BODY, message="distill: add deploy")
    after = hook_json(hk.hook(platform, "session-start", stdin, MEMSEARCH_NO_WATCH="1"))
    assert after[field] == skills.candidates_hint(hk.memsearch_dir)
    (hk.memory_dir / "2026-06-12.md").write_text("## Session 10:00\n\n### 10:00\n- Deployed to staging.\n")
    with_memory = hook_json(hk.hook(platform, "session-start", stdin, MEMSEARCH_NO_WATCH="1"))
    assert "- Deployed to staging." in with_memory[field]
    assert with_memory[field].endswith("\n\n" + skills.candidates_hint(hk.memsearch_dir))


def test_claude_code_keeps_the_hint_out_of_the_models_context(hk: HookEnv) -> None:
    skills.write_candidate(hk.memsearch_dir, "deploy", DESC, BODY, message="m")
    hk.memory_dir.mkdir(parents=True, exist_ok=True)
    (hk.memory_dir / "2026-06-12.md").write_text("## Session 10:00\n\n### 10:00\n- Deployed to staging.\n")
    out = hook_json(hk.hook("claude-code", "session-start", "{}", MEMSEARCH_NO_WATCH="1"))
    assert "SKILLS:" in out["systemMessage"]
    assert "SKILLS" not in out["hookSpecificOutput"]["additionalContext"]


def test_chinese_names_and_text_round_trip(w: World) -> None:
    body = "## 部署到测试环境\n\n1. 运行 `make deploy`\n2. 检查日志"
    for name in ("部署到测试环境", "回滚发布"):
        proc = w.run(
            "add",
            "--name",
            name,
            "--description",
            f"{name}。当用户要求{name}时使用。",
            "--body-file",
            "-",
            stdin=body,
        )
        assert proc.returncode == 0, proc.stderr
    listed = json.loads(w.run("list", "-j").stdout)
    assert len(listed) == 2  # two names, two candidates (the original made both "skill")
    by_desc = {row["description"]: row for row in listed}
    row = by_desc["部署到测试环境。当用户要求部署到测试环境时使用。"]
    assert row["slug"].startswith("skill-")
    assert Path(row["path"]).read_text(encoding="utf-8").endswith(body + "\n")
    assert "当用户要求回滚发布时使用" in w.run("list").stdout
    proc = w.run("install", row["slug"], "--platform", "claude-code")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((w.ms / "skill-candidates" / row["slug"] / "meta.json").read_text(encoding="utf-8"))
    assert meta["title"] == "部署到测试环境"
