"""No import cycles in src/memsearch, counting imports inside functions too.

A function-local import is how a cycle usually hides: it works until someone moves it to the top
of the module, and it makes the order modules load in depend on which function ran first. The
graph below is read from the source (``ast``), so it sees every ``import`` statement wherever it
sits. Left out are only imports that never run while the module is imported: those under
``if TYPE_CHECKING:``, and those under ``if __name__ == "__main__":`` (run as a script, the file is
a separate ``__main__`` module, so what it imports cannot lead back to itself).

A second, stricter reading counts two more kinds of edge, and must find no loop either: the
``if __name__ == "__main__":`` blocks (a script that imports a module which imports the script's
own module back loads that file twice in one process, once as ``__main__``), and the packages an
import loads (``from memsearch.agent.hooks.base import X`` first runs ``memsearch/agent/hooks/__init__.py``,
and whatever that imports: how ``hooks`` and ``maintenance`` once formed one loop of nine modules
that the first reading did not see).
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


def _is_script_block(node: ast.If) -> bool:
    """``if __name__ == "__main__":``."""
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _never_runs_on_import(node: ast.If) -> bool:
    """``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:`` / ``if __name__ == "__main__":``."""
    test = node.test
    if isinstance(test, ast.Compare):
        return _is_script_block(node)
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, *, scripts: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """All import statements that can run on import, at any depth (see the module docstring);
    with ``scripts``, those of ``__main__`` blocks too."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if (
            isinstance(node, ast.If)
            and _never_runs_on_import(node)
            and not (scripts and _is_script_block(node))
        ):
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


def _loaded_packages(target: str, importer: str, modules: dict[str, Path]) -> list[str]:
    """The packages importing ``target`` runs first (its ancestors), less the importer's own: those
    are loaded before the importer runs at all."""
    own = importer.split(".")
    own_ancestors = {".".join(own[:i]) for i in range(1, len(own) + 1)}
    parts = target.split(".")
    ancestors = (".".join(parts[:i]) for i in range(1, len(parts)))
    return [a for a in ancestors if a in modules and a not in own_ancestors]


def import_graph(*, scripts: bool = False, packages: bool = False) -> dict[str, set[str]]:
    """Module → the modules of ours it imports (anywhere in its source). ``scripts`` counts the
    imports of ``__main__`` blocks; ``packages`` the packages an import loads on the way."""
    modules = _module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), scripts=scripts):
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
                    if packages:
                        graph[name].update(_loaded_packages(resolved, name, modules))
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


def _described(found: list[list[str]], graph: dict[str, set[str]]) -> str:
    return "\n".join(
        " -> ".join(_one_loop(component, graph)) + f"  (all of: {', '.join(component)})"
        for component in found
    )


def test_no_import_cycles_in_src() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles in src/memsearch:\n" + _described(found, graph)


def test_the_strict_graph_sees_scripts_and_packages() -> None:
    strict = import_graph(scripts=True, packages=True)
    # The OpenCode daemon's script entry imports the OpenCode row ...
    assert "memsearch.agent.hooks.opencode" in strict["memsearch.agent.hooks.opencode_daemon"]
    # ... and importing a module of a package loads the package (here: the store's face) first.
    assert "memsearch.store" in strict["memsearch.engine.index_scan"]
    assert "memsearch.store" not in import_graph()["memsearch.engine.index_scan"]
    # A module's own packages are loaded before it runs: never an edge.
    assert "memsearch.agent.hooks" not in strict["memsearch.agent.hooks.events"]
    assert _loaded_packages("memsearch.agent.hooks.base", "memsearch.maintenance.model", _module_names()) == [
        "memsearch.agent",
        "memsearch.agent.hooks",
    ]


def test_no_import_loops_counting_scripts_and_packages() -> None:
    graph = import_graph(scripts=True, packages=True)
    found = cycles(graph)
    assert not found, "import loops in src/memsearch (scripts and packages counted):\n" + _described(
        found, graph
    )


def test_maintenance_never_imports_the_hooks() -> None:
    # The hooks start maintenance (a task the agent side runs); maintenance is handed a HookContext
    # and reaches the hook side only through it, so nothing of maintenance imports the hooks (only
    # type checkers read the context's class).
    graph = import_graph(scripts=True, packages=True)
    reached = {
        (name, target)
        for name, targets in graph.items()
        if name == "memsearch.maintenance" or name.startswith("memsearch.maintenance.")
        for target in targets
        if target == "memsearch.agent.hooks" or target.startswith("memsearch.agent.hooks.")
    }
    assert not reached
