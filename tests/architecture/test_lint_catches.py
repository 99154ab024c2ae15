"""`make lint` fails on what it is meant to catch: a layer broken, a type error in a strict package, a lint error.

Each check runs the real tool on a copy of the package tree with one bad
module added, so a misconfiguration that silently checks nothing fails here.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "pyproject.toml")
BUILD = runpy.run_path(str(ROOT / "tools" / "import_tree.py"))["build"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return BUILD(tmp_path / "tree")


def _run(command: list[str], tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def test_the_tree_passes_the_layer_contracts(tree: Path) -> None:
    result = _run([str(Path(sys.executable).with_name("lint-imports")), "--config", CONFIG], tree)
    assert result.returncode == 0, result.stdout[-3000:]


def test_storage_importing_the_server_breaks_a_layer(tree: Path) -> None:
    bad = tree / "tinystream" / "broker" / "storage" / "upward.py"
    bad.write_text("from tinystream.broker.server import connection\n")
    result = _run([str(Path(sys.executable).with_name("lint-imports")), "--config", CONFIG], tree)
    assert result.returncode != 0
    assert "tinystream.broker.storage is not allowed to import tinystream.broker.server" in result.stdout


def test_a_type_error_in_a_strict_package_is_reported(tree: Path, tmp_path: Path) -> None:
    bad = tree / "tinystream" / "broker" / "protocol" / "wrong.py"
    bad.write_text("def size() -> int:\n    return 'four'\n")
    result = _run([sys.executable, "-m", "mypy", "--config-file", CONFIG, "--cache-dir", str(tmp_path / "mypy")], tree)
    assert result.returncode != 0
    assert "protocol/wrong.py:2: error: Incompatible return value type" in result.stdout


def test_a_lint_error_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "unused.py"
    bad.write_text("import os\n")
    result = subprocess.run([str(Path(sys.executable).with_name("ruff")), "check", "--config", CONFIG, str(bad)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "F401" in result.stdout
