"""Helpers of the kind end-to-end suite: tools, commands, the cluster's kubectl and helm.

It runs wherever a Docker engine, kind, helm and kubectl are available, and
skips with the reason (and the install command) everywhere else. The whole
session shares one kind cluster, created from kind-config.yaml and deleted
at the end (TINYSTREAM_E2E_KEEP=1 keeps it for debugging).

    bash tools/install-kind.sh && bash tools/install-helm.sh
    .venv/bin/python -m pytest e2e/kind -v          # or: bash e2e/kind/run.sh
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from manifests import NAMESPACE

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
KIND_CLUSTER = "tinystream-e2e"
IMAGE_REPO = "tinystream"
IMAGE_TAGS = ("e2e", "e2e-roll")  # the second tag drives the rolling-update test
#: kind v0.33.0's own default node image, pinned so a probe can ask for exactly it.
NODE_IMAGE = os.environ.get(
    "TINYSTREAM_KIND_NODE_IMAGE",
    "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5")


def go_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidate = Path(os.environ.get("GOBIN") or Path(os.environ.get("GOPATH") or Path.home() / "go") / "bin") / name
    return str(candidate) if candidate.is_file() else None


def missing_tools() -> list[str]:
    """What stops the suite here, each with how to get it."""
    missing = []
    if shutil.which("docker") is None:
        missing.append("docker (client and engine)")
    else:
        probe = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                               text=True, timeout=30)
        if probe.returncode != 0 or not probe.stdout.strip():
            missing.append("a running Docker engine (`docker info` fails: only the client is installed)")
        elif not node_image_available():
            missing.append(f"the kind node image {NODE_IMAGE.split('@')[0]} (not present locally and `docker pull` "
                           "failed: no route to its registry; `docker load` it, or set TINYSTREAM_KIND_NODE_IMAGE)")
    if go_bin("kind") is None:
        missing.append("kind (bash tools/install-kind.sh)")
    if go_bin("helm") is None:
        missing.append("helm (bash tools/install-helm.sh)")
    if shutil.which("kubectl") is None:
        missing.append("kubectl (apt-get install kubectl, or any kubectl >= 1.30)")
    return missing


def node_image_available() -> bool:
    """The node image is here already, or its registry answers a pull."""
    if subprocess.run(["docker", "image", "inspect", NODE_IMAGE], capture_output=True, timeout=30).returncode == 0:
        return True
    try:
        return subprocess.run(["docker", "pull", NODE_IMAGE], capture_output=True, timeout=600).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def run(*args: str, check: bool = True, timeout: float = 600, input: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, input=input, cwd=ROOT)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


class Kube:
    """kubectl and helm against the kind cluster's context."""

    def __init__(self, kubeconfig: Path) -> None:
        self.env_kubeconfig = str(kubeconfig)

    def kubectl(self, *args: str, **kw) -> subprocess.CompletedProcess[str]:
        return run("kubectl", "--kubeconfig", self.env_kubeconfig, "-n", NAMESPACE, *args, **kw)

    def helm(self, *args: str, **kw) -> subprocess.CompletedProcess[str]:
        return run(go_bin("helm") or "helm", "--kubeconfig", self.env_kubeconfig, "-n", NAMESPACE, *args, **kw)

    def apply(self, text: str) -> None:
        self.kubectl("apply", "-f", "-", input=text)


