"""The README's one-line-per-folder tree names every package folder, and only folders that exist."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = tuple(runpy.run_path(str(ROOT / "tools" / "import_tree.py"))["package_dirs"]().values())  # the package roots


def _tree_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("One line per folder"):]
    block = section[section.index("```") + 3:]
    return block[: block.index("```")].strip("\n").splitlines()


def _documented() -> set[str]:
    """Paths named by the tree, resolved through its indentation."""
    stack: list[tuple[int, str]] = []
    found: set[str] = set()
    for line in _tree_lines():
        match = re.match(r"( *)(\S+/)", line)
        if not match or "," in match.group(2):
            continue
        indent, name = len(match.group(1)), match.group(2).rstrip("/")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([p for _, p in stack] + [name])
        stack.append((indent, name))
        found.add(path)
    return found


def _package_folders() -> set[str]:
    folders = set()
    for source in SOURCES:
        for init in (ROOT / source).rglob("*.py"):
            folder = init.parent.relative_to(ROOT).as_posix()
            if "__pycache__" not in folder:
                folders.add(folder)
    return folders


def test_every_package_folder_is_in_the_readme_tree() -> None:
    assert sorted(_package_folders() - _documented()) == []


def test_the_readme_tree_names_no_missing_folder() -> None:
    assert sorted(p for p in _documented() if not (ROOT / p).is_dir()) == []
