"""The split packages stay split along their parts: no import cycle through them (at module level
or inside a function), no module of src/memsearch over 600 lines, no module importing another's
private helper, the old import paths still answer, and the config package never pulls in the CLI
(its flag table lives in ``memsearch.cli.flags``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memsearch

SRC = Path(memsearch.__file__).resolve().parent
#: The packages this test holds to the rules (others are split by their own changes).
PACKAGES = (
    "memsearch.store",
    "memsearch.config",
    "memsearch.cli.flags",
    "memsearch.maintenance",
    "memsearch.skills",
    "memsearch.watcher",
    "memsearch.http",
)
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in SRC.rglob("*.py"):
        parts = ["memsearch", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """memsearch modules imported anywhere in ``path`` (functions included), except under
    ``if TYPE_CHECKING:``, which never runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for sub in ast.walk(node)
    }
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & set(modules)
            targets.update(submodules or {base})
    resolved = set()
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target.startswith("memsearch") and target != name:
            resolved.add(target)
    return resolved


def _ours(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PACKAGES)


def test_no_import_cycle_through_the_split_packages() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(graph[start])
        while todo:
            current = todo.pop()
            if current == goal:
                return True
            if current not in seen:
                seen.add(current)
                todo.extend(graph.get(current, ()))
        return False

    cycles = [name for name in modules if _ours(name) and reaches(name, name)]
    assert cycles == []
    assert any(_ours(name) for name in modules)  # the packages were found


def test_no_module_of_the_split_packages_is_over_600_lines() -> None:
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in _modules().items()
        if _ours(name)
    }
    assert len(sizes) >= 15
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_module_in_src_is_over_600_lines() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _modules().items()}
    assert len(sizes) > 100  # the whole package was read
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_module_imports_another_modules_private_helper() -> None:
    """A helper two modules need is public in one of them (``llm.prepare``, not ``llm._prepare``),
    so a private name can be changed without reading the rest of the package."""
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level or (node.module or "").startswith("memsearch"):
                found += [
                    f"{name}: from {node.module} import {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert found == []


def test_old_import_paths_answer() -> None:
    from memsearch import config, http, maintenance, skills, store, watcher

    for package in (config, store, maintenance, skills, watcher, http):
        missing = [name for name in package.__all__ if not hasattr(package, name)]
        assert missing == []
    assert store.DEFAULT_URI == config.DEFAULT_MILVUS_URI == config.MilvusConfig().uri
    assert config.MilvusConfig().collection == store.DEFAULT_COLLECTION
    # names the tests and the CLI use beyond ``__all__``
    assert maintenance._stamp(maintenance._now()).endswith("Z")
    assert callable(maintenance.task_paths) and callable(skills.host_skill_dir)


def test_config_does_not_import_the_cli() -> None:
    code = (
        "import sys, memsearch.config; "
        "print(sorted(m for m in ('click', 'memsearch.cli') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
