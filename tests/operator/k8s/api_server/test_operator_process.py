"""`tinystream operator` as a process outside any cluster, with a kubeconfig, against the real API server.

How a developer runs it on a laptop (and how it first crashed on reconcile:
with TINYSTREAM_OPERATOR_SERVICE unset it serialised a member_descriptor).
The operator here is the real one, with its embedded controller: it must
create the cluster's objects and write a status the server accepts.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import ssl
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinystream.testing.kube_control_plane import KubeControlPlane, free_port

pytestmark = pytest.mark.timeout(120)
TS = "/apis/tinystream.io/v1alpha1"


@contextlib.contextmanager
def operator_process(control_plane: KubeControlPlane, log: Path, controller_port: int) -> Iterator[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYSTREAM_")}
    env.update(KUBECONFIG=str(control_plane.kubeconfig), TINYSTREAM_CONTROLLER_PORT=str(controller_port),
               TINYSTREAM_DASHBOARD_PORT="0", TINYSTREAM_OPERATOR_HEALTH_PORT=str(free_port()),
               TINYSTREAM_MANAGE_CRDS="false", TINYSTREAM_CONTROLLER_SECRET_FILE=str(log.parent / "master.secret"))
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tinystream.operator.k8s", "--standalone"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_operator_process_reconciles_with_only_a_kubeconfig(control_plane: KubeControlPlane, namespace: str,
                                                                 tmp_path) -> None:
    log = tmp_path / "operator.log"
    with operator_process(control_plane, log, free_port()) as proc:
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


def handshake(port: int, server_name: str, cadata: str) -> dict:
    """The verified certificate the operator's controller port presents to a client asking for `server_name`."""
    context = ssl.create_default_context(cadata=cadata)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=server_name) as tls:
        return tls.getpeercert()


def test_the_operator_serves_each_cluster_its_controller_over_tls(control_plane: KubeControlPlane, namespace: str,
                                                                  tmp_path) -> None:
    """Brokers are told https and their CA; the port answers their cluster's name with that CA's certificate;
    plain HTTP and anonymous HTTPS get nothing."""
    port = free_port()
    log = tmp_path / "operator.log"
    with operator_process(control_plane, log, port) as proc:
        cluster = {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster", "metadata": {"name": "sealed"},
                   "spec": {"brokers": 1}}
        assert control_plane.request("POST", f"{TS}/namespaces/{namespace}/tinystreamclusters", cluster)[0] == 201
        name = f"sealed-controller.{namespace}.svc"
        deadline = time.monotonic() + 60
        seen: dict | None = None
        while seen is None:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            code, secret = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/secrets/sealed-broker-tokens")
            if code == 200 and "controller-ca.crt" in secret.get("data", {}):
                ca = base64.b64decode(secret["data"]["controller-ca.crt"]).decode()
                with contextlib.suppress(ssl.SSLError, OSError):  # until the cluster's controller opens
                    seen = handshake(port, name, ca)
            time.sleep(0.3)
        assert (("DNS", name) in seen["subjectAltName"]
                and ("DNS", f"{name}.cluster.local") in seen["subjectAltName"]), seen

        # The broker ConfigMap points brokers at that name over https, trusting that file.
        config = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/sealed-config")[1]
        broker = tomllib.loads(config["data"]["broker.toml"])["broker"]
        assert broker["controller.url"] == f"https://{name}:{port}/clusters/{namespace}/sealed"
        assert broker["controller.ssl.truststore.location"] == "/etc/tinystream-auth/controller-ca.crt"

        # Plain HTTP gets no answer; HTTPS without a token is refused (TLS is not a credential).
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/clusters/{namespace}/sealed/v1/metadata", timeout=5)
        https = urllib.request.Request(f"https://127.0.0.1:{port}/clusters/{namespace}/sealed/v1/metadata")
        context = ssl.create_default_context(cadata=ca)
        context.check_hostname = False  # 127.0.0.1 gets the operator's certificate: reach the API past the name
        context.verify_mode = ssl.CERT_NONE
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(https, timeout=5, context=context)
        assert refused.value.code == 401
        text = log.read_text()
        assert "Traceback" not in text, text[-3000:]
