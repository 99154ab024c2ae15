"""Run helm on the chart and read back what it renders.

helm is looked up on PATH, then in Go's bin folder (tools/install-helm.sh
installs it there through the Go module proxy). Tests that need it skip
with the install command when it is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from k8s_helpers import CHART_DIR

INSTALL_HINT = "helm not found: run `bash tools/install-helm.sh` (builds helm through the Go module proxy)"
FULL_VALUES = CHART_DIR / "ci" / "full-values.yaml"


def find_helm() -> str | None:
    found = shutil.which("helm")
    if found:
        return found
    gopath = os.environ.get("GOPATH") or str(Path.home() / "go")
    candidate = Path(os.environ.get("GOBIN") or Path(gopath) / "bin") / "helm"
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def helm(helm_bin: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm_bin, *args], capture_output=True, text=True, timeout=60, check=check)


class StrictLoader(yaml.SafeLoader):
    """Refuses duplicate mapping keys, as the API server's strict decoding does."""


def _no_duplicates(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    duplicates = {k for k in keys if keys.count(k) > 1}
    if duplicates:
        raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {sorted(duplicates)}", node.start_mark)
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def render(helm_bin: str, *extra: str, namespace: str = "tinystream") -> list[dict[str, Any]]:
    out = helm(helm_bin, "template", "ts", str(CHART_DIR), "--namespace", namespace, *extra).stdout
    return [doc for doc in yaml.load_all(out, Loader=StrictLoader) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]
