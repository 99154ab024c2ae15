"""TinyStream: a Kafka-compatible streaming platform in Python that runs on Kubernetes.

Layers, top down (pyproject.toml's import-linter contracts check them; `make lint`):

    apps        cli/ (the `tinystream` command), bench/ (benchmarks), dev/ (local cluster),
                testing/ (test and benchmark tooling)
    components  broker (broker/), operator (operator/: controller core, service, k8s driver,
                dashboard), spark (spark-on-k8s/connector/), registry/ (the schema registry)
    common      config/ (settings in four layers), controller_client (the control API's client),
                log_format and foreground (logging, running a server until a signal),
                scram_users (salted SCRAM credentials: brokers check them, the operator writes them),
                atomic_file (replace a small file so a crash leaves the old or the new content)

pyproject.toml's [tool.setuptools.package-dir] maps the component folders to
tinystream.broker, tinystream.operator and tinystream.spark (setup.py installs by it).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__version__ = "0.2.0"


def _bind_operator_source() -> None:
    """Make `tinystream.operator` importable from an editable install.

    operator/ has no top-level __init__.py so that it never shadows the
    standard library's `operator` when the repository root is on sys.path.
    A wheel copies it to tinystream/operator/ and needs nothing here, but
    setuptools' editable finder cannot resolve a namespace package nested in
    a regular one, so we bind the source folder ourselves.
    """
    name = f"{__name__}.operator"
    source = Path(__file__).resolve().parent.parent / "operator"
    if name in sys.modules or not source.is_dir():
        return
    if importlib.util.find_spec(name) is not None:
        return
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(source)]
    sys.modules[name] = importlib.util.module_from_spec(spec)


_bind_operator_source()


class _CheckoutFinder:
    """Find `tinystream.broker` and `tinystream.spark` in the checkout this file is in.

    An editable install's finder maps them to the folders of the checkout it was installed from; a second
    checkout (a git worktree run with PYTHONPATH=<its root>) would otherwise import its own tinystream/ but
    the install's broker/. Installed only when the folders are beside this package (not in a wheel).
    """

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


def _bind_checkout_packages() -> None:
    root = Path(__file__).resolve().parent.parent
    folders = {f"{__name__}.broker": root / "broker", f"{__name__}.spark": root / "spark-on-k8s" / "connector"}
    found = {name: folder for name, folder in folders.items() if (folder / "__init__.py").is_file()}
    if found and not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutFinder(found))


_bind_checkout_packages()
