"""Assemble the installed package layout (tinystream.broker, .operator, .spark) for import analysis.

pyproject.toml's [tool.setuptools.package-dir] maps broker/ -> tinystream.broker,
operator/ -> tinystream.operator and spark-on-k8s/connector/ -> tinystream.spark,
so the source tree is not the package tree, and grimp (under import-linter)
walks package folders.
This script mirrors the package tree under `.cache/import-tree/` with one
symlink per source file (cheap, always current) and then runs, on it,
`lint-imports` (`python tools/import_tree.py lint`) or mypy with the
[tool.mypy] settings (`python tools/import_tree.py mypy`), or prints its path
(`python tools/import_tree.py path`, used by tests/architecture/).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / ".cache" / "import-tree"


def package_dirs() -> dict[str, str]:
    """Import name -> folder (pyproject.toml's [tool.setuptools.package-dir], which setup.py installs by)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(pyproject["tool"]["setuptools"]["package-dir"])


def build(tree: Path = TREE) -> Path:
    """Rebuild the mirror; returns the folder to put on sys.path."""
    if tree.exists():
        shutil.rmtree(tree)
    for package, folder in package_dirs().items():
        source = ROOT / folder
        for path in source.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            target = tree / package.replace(".", "/") / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(path)
    # operator/ has no __init__.py on purpose (the stdlib's `operator`); the mirror needs one.
    (tree / "tinystream" / "operator" / "__init__.py").touch()
    return tree


def main(argv: list[str]) -> int:
    tree = build()
    if argv[1:] == ["path"]:
        print(tree)
        return 0
    env = {**os.environ, "PYTHONPATH": str(tree)}
    config = str(ROOT / "pyproject.toml")
    if argv[1:] == ["mypy"]:
        command = [sys.executable, "-m", "mypy", "--config-file", config, "--cache-dir", str(ROOT / ".cache" / "mypy")]
        return subprocess.call(command, env=env, cwd=tree)
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.call([str(lint), "--config", config], env=env, cwd=tree)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
