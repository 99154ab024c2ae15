"""TinyStream on a real Kubernetes: install, produce/consume, failover, roll, scale, delete.

Tests run in file order and build on each other (one kind cluster per
session). Clients run inside the cluster (`kubectl exec` into a broker pod,
bootstrap through the client Service): a Kafka client follows the brokers'
advertised addresses (pod DNS names), which a port-forward from the host
cannot reach. The port-forward test reaches a broker's admin HTTP and the
bootstrap Service's metadata instead.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from image_build import ROOT, build_image
from kind_helpers import IMAGE_REPO, IMAGE_TAGS, KIND_CLUSTER, Kube, go_bin, run
from manifests import CLUSTER, NAMESPACE, TOPIC, cluster, topic

BOOTSTRAP = f"{CLUSTER}-kafka:9092"
MESSAGES = [f"m{i}" for i in range(200)]


def tsc(kube: Kube) -> dict:
    return json.loads(kube.kubectl("get", "tsc", CLUSTER, "-o", "json").stdout)


def wait_until(predicate, *, timeout: float, what: str, interval: float = 3.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except AssertionError as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last: {last}")


def ready_brokers(kube: Kube, n: int) -> bool:
    status = tsc(kube).get("status", {})
    cond = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
    return status.get("readyBrokers") == n and status.get("replicas") == n and cond.get("status") == "True"


def exec_cli(kube: Kube, *args: str, input: str | None = None, pod: str = f"{CLUSTER}-broker-0") -> str:
    return kube.kubectl("exec", "-i", pod, "-c", "broker", "--", "tinystream", *args,
                        "--bootstrap", BOOTSTRAP, input=input, timeout=180).stdout


def consume_all(kube: Kube, pod: str = f"{CLUSTER}-broker-0") -> list[str]:
    out = exec_cli(kube, "consume", TOPIC, "--from-beginning", "--max-records", str(len(MESSAGES)),
                   "--timeout-ms", "30000", pod=pod)
    return [line for line in out.splitlines() if line]


@pytest.fixture(scope="module")
def kube(installed: Kube) -> Kube:
    return installed


def test_operator_is_running(kube):
    kube.kubectl("rollout", "status", "deploy/ts-tinystream", "--timeout=180s")


def test_cluster_becomes_ready(kube):
    kube.apply(cluster(brokers=3, image=f"{IMAGE_REPO}:{IMAGE_TAGS[0]}"))
    kube.kubectl("wait", f"tsc/{CLUSTER}", "--for=condition=Ready", "--timeout=600s", timeout=700)
    status = tsc(kube)["status"]
    assert status["readyBrokers"] == 3
    assert {b["rack"] for b in status["brokers"]} == {"zone-a", "zone-b", "zone-c"}


def test_topic_gets_placement(kube):
    kube.apply(topic(partitions=6))
    kube.kubectl("wait", f"tst/{TOPIC}", "--for=condition=Ready", "--timeout=300s", timeout=400)
    obj = json.loads(kube.kubectl("get", "tst", TOPIC, "-o", "json").stdout)
    parts = obj["status"]["partitions"]
    assert len(parts) == 6 and all(len(p["isr"]) == 3 for p in parts)


def test_produce_and_consume_through_the_client_service(kube):
    exec_cli(kube, "produce", TOPIC, "--acks", "all", input="\n".join(MESSAGES) + "\n")
    assert sorted(consume_all(kube)) == sorted(MESSAGES)


def test_port_forward_reaches_bootstrap_and_admin(kube):
    proc = subprocess.Popen(["kubectl", "--kubeconfig", kube.env_kubeconfig, "-n", NAMESPACE, "port-forward",
                             f"svc/{CLUSTER}-kafka", "19092:9092"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def connected():
            with socket.create_connection(("127.0.0.1", 19092), timeout=2):
                return True
        wait_until(connected, timeout=30, what="port-forward", interval=1)
        from kafka import KafkaAdminClient  # bootstrap metadata over the forwarded port
        admin = KafkaAdminClient(bootstrap_servers="127.0.0.1:19092", request_timeout_ms=10000)
        try:
            assert TOPIC in admin.list_topics()
        finally:
            admin.close()
    finally:
        proc.terminate()
        proc.wait(10)


def test_leader_failover_loses_no_acknowledged_record(kube):
    obj = json.loads(kube.kubectl("get", "tst", TOPIC, "-o", "json").stdout)
    leader = obj["status"]["partitions"][0]["leader"]
    kube.kubectl("delete", "pod", f"{CLUSTER}-broker-{leader}", "--wait=false")
    survivor = f"{CLUSTER}-broker-{(leader + 1) % 3}"

    def new_leader():
        parts = json.loads(kube.kubectl("get", "tst", TOPIC, "-o", "json").stdout)["status"]["partitions"]
        return parts[0]["leader"] not in (-1, leader)
    wait_until(new_leader, timeout=120, what="a new leader for partition 0")
    assert sorted(consume_all(kube, pod=survivor)) == sorted(MESSAGES)
    wait_until(lambda: ready_brokers(kube, 3), timeout=600, what="the deleted broker back")


def test_image_change_rolls_one_broker_at_a_time(kube):
    kube.kubectl("patch", "tsc", CLUSTER, "--type=merge", "-p",
                 json.dumps({"spec": {"image": f"{IMAGE_REPO}:{IMAGE_TAGS[1]}"}}))
    max_down = 0

    def rolled():
        nonlocal max_down
        pods = json.loads(kube.kubectl("get", "pods", "-l", f"tinystream.io/cluster={CLUSTER}",
                                       "-o", "json").stdout)["items"]
        ready = [p for p in pods if any(c["type"] == "Ready" and c["status"] == "True"
                                        for c in p["status"].get("conditions", []))]
        max_down = max(max_down, 3 - len(ready))
        images = {p["spec"]["containers"][0]["image"] for p in pods}
        return images == {f"{IMAGE_REPO}:{IMAGE_TAGS[1]}"} and ready_brokers(kube, 3)
    wait_until(rolled, timeout=900, what="the rolling update", interval=2)
    assert max_down <= 1  # never two brokers down at once
    assert sorted(consume_all(kube)) == sorted(MESSAGES)


def test_scale_up_then_down(kube):
    kube.kubectl("scale", f"tsc/{CLUSTER}", "--replicas=4")
    wait_until(lambda: ready_brokers(kube, 4), timeout=600, what="4 ready brokers")

    def new_broker_holds_replicas():  # the rebalance gave broker 3 a share
        parts = json.loads(kube.kubectl("get", "tst", TOPIC, "-o", "json").stdout)["status"]["partitions"]
        return any(3 in p["replicas"] for p in parts)
    wait_until(new_broker_holds_replicas, timeout=600, what="replicas on broker 3")
    kube.kubectl("scale", f"tsc/{CLUSTER}", "--replicas=3")
    wait_until(lambda: ready_brokers(kube, 3), timeout=900, what="back to 3 brokers")
    assert sorted(consume_all(kube)) == sorted(MESSAGES)


def test_spark_pipeline_in_cluster_mode(kube):
    """spark-on-k8s/k8s/submit.sh runs the tumbling-window pipeline as driver and executor pods."""
    image = "tinystream-spark:e2e"
    build_image(image, "spark-on-k8s/k8s/Dockerfile")
    run(go_bin("kind"), "load", "docker-image", image, "--name", KIND_CLUSTER, timeout=1200)
    spark_submit = Path(sys.executable).with_name("spark-submit")
    result = subprocess.run(
        ["bash", str(ROOT / "spark-on-k8s" / "k8s" / "submit.sh"), "--cluster", CLUSTER, "--namespace", NAMESPACE,
         "--pipeline", "tumbling", "--image", image, "--generate", "300", "--wait"],
        capture_output=True, text=True, timeout=1200,
        env={**os.environ, "KUBECONFIG": kube.env_kubeconfig, "SPARK_SUBMIT": str(spark_submit)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "rows in page-views-10s" in result.stdout


def test_scale_below_replication_factor_is_refused(kube):
    kube.kubectl("scale", f"tsc/{CLUSTER}", "--replicas=2")

    def blocked():
        cond = next(c for c in tsc(kube)["status"]["conditions"] if c["type"] == "Ready")
        return cond["reason"] == "ScaleDownBlocked"
    wait_until(blocked, timeout=120, what="ScaleDownBlocked")
    assert tsc(kube)["status"]["replicas"] == 3
    kube.kubectl("scale", f"tsc/{CLUSTER}", "--replicas=3")


def test_delete_everything(kube):
    kube.kubectl("delete", "tst", TOPIC, "--timeout=120s", timeout=180)
    kube.kubectl("delete", "tsc", CLUSTER, "--timeout=300s", timeout=360)
    wait_until(lambda: not json.loads(kube.kubectl("get", "pods,pvc,sts,svc", "-l",
                                                   f"tinystream.io/cluster={CLUSTER}", "-o", "json"
                                                   ).stdout)["items"], timeout=300, what="owned objects gone")
    kube.helm("uninstall", "ts", "--wait", "--timeout", "3m")
    # CRDs stay (Helm never deletes crds/): custom resources of other releases survive an uninstall.
    assert "topics.tinystream.io" in kube.kubectl("get", "crd", "-o", "name").stdout
