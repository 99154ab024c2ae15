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
from chart_helpers import by_kind, find_helm, render

from tinystream.testing.kube_control_plane import KubeControlPlane, free_port
from tinystream.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
TS = "/apis/tinystream.io/v1alpha1"


@contextlib.contextmanager
def operator_process(control_plane: KubeControlPlane, log: Path, controller_port: int, *,
                     pod_env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """The operator alone (--standalone); with `pod_env` (a pod's environment), with peering as the chart runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYSTREAM_")}
    env.update(KUBECONFIG=str(control_plane.kubeconfig), TINYSTREAM_CONTROLLER_PORT=str(controller_port),
               TINYSTREAM_DASHBOARD_PORT="0", TINYSTREAM_OPERATOR_HEALTH_PORT=str(free_port()),
               TINYSTREAM_MANAGE_CRDS="false", TINYSTREAM_CONTROLLER_SECRET_FILE=str(log.parent / "master.secret"))
    env.update(pod_env or {})
    mode = [] if pod_env else ["--standalone"]
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tinystream.operator.k8s", *mode], env=env,
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
    # Stopped with SIGTERM (its handler is hand_over.py's, which sets kopf's stop flag): kopf stopped cleanly.
    assert proc.returncode == 0, log.read_text()[-3000:]


def chart_pod_env(namespace: str, pod: str) -> dict[str, str]:
    """The operator container's environment as the chart renders it for a pod named `pod`, watching `namespace`
    (plain values as given, the pod's own name where a fieldRef asks for it)."""
    helm_bin = find_helm()
    if helm_bin is None:
        pytest.skip("helm is not installed")
    deployment = by_kind(render(helm_bin, "--set", f"operator.watchNamespace={namespace}"), "Deployment")[0]
    env = {"HOSTNAME": pod}
    for var in deployment["spec"]["template"]["spec"]["containers"][0]["env"]:
        field = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field == "metadata.name":
            env[var["name"]] = pod
        elif "value" in var:
            env[var["name"]] = str(var["value"])
    for local in ("TINYSTREAM_CONTROLLER_SECRET_REF", "TINYSTREAM_DASHBOARD_LOGIN_REF", "TINYSTREAM_OPERATOR_SERVICE",
                  "TINYSTREAM_CONTROLLER_PORT", "TINYSTREAM_DASHBOARD_PORT", "TINYSTREAM_OPERATOR_HEALTH_PORT",
                  "TINYSTREAM_MANAGE_CRDS", "TINYSTREAM_BROKER_IMAGE"):
        env.pop(local, None)  # the process's own ports and files (operator_process), not the release's
    return env


def test_a_restarted_operator_container_reconciles_at_once(control_plane: KubeControlPlane, namespace: str,
                                                           tmp_path) -> None:
    """A container restarted in its pod (same name, so the same peering priority) creates the first cluster's
    StatefulSet within seconds. kopf's default identity (user@host/start time) made it see its predecessor's
    peering record as another operator of the same priority and pause until that record expired: 53 s here."""
    env = chart_pod_env(namespace, "ts-tinystream-7d9f8-x2x4q")
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": env["TINYSTREAM_PEERING_NAME"]}}
    assert control_plane.request("POST", f"/apis/kopf.dev/v1/namespaces/{namespace}/kopfpeerings", peering)[0] == 201
    log = tmp_path / "operator.log"
    peering_path = f"/apis/kopf.dev/v1/namespaces/{namespace}/kopfpeerings/{env['TINYSTREAM_PEERING_NAME']}"
    with operator_process(control_plane, log, free_port(), pod_env=env) as first:
        wait_until(lambda: control_plane.request("GET", peering_path)[1].get("status"), timeout=60, interval=0.3,
                   what=lambda: f"the first's peering record:\n{log.read_text()[-3000:]}")
        first.kill()  # a crash: its peering record stays behind, alive for 60 s
    with operator_process(control_plane, log, free_port(), pod_env=env) as proc:
        cluster = {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster",
                   "metadata": {"name": "restarted"}, "spec": {"brokers": 1}}
        assert control_plane.request("POST", f"{TS}/namespaces/{namespace}/tinystreamclusters", cluster)[0] == 201
        sts = f"/apis/apps/v1/namespaces/{namespace}/statefulsets/restarted-broker"
        # 25 s: a bound for a loaded 2-core machine, not a benchmark (about 1 s unloaded; 53 s before the fix).
        wait_until(lambda: proc.poll() is None and control_plane.request("GET", sts)[0] == 200, timeout=25,
                   interval=0.3, what=lambda: f"the StatefulSet:\n{log.read_text()[-3000:]}")


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
        def config_map() -> dict | None:  # the Secret comes first in the pass; the ConfigMap may follow it
            code, body = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/sealed-config")
            return body if code == 200 else None
        config = wait_until(config_map, timeout=60, what="the broker ConfigMap")
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
