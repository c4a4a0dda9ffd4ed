"""The import rules docs/architecture.md states, enforced on the source.

Why a test reads the doc: the rules are written once, in the table a reader sees ("Wings and what
they may import"), and this test holds the code to that table, so the two cannot drift. The graph
is ``test_import_cycles.import_graph``: every import statement that can run, at any depth (a
function-local import is still a dependency), without ``TYPE_CHECKING`` blocks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_import_cycles import import_graph

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
SECTION = "## Wings and what they may import"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([\w.]+)`", cell)


def rules() -> tuple[dict[str, str], dict[str, set[str]], set[tuple[str, str]]]:
    """(top-level module → its wing, wing → the wings it may import, allowed exceptions)."""
    wing_of: dict[str, str] = {}
    may: dict[str, set[str]] = {}
    exceptions: set[tuple[str, str]] = set()
    for line in _section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| **") and len(cells) == 3:
            wing = cells[0].strip("*")
            for module in _names(cells[1]):
                wing_of[module] = wing
            may[wing] = {wing, *(w.strip("*") for w in re.findall(r"\*\*[\w ]+\*\*", cells[2]))}
        match = re.match(r"- `([\w.]+)` → `([\w.]+)`", line.strip())
        if match:
            exceptions.add((match.group(1), match.group(2)))
    section = _section()
    for wing in list(may):
        if "everything" in section.split(f"| **{wing}** |", 1)[1].splitlines()[0]:
            may[wing] = set(may)
    return wing_of, may, exceptions


def _top(module: str) -> str:
    """``memsearch.engine.indexer`` → ``engine``; ``memsearch`` (the package face) → ``memsearch``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _covers(name: str, module: str) -> bool:
    return module == f"memsearch.{name}" or module.startswith(f"memsearch.{name}.")


def test_every_top_level_module_has_a_wing() -> None:
    wing_of, _, _ = rules()
    tops = {_top(m) for m in import_graph()} - {"memsearch"}
    assert sorted(tops - set(wing_of)) == [], "add these to the table in docs/architecture.md"
    assert sorted(set(wing_of) - tops) == [], "the table names modules that do not exist"


def test_imports_follow_the_wings() -> None:
    wing_of, may, exceptions = rules()
    broken = []
    for module, targets in import_graph().items():
        if module == "memsearch":
            continue  # the package face: MemSearch and __version__, for users
        wing = wing_of[_top(module)]
        for target in targets:
            if target == "memsearch":
                broken.append(f"{module} imports the package face; import the module it needs")
                continue
            if wing_of[_top(target)] in may[wing]:
                continue
            if any(_covers(a, module) and _covers(b, target) for a, b in exceptions):
                continue
            broken.append(f"{module} ({wing}) → {target} ({wing_of[_top(target)]})")
    assert broken == []


@pytest.mark.parametrize("wing", ["engine", "models", "agent"])
def test_a_wing_package_says_it_is_private(wing: str) -> None:
    """The wings' packages are not public: their face says so, and names the public faces."""
    face = DOC.parent.parent / "src" / "memsearch" / wing / "__init__.py"
    assert "Private to memsearch" in face.read_text(encoding="utf-8")


def test_the_rules_can_fail() -> None:
    """The table is read: a wing not allowed upward really is refused (guards the parser)."""
    wing_of, may, _ = rules()
    assert wing_of["errors"] == "floor" and may["floor"] == {"floor"}
    assert wing_of["cli"] == "ways in" and may["ways in"] >= {"floor", "engine", "agent"}
    assert "agent" not in may["engine"] and "engine" not in may["store"]
