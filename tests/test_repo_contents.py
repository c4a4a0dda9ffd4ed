"""The repository holds the product, its tests, docs and tools, and nothing of one machine.

Why: a working file of a contributor (a brief, scratch notes) once sat at the top level, naming
paths of the machine it was written on. A fresh clone is all a user gets; what it holds must make
sense there. The top level is a fixed list, and no tracked file names a machine's own folders.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What the top level of the repository may hold, and why each is there.
TOP_LEVEL = {
    ".ci": "the CI entry point and its pinned JavaScript checkers",
    ".claude-plugin": "the Claude Code marketplace manifest",
    ".gitignore": "what git leaves out",
    ".prettierrc.json": "the JavaScript format",
    "CHANGELOG.md": "what changed",
    "LICENSE": "the licence",
    "Makefile": "the one task runner",
    "README.md": "the front page",
    "docs": "the documentation",
    "evaluation": "quality, speed and compatibility measurements",
    "examples": "the demo's memory folder",
    "mkdocs.yml": "the documentation site",
    "plugins": "the agent plugins",
    "pyproject.toml": "the package",
    "src": "the package's code",
    "tests": "the test suite",
}

#: Folders that belong to one machine or one person, never to the product.
#: (Written in pieces so this file does not match itself.)
MACHINE_PATHS = re.compile(
    "/tmp/" + "bash_jobs" + r"|(?<![\w.~-])/work/(?:main|scratch|wt)\b|(?<![\w.~-])/root/\."
)


def tracked() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (an unpacked release has no history to check)")
    return [name for name in out.decode().split("\0") if name]


def test_the_top_level_holds_only_the_product_its_tests_docs_and_tools() -> None:
    unknown = sorted({name.split("/", 1)[0] for name in tracked()} - set(TOP_LEVEL))
    assert unknown == [], f"not part of the product (add to TOP_LEVEL with its reason, or remove): {unknown}"


def test_no_tracked_file_names_a_folder_of_one_machine() -> None:
    found = []
    for name in tracked():
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{name}: {m[0]}" for m in MACHINE_PATHS.finditer(text)]
    assert found == []
