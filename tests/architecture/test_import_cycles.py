"""No import cycles: not between modules, not between packages (folders).

import-linter's layer contracts (pyproject.toml, run by `make lint`) keep the
arrows between the named layers pointing down; this test covers everything
else, including imports inside functions, which grimp sees as well. A cycle
between two folders is what makes an architecture hard to see: one folder can
no longer be read, tested or replaced without the other.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


@pytest.fixture(scope="module")
def import_graph() -> grimp.ImportGraph:
    tree = runpy.run_path(str(ROOT / "tools" / "import_tree.py"))["build"]()
    sys.path.insert(0, str(tree))
    try:
        return grimp.build_graph("tinystream", cache_dir=None)
    finally:
        sys.path.remove(str(tree))


def _module_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _package(module: str, graph: grimp.ImportGraph) -> str:
    """The folder a module lives in (a package's own __init__ belongs to the package)."""
    if graph.find_children(module):
        return module
    return module.rpartition(".")[0]


def test_no_module_level_cycles(import_graph: grimp.ImportGraph) -> None:
    assert _strongly_connected(_module_edges(import_graph)) == []


def test_no_package_level_cycles(import_graph: grimp.ImportGraph) -> None:
    packages: dict[str, set[str]] = {}
    for module, imported in _module_edges(import_graph).items():
        source = _package(module, import_graph)
        for target in imported:
            target_package = _package(target, import_graph)
            # A package may import its own children and a child its parent's
            # package-level names only through explicit layering; count real folder edges.
            nested = target_package.startswith(source + ".") or source.startswith(target_package + ".")
            if target_package != source and not nested:
                packages.setdefault(source, set()).add(target_package)
    assert _strongly_connected(packages) == []


def test_the_checker_finds_a_cycle() -> None:
    """The checker itself can fail: a two-node loop is reported."""
    assert _strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
