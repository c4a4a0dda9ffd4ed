"""The skill candidate store shared with the original memsearch 0.4.23 (its CLI from the registry,
in a side venv): each tool reads, evolves and installs what the other wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from original_memsearch import original_cli

pytestmark = pytest.mark.host

DESC = "Deploy the app to staging. Use when asked to deploy."


def run(
    cli: list[str], project: Path, *args: str, stdin: str = "", check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSEARCH_")}
    proc = subprocess.run(
        [*cli, "skills", *args],
        input=stdin,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 or not check, f"{cli} skills {args}: {proc.stdout}{proc.stderr}"
    return proc


OURS = [sys.executable, "-m", "memsearch"]


def test_the_original_reads_and_updates_our_store(tmp_path: Path) -> None:
    theirs = [str(original_cli())]
    project = tmp_path / "p"
    project.mkdir()
    run(OURS, project, "add", "--name", "deploy", "--description", DESC, "--body-file", "-", stdin="1. a\n")
    (row,) = json.loads(run(theirs, project, "list", "-j").stdout)
    assert (row["name"], row["status"], row["description"]) == ("deploy", "candidate", DESC)
    assert row["pending_install"] is True and row["pending_reason"] == "new"

    run(OURS, project, "install", "deploy", "--path", "dest")
    (row,) = json.loads(run(theirs, project, "list", "-j").stdout)
    assert row["status"] == "installed" and row["pending_install"] is False
    assert row["installed_paths"] == [str(project / "dest" / "deploy" / "SKILL.md")]
    assert run(theirs, project, "status", "--hint").stdout == ""

    run(OURS, project, "add", "--name", "deploy", "--description", DESC, "--body-file", "-", stdin="1. b\n")
    (row,) = json.loads(run(theirs, project, "list", "-j").stdout)
    assert row["pending_reason"] == "updated"
    # Both print the same hint for the same store.
    assert run(theirs, project, "status", "--hint").stdout == run(OURS, project, "status", "--hint").stdout
    run(theirs, project, "install", "deploy", "--path", "dest")
    assert "1. b" in (project / "dest" / "deploy" / "SKILL.md").read_text()


def test_we_read_and_update_the_originals_store(tmp_path: Path) -> None:
    theirs = [str(original_cli())]
    project = tmp_path / "p"
    project.mkdir()
    run(theirs, project, "add", "--name", "deploy", "--description", DESC, "--body-file", "-", stdin="1. a\n")
    run(theirs, project, "install", "deploy", "--path", "dest")
    (row,) = json.loads(run(OURS, project, "list", "-j").stdout)
    assert (row["slug"], row["status"], row["description"]) == ("deploy", "installed", DESC)
    assert row["installed_paths"] == [str(project / "dest" / "deploy" / "SKILL.md")]

    run(theirs, project, "add", "--name", "deploy", "--description", DESC, "--body-file", "-", stdin="1. b\n")
    assert run(OURS, project, "list").stdout == f"- deploy [installed, update ready] - {DESC}\n"
    # Only the original's meta.json vouches for its install, and a repository can ship one: the
    # copy is treated as the user's (issue 21), so it is replaced only with --force, which keeps
    # it as SKILL.md.bak; from then on our own record lets later updates go in place.
    installed = project / "dest" / "deploy" / "SKILL.md"
    refused = run(OURS, project, "install", "deploy", "--path", "dest", check=False)
    assert refused.returncode == 1 and "is not a copy memsearch installed" in refused.stderr
    assert "1. a" in installed.read_text()
    done = run(OURS, project, "install", "deploy", "--path", "dest", "--force")
    assert done.stdout.startswith(f"Installed: {installed} (replaced; the previous")
    assert "1. b" in installed.read_text() and "1. a" in installed.with_name("SKILL.md.bak").read_text()
    log = subprocess.run(
        ["git", "-C", str(project / ".memsearch" / "skill-candidates"), "log", "--format=%s"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert log[0] == "Install deploy -> 1 folder(s)" and len(log) == 4  # 2 of theirs, add, install
