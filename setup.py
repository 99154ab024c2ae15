"""List the packages under the folders that pyproject.toml maps to import names.

DESIGN.md puts the broker in broker/, the controller in operator/ and the
Spark connector under spark-on-k8s/, but they import as tinystream.broker,
tinystream.operator and tinystream.spark: [tool.setuptools.package-dir] in
pyproject.toml says which folder holds which import name (setuptools applies
it), and this script adds every subpackage below each of those roots, which
the table alone cannot express. operator/ has no __init__.py at its top so
that, run from the repository root, `import operator` still finds the
standard library's module (a namespace portion never shadows a real module).
"""

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, setup

PACKAGE_DIR: dict[str, str] = tomllib.loads(Path(__file__).with_name("pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"
]


def _packages() -> list[str]:
    packages: list[str] = []
    for name, folder in PACKAGE_DIR.items():
        packages.append(name)
        for sub in find_namespace_packages(where=folder, exclude=["*__pycache__*"]):
            packages.append(f"{name}.{sub}")
    return packages


setup(packages=_packages())
