"""No function in the shipped code is longer than 80 lines: a longer one is several steps without names.

A function that grows past the limit is split into named steps (see STYLE.md); this test says which
one, and how long it is, so the limit cannot be crossed without anyone noticing.
"""

from __future__ import annotations

import ast
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = tuple(runpy.run_path(str(ROOT / "tools" / "import_tree.py"))["package_dirs"]().values())
LIMIT = 80


def _long_functions() -> list[str]:
    found = []
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > LIMIT:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_the_sources_are_found():
    assert any((ROOT / source / "app.py").exists() for source in SOURCES)  # broker/app.py: the scan sees code


def test_no_function_is_longer_than_the_limit():
    assert _long_functions() == []
