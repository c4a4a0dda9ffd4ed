"""No import cycles in src/memsearch, counting imports inside functions too.

A function-local import is how a cycle usually hides: it works until someone moves it to the top
of the module, and it makes the order modules load in depend on which function ran first. The
graph below is read from the source (``ast``), so it sees every ``import`` statement wherever it
sits. Left out are only imports that never run while the module is imported: those under
``if TYPE_CHECKING:``, and those under ``if __name__ == "__main__":`` (run as a script, the file is
a separate ``__main__`` module, so what it imports cannot lead back to itself).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "memsearch"


def _module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package is named by its ``__init__``)."""
    modules = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _never_runs_on_import(node: ast.If) -> bool:
    """``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:`` / ``if __name__ == "__main__":``."""
    test = node.test
    if isinstance(test, ast.Compare):
        return (
            isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
        )
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """All import statements that can run on import, at any depth (see the module docstring)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if isinstance(node, ast.If) and _never_runs_on_import(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The most specific module of ours that importing ``name`` loads, or None for other packages."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    """Module → the modules of ours it imports (anywhere in its source)."""
    modules = _module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")
                    if not is_package:
                        anchor = anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from package import submodule`` loads the submodule (its package is already
                # loaded, as an ancestor of the importer or by the import itself); any other name
                # comes from ``base`` itself.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _one_loop(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A concrete loop through the component's first module, for the failure message."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for succ in sorted(graph[node] & members):
            if succ == start:
                return [*paths[node], start]
            if succ not in paths:
                paths[succ] = [*paths[node], succ]
                queue.append(succ)
    return component


def test_the_graph_sees_function_local_imports() -> None:
    # The engine imports the event handlers inside a function (to keep `memsearch hook` cheap);
    # the graph must still hold that edge, or the test below would pass for the wrong reason.
    graph = import_graph()
    assert "memsearch.agent.hooks.events" in graph["memsearch.agent.hooks.engine"]
    # ... but not the script entry of the OpenCode daemon, which never runs on import.
    assert "memsearch.agent.hooks.opencode" not in graph["memsearch.agent.hooks.opencode_daemon"]
    assert "memsearch.core" in graph["memsearch"]  # the lazy ``__getattr__`` import


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert _one_loop(["a", "b", "c"], graph) == ["a", "b", "c", "a"]


def test_no_import_cycles_in_src() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles in src/memsearch:\n" + "\n".join(
        " -> ".join(_one_loop(component, graph)) + f"  (all of: {', '.join(component)})"
        for component in found
    )
