"""Imports run one way: no cycle between modules of webapp/ and trainer/, none between the
apps of webapp/ (chat, learning, privacy, ...), and trainer/ never imports webapp/. Every import
counts, the ones inside functions too: a function-local import that closes a cycle only hides it
until that function runs.

Run alone: ``python -m pytest tests/test_import_graph.py`` (no database, no broker).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("webapp", "trainer")
WEBAPP_PACKAGES = {path.parent.name for path in (ROOT / "webapp").glob("*/__init__.py")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The project modules this module imports anywhere (type-checking-only imports aside)."""
    found: set[str] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}".rstrip(".") if base else package
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
    return {name for name in found if name in known and name != module}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {
        name: _imported(ast.parse(path.read_text()), name, path.name == "__init__.py", known)
        for name, path in modules.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def app_of(module: str) -> str:
    """The module's node in the graph of apps: ``webapp.<package>`` for a module of one of
    webapp's packages (its Django apps, and webapp.infra), the module itself for a top-level
    module of webapp/ (the wiring above the apps, such as webapp.urls, webapp.asgi and
    webapp.settings, and the modules below them, webapp.inference and webapp.config), and
    ``trainer`` for the library."""
    parts = module.split(".")
    if parts[0] != "webapp":
        return parts[0]
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in WEBAPP_PACKAGES):
        return ".".join(parts[:2])
    return module


def app_cycles(graph: dict[str, set[str]], app_of: Callable[[str], str]) -> list[list[str]]:
    """Each cycle between apps, as the module imports that make it: every import from one app of
    the cycle to another, as "module -> imported module"."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, imports in graph.items():
        for name in imports:
            if app_of(module) != app_of(name):
                edges.setdefault((app_of(module), app_of(name)), []).append(f"{module} -> {name}")
    apps: dict[str, set[str]] = {app_of(name): set() for name in graph}
    for source, target in edges:
        apps[source].add(target)
        apps.setdefault(target, set())
    return [
        sorted(
            edge
            for (source, target), found in edges.items()
            if source in component and target in component
            for edge in found
        )
        for component in _cycles(apps)
    ]


def test_no_module_of_webapp_or_trainer_is_part_of_an_import_cycle() -> None:
    assert _cycles(import_graph()) == []


def test_no_app_of_webapp_is_part_of_an_import_cycle() -> None:
    cycles = app_cycles(import_graph(), app_of)
    assert cycles == [], "imports that close a cycle between apps:\n" + "\n\n".join(
        "\n".join(edges) for edges in cycles
    )


def test_the_app_graph_finds_a_cycle_that_no_module_is_part_of() -> None:
    graph = {
        "webapp.chat.models": set(),
        "webapp.chat.admin": {"webapp.learning.services"},
        "webapp.learning.services": {"webapp.chat.models", "trainer.judge"},
        "webapp.urls": {"webapp.chat.admin", "webapp.config"},
        "webapp.config": set(),
        "trainer.judge": set(),
    }
    assert _cycles(graph) == []
    assert app_cycles(graph, app_of) == [
        [
            "webapp.chat.admin -> webapp.learning.services",
            "webapp.learning.services -> webapp.chat.models",
        ]
    ]
    del graph["webapp.chat.admin"]
    assert app_cycles(graph, app_of) == []


def test_each_package_of_webapp_is_an_app_and_each_top_level_module_a_node_of_its_own() -> None:
    assert app_of("webapp.learning.admin.training") == "webapp.learning"
    assert app_of("webapp.chat") == "webapp.chat"
    assert app_of("webapp.urls") == "webapp.urls"
    assert app_of("webapp.inference") == "webapp.inference"
    assert app_of("webapp") == "webapp"
    assert app_of("trainer.losses") == "trainer"


def test_trainer_never_imports_webapp() -> None:
    graph = import_graph()
    leaks = {
        module: sorted(name for name in imports if name.split(".")[0] == "webapp")
        for module, imports in graph.items()
        if module.split(".")[0] == "trainer"
    }
    assert {module: names for module, names in leaks.items() if names} == {}


def test_the_graph_sees_function_local_and_relative_imports() -> None:
    tree = ast.parse("def f():\n    from .b import c\n    import pkg.d\n")
    known = {"pkg.a", "pkg.b", "pkg.b.c", "pkg.d"}
    assert _imported(tree, "pkg.a", False, known) == {"pkg.b.c", "pkg.d"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
