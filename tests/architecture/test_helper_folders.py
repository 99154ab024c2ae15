"""Test helper modules are found one way: pyproject's pytest `pythonpath`, not `sys.path` inserts.

The suite runs with --import-mode=importlib, which puts no test folder on
sys.path; the folders whose modules tests import by name (compat_helpers,
kmock_helpers, ...) are listed once in [tool.pytest.ini_options].pythonpath.
Every folder there is on sys.path in every run, so a name that two of them
hold would import whichever comes first: helper names are unique across them,
and so are the test modules that other tests import by name.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITES = ("tests", "e2e")


def _helper_folders() -> list[Path]:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return [ROOT / folder for folder in options["pythonpath"]]


def _suite_files() -> list[Path]:
    return [path for suite in SUITES for path in (ROOT / suite).rglob("*.py") if "__pycache__" not in path.parts]


def _test_modules_imported_by_name() -> set[str]:
    pattern = re.compile(r"^\s*(?:from|import) (test_\w+)\b", re.MULTILINE)
    return {name for path in _suite_files() for name in pattern.findall(path.read_text())}


def test_every_helper_folder_exists() -> None:
    assert [str(f.relative_to(ROOT)) for f in _helper_folders() if not f.is_dir()] == []


def test_no_module_name_is_in_two_helper_folders() -> None:
    imported_tests = _test_modules_imported_by_name()
    holders: dict[str, list[str]] = defaultdict(list)
    for folder in _helper_folders():
        for path in folder.glob("*.py"):
            name = path.stem
            if name == "conftest" or (name.startswith("test_") and name not in imported_tests):
                continue  # pytest imports these by path, never by name
            holders[name].append(str(folder.relative_to(ROOT)))
    assert {name: where for name, where in holders.items() if len(where) > 1} == {}
    assert sorted(name for name in holders if name in sys.stdlib_module_names) == []


def test_no_suite_puts_a_folder_on_sys_path_itself() -> None:
    inserts = [f"{path.relative_to(ROOT)}:{n}" for path in _suite_files() if "architecture" not in path.parts
               for n, line in enumerate(path.read_text().splitlines(), 1) if line.lstrip().startswith("sys.path.insert")]
    assert inserts == []
