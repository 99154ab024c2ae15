"""The kind end-to-end suite: a real Kubernetes (kind in Docker), the chart, the image.

It runs wherever a Docker engine, kind, helm and kubectl are available, and
skips with the reason (and the install command) everywhere else. The whole
session shares one kind cluster, created from kind-config.yaml and deleted
at the end (TINYSTREAM_E2E_KEEP=1 keeps it for debugging).

    bash tools/install-kind.sh && bash tools/install-helm.sh
    .venv/bin/python -m pytest e2e/kind -v          # or: bash e2e/kind/run.sh
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "image"))

from image_build import build_image  # noqa: E402
from kind_helpers import HERE, IMAGE_REPO, IMAGE_TAGS, KIND_CLUSTER, NODE_IMAGE, ROOT, Kube, go_bin, missing_tools, run  # noqa: E402


def pytest_collection_modifyitems(config, items):
    # A conftest hook sees every collected item of the session: touch only ours.
    ours = [item for item in items if HERE in Path(str(item.path)).parents]
    if not ours:
        return
    missing = missing_tools()
    if missing:
        skip = pytest.mark.skip(reason="kind e2e needs " + "; ".join(missing))
        for item in ours:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kind_cluster(tmp_path_factory) -> Kube:
    kind = go_bin("kind")
    kubeconfig = tmp_path_factory.mktemp("kind") / "kubeconfig"
    run(kind, "create", "cluster", "--name", KIND_CLUSTER, "--config", str(HERE / "kind-config.yaml"),
        "--image", NODE_IMAGE, "--kubeconfig", str(kubeconfig), "--wait", "180s", timeout=900)
    try:
        build_image(f"{IMAGE_REPO}:{IMAGE_TAGS[0]}")  # the Dockerfile's base, or a local one without Docker Hub
        for tag in IMAGE_TAGS:  # same image, two names: a tag change is an image change for the StatefulSet
            run("docker", "tag", f"{IMAGE_REPO}:{IMAGE_TAGS[0]}", f"{IMAGE_REPO}:{tag}")
            run(kind, "load", "docker-image", f"{IMAGE_REPO}:{tag}", "--name", KIND_CLUSTER, timeout=900)
        yield Kube(kubeconfig)
    finally:
        if os.environ.get("TINYSTREAM_E2E_KEEP") != "1":
            run(kind, "delete", "cluster", "--name", KIND_CLUSTER, check=False, timeout=300)


@pytest.fixture(scope="session")
def installed(kind_cluster: Kube) -> Kube:
    kind_cluster.helm("install", "ts", str(ROOT / "charts" / "tinystream"), "--create-namespace",
                      "--set", f"image.repository={IMAGE_REPO}", "--set", f"image.tag={IMAGE_TAGS[0]}",
                      "--set", "image.pullPolicy=Never", "--wait", "--timeout", "5m")
    return kind_cluster
