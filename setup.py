"""Map the top-level folders to their import names.

DESIGN.md puts the broker in broker/, the controller in operator/ and the
Spark connector under spark-on-k8s/, but they import as tinystream.broker,
tinystream.operator and tinystream.spark. operator/ has no __init__.py at its
top so that, run from the repository root, `import operator` still finds the
standard library's module (a namespace portion never shadows a real module).
"""


from setuptools import find_namespace_packages, setup

ROOTS = {
    "tinystream": "tinystream",
    "tinystream.broker": "broker",
    "tinystream.operator": "operator",
    "tinystream.spark": "spark-on-k8s/connector",
}


def _packages() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for name, folder in ROOTS.items():
        package_dir[name] = folder
        packages.append(name)
        for sub in find_namespace_packages(where=folder, exclude=["*__pycache__*"]):
            packages.append(f"{name}.{sub}")
    return packages, package_dir


packages, package_dir = _packages()
setup(packages=packages, package_dir=package_dir)
