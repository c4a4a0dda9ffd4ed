"""Every shell command and Python snippet of README.md and docs/**/*.md, as a new user copies it.

Each ``bash`` (``sh``, ``shell``, ``console``) and ``python`` block carries a marker on a line of
its own above it: ``<!-- doc-test: runnable -->`` or ``<!-- doc-test: needs-host -->`` (an agent
host, an API key, a server, an install, or the user's own data). An HTML comment, because a word
after the fence's language (``bash runnable``) is no fence any more to Python-Markdown, which
builds the docs site; other comments may stand between (the host tests' ``<!-- install:... -->``).

Runnable blocks run in order, each as one ``bash -e`` script (a Python block: ``python -c``), in a
fresh HOME whose default store already holds the example memory (indexed once with the real ONNX
model), from a folder holding ``examples/`` and with ``~/notes`` being the example memory; the
config file a block writes is put back after it. A block fails on a non-zero exit or on any line
that starts with ``Error`` or holds a ``Traceback``.

Facts a page states that a table elsewhere owns are checked against the table here too (the
project allowlist in docs/configuration.md is ``PROJECT_ALLOWED_KEYS``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELLS = frozenset({"bash", "sh", "shell", "console"})
MARKS = frozenset({"runnable", "needs-host"})
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
MARK = re.compile(r"^\s*<!-- doc-test: (?P<mark>[a-z-]+) -->\s*$")
COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
FAILURE = re.compile(r"^(Error\b.*|.*Traceback \(most recent call last\).*)$", re.M)


@dataclass(frozen=True)
class Block:
    where: str  # file:line of the opening fence
    language: str
    mark: str | None
    script: str


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` with their language and doc-test mark."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        fence, start = opened["fence"], i
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        body = textwrap.dedent("\n".join(lines[start + 1 : i]))
        i += 1
        mark = None
        above = start - 1
        while above >= 0 and COMMENT.match(lines[above]):  # the comments right above the fence
            if m := MARK.match(lines[above]):
                mark = m["mark"]
            above -= 1
        language = opened["info"].strip().split(" ")[0] if opened["info"].strip() else ""
        found.append(Block(f"{path.relative_to(ROOT)}:{start + 1}", language, mark, body))
    return found


SHELL_BLOCKS = [b for doc in DOCS for b in blocks(doc) if b.language in SHELLS | {"python"}]
RUNNABLE = [b for b in SHELL_BLOCKS if b.mark == "runnable"]


def test_every_shell_and_python_block_is_marked() -> None:
    unmarked = [f"{b.where} ({b.mark or 'no mark'})" for b in SHELL_BLOCKS if b.mark not in MARKS]
    assert not unmarked, "blocks without <!-- doc-test: runnable|needs-host -->:\n" + "\n".join(unmarked)
    assert len(RUNNABLE) >= 5  # the convention is in use, not everything exempted
    assert any(b.language == "python" for b in RUNNABLE)


def test_the_allowlist_table_is_the_allowlist_and_no_page_counts_it() -> None:
    """configuration.md's table lists exactly the keys a project file may set, and no page says
    how many there are in words (it said "seven" beside a table of eight)."""
    from memsearch.config import PROJECT_ALLOWED_KEYS

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = page.split("### The project allowlist", 1)[1].split("\n#", 1)[0]
    table = re.findall(r"^\| `([\w.]+)` \|", section, re.MULTILINE)
    assert table == list(PROJECT_ALLOWED_KEYS)
    counted = re.compile(
        r"\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d+)\s+(low-risk|project|"
        r"allowlisted)\b[^.]*\bkeys\b",
        re.IGNORECASE,
    )
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert not counted.search(text), f"{doc.relative_to(ROOT)}: {counted.search(text)}"


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """A fresh HOME whose default store holds examples/memory, and a folder to run in."""
    home = tmp_path_factory.mktemp("home")
    work = tmp_path_factory.mktemp("work")
    (work / "examples").symlink_to(ROOT / "examples")
    (home / "notes").symlink_to(ROOT / "examples" / "memory")
    python_bin = str(Path(sys.executable).parent)
    env = {
        "HOME": str(home),
        "PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
        "MEMSEARCH_SERVICE_AUTOSTART": "0",  # no service left behind by the searches
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    assert shutil.which("memsearch", path=env["PATH"]), "the memsearch command must be installed"
    first = subprocess.run(
        ["memsearch", "index", str(ROOT / "examples" / "memory")],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=300,
    )
    assert first.returncode == 0, first.stderr
    return env, work


@pytest.mark.model
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_a_runnable_block_runs_as_written(block: Block, demo_home: tuple[dict[str, str], Path]) -> None:
    env, work = demo_home
    command = (
        [sys.executable, "-c", block.script]
        if block.language == "python"
        else ["bash", "-e", "-o", "pipefail", "-c", block.script]
    )
    config = Path(env["HOME"]) / ".memsearch" / "config.toml"
    before = config.read_bytes() if config.exists() else None
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work, timeout=300)
    finally:  # a block that sets a key must not change what the next block runs with
        if before is None:
            config.unlink(missing_ok=True)
        else:
            config.write_bytes(before)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{block.where} exited {proc.returncode}:\n{output[-3000:]}"
    failures = FAILURE.findall(output)
    assert not failures, f"{block.where} printed:\n" + "\n".join(failures)
