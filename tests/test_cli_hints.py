"""A command a hint prints works when copied as printed: it names the store the hint came from.

Found with ``make demo``: its search runs on ``--milvus-uri .memsearch-demo/milvus.db --collection
demo``, and the truncation hint said ``run 'memsearch expand <hash>'``, which looks in the default
store and fails. These tests run the demo's own commands (read from the Makefile), then the printed
command, verbatim, as real processes.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_process import memsearch

ROOT = Path(__file__).resolve().parents[1]
HINT = re.compile(r"\[truncated, run '(memsearch expand [^\n]*)' for full content\]")

pytestmark = pytest.mark.model


def make_variables(makefile: str) -> dict[str, str]:
    """``NAME := value`` lines of the Makefile (the simple ones the demo uses)."""
    found = {}
    for line in makefile.splitlines():
        name, sep, value = line.partition(":=")
        if sep and re.fullmatch(r"[A-Z_]+", name.strip()):
            found[name.strip()] = value.strip()
    return found


def demo_commands() -> list[list[str]]:
    """The ``make demo`` recipe's memsearch commands, with the Makefile's variables filled in."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    variables = make_variables(makefile)
    recipe = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    commands = []
    for line in recipe:
        text = line.strip()
        for _ in range(3):  # variables that name variables
            text = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), m.group(0)), text)
        argv = shlex.split(text)
        assert argv[0].endswith("/memsearch"), text
        commands.append(argv[1:])
    return commands


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return memsearch(*argv, cwd=cwd)


def test_the_demo_s_printed_expand_command_works_as_printed(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    commands = demo_commands()
    assert [c[0] for c in commands] == ["index", "search", "search"]
    printed = []
    for argv in commands:
        proc = run(argv, tmp_path)
        assert proc.returncode == 0, proc.stderr
        printed += HINT.findall(proc.stdout)
    assert printed, "the demo's searches printed no truncated result"
    for command in printed:
        argv = shlex.split(command)
        assert argv[:2] == ["memsearch", "expand"]
        assert argv[3:] == ["--milvus-uri", ".memsearch-demo/milvus.db", "--collection", "demo"]
        proc = run(argv[1:], tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"Source: {tmp_path / 'examples' / 'memory'}")
    # Without the flags (what the hint printed before) the same command fails.
    bare = run(["expand", shlex.split(printed[0])[2]], tmp_path)
    assert bare.returncode == 1 and "No collection 'memsearch_chunks'" in bare.stderr


def test_the_reset_hint_names_the_store_it_was_given(tmp_path: Path) -> None:
    """``reset`` without a terminal says which command to run instead; run as printed, it drops
    the store that was named (not the default one)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "n.md").write_text("# N\n\nSome note about the deploy.\n", encoding="utf-8")
    store = ["--milvus-uri", "my store/m.db", "--collection", "notes_1"]
    assert run(["index", str(notes), *store], tmp_path).returncode == 0
    asked = subprocess.run(
        [sys.executable, "-m", "memsearch", "reset", *store],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        timeout=120,
    )
    assert asked.returncode == 1
    hint = re.search(r"Hint: run `([^`]*)`", asked.stderr)
    assert hint is not None, asked.stderr
    assert hint.group(1) == "memsearch reset --yes --milvus-uri 'my store/m.db' --collection notes_1"
    done = run(shlex.split(hint.group(1))[1:], tmp_path)
    assert (done.returncode, done.stdout) == (0, "Dropped collection.\n"), done.stderr
    gone = run(["stats", *store], tmp_path)
    assert gone.returncode == 1 and "No collection 'notes_1'" in gone.stderr
