"""`tinystream operator` as a process outside any cluster, with a kubeconfig, against the real API server.

How a developer runs it on a laptop (and how it first crashed on reconcile:
with TINYSTREAM_OPERATOR_SERVICE unset it serialised a member_descriptor).
The operator here is the real one, with its embedded controller: it must
create the cluster's objects and write a status the server accepts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tinystream.testing.kube_control_plane import KubeControlPlane, free_port

pytestmark = pytest.mark.timeout(120)
TS = "/apis/tinystream.io/v1alpha1"


def test_the_operator_process_reconciles_with_only_a_kubeconfig(control_plane: KubeControlPlane, namespace: str,
                                                                 tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYSTREAM_")}
    env.update(KUBECONFIG=str(control_plane.kubeconfig), TINYSTREAM_CONTROLLER_PORT=str(free_port()),
               TINYSTREAM_DASHBOARD_PORT="0", TINYSTREAM_OPERATOR_HEALTH_PORT=str(free_port()),
               TINYSTREAM_MANAGE_CRDS="false")
    log = tmp_path / "operator.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tinystream.operator.k8s", "--standalone"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        cluster = {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster", "metadata": {"name": "laptop"},
                   "spec": {"brokers": 1}}
        status, body = control_plane.request("POST", f"{TS}/namespaces/{namespace}/tinystreamclusters", cluster)
        assert status == 201, body
        deadline = time.monotonic() + 60
        sts = phase = None
        while time.monotonic() < deadline and (sts is None or phase is None):
            assert proc.poll() is None, log.read_text()[-3000:]
            code, found = control_plane.request("GET", f"/apis/apps/v1/namespaces/{namespace}/statefulsets/laptop-broker")
            sts = found if code == 200 else None
            obj = control_plane.request("GET", f"{TS}/namespaces/{namespace}/tinystreamclusters/laptop")[1]
            phase = (obj.get("status") or {}).get("phase")
            time.sleep(0.5)
        assert sts is not None and sts["spec"]["replicas"] == 1, log.read_text()[-3000:]
        assert phase in ("Creating", "Pending"), (phase, log.read_text()[-3000:])
        text = log.read_text()
        assert "member_descriptor" not in text and "Traceback" not in text, text[-3000:]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
