"""The operator's fast tier: a real etcd + kube-apiserver + kube-controller-manager as processes.

One control plane per session (ready in about 3 s), with the CRDs from crds/
applied as a user would (`kubectl apply -f crds/`). Tests that depend on what
the API server does run here instead of against KMock: CRD validation and
defaults, CEL rules, subresources, RBAC, conflicts, finalizers, garbage
collection. Each test works in a namespace of its own.

The binaries come from `make k8s-binaries` (`make test` builds the ones needed
here); without them the tests skip and say so.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_api import RealApi

from tinystream.testing.kube_control_plane import BUILD_COMMAND, KubeControlPlane, missing_binaries

ROOT = Path(__file__).resolve().parents[4]
_namespaces = itertools.count()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeControlPlane]:
    missing = missing_binaries("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")
    if missing:
        pytest.skip(f"not built: {', '.join(missing)}; run {BUILD_COMMAND}")
    with KubeControlPlane(tmp_path_factory.mktemp("control-plane"), controller_manager=True) as cp:
        cp.kubectl("apply", "-f", str(ROOT / "crds"))
        cp.kubectl("wait", "--for=condition=Established", "--timeout=30s",
                   "crd/tinystreamclusters.tinystream.io", "crd/topics.tinystream.io",
                   "crd/tinystreamschemas.tinystream.io")
        yield cp


@pytest.fixture
def namespace(control_plane: KubeControlPlane) -> str:
    name = f"t{next(_namespaces)}"
    status, body = control_plane.request("POST", "/api/v1/namespaces",
                                         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert status == 201, body
    return name


@pytest.fixture
async def api(control_plane, namespace):
    """The test's namespace through the real API server (closed at teardown)."""
    client = RealApi(control_plane, namespace)
    yield client
    await client.close()
