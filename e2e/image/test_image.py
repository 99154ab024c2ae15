"""The TinyStream image, built and run in a real container engine (podman as root, else Docker).

Skips (with the reason) where no engine answers: `tools/install-docker.sh`
installs and starts Docker where the machine allows. Where Docker Hub is out
of reach the Dockerfile's base is made locally by tools/build-base-image.sh
(Debian bookworm by debootstrap); set TINYSTREAM_BASE_IMAGE to choose one.

Checked: the image runs as uid 10001 and serves both entry points; a plain
`docker run` is a working standalone broker (kcat and kafka-python round
trips through a published port); and a broker run exactly as the operator's
StatefulSet runs it (its args, the ConfigMap it renders mounted read-only, a
read-only root filesystem, no capabilities, a data volume owned by the
image's user) registers with a controller, turns ready on /readyz and serves.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_build import ROOT, Cli, ensure_image

from tinystream.testing import waiting
from tinystream.testing.peers.ports import free_port

TAG = "localhost/tinystream:e2e-image"  # localhost/: the same name in podman and Docker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def image(engine: str) -> str:
    print(f"image {TAG} ({engine}): {ensure_image(TAG, engine=engine)}")
    return TAG


def http_status(url: str, context: ssl.SSLContext | None = None, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=3, context=context) as r:  # noqa: S310 - loopback
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
    except OSError:
        return 0, {}


# A container starts in seconds to a minute: its HTTP endpoints are polled every 0.3 s for up to 60 s.
wait_until = functools.partial(waiting.wait_until, timeout=60.0, interval=0.3)


def round_trip(bootstrap: str, topic: str, n: int = 100) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(n):
        producer.send(topic, value=f"m-{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    values = [r.value for r in consumer]
    consumer.close()
    return values


@pytest.fixture
def container(image: str, cli: Cli) -> Iterator[list[str]]:
    """Container ids started by a test, removed after it (their logs printed on failure)."""
    started: list[str] = []
    yield started
    for cid in started:
        logs = cli("logs", "--tail", "30", cid, check=False)
        print(f"--- container {cid[:12]}:\n{logs.stdout}{logs.stderr}")
        cli("rm", "-f", cid, check=False)


def test_runs_as_the_non_root_user_with_both_entry_points(image: str, cli: Cli) -> None:
    assert cli("run", "--rm", "--entrypoint", "id", image, "-u").stdout.strip() == "10001"
    commands = cli("run", "--rm", image, "--help").stdout
    assert "broker" in commands and "operator" in commands
    assert "--peering" in cli("run", "--rm", image, "operator", "--help").stdout  # kopf is in the image
    crds = cli("run", "--rm", "--entrypoint", "ls", image, "/opt/tinystream/crds").stdout.split()
    assert sorted(crds) == sorted(p.name for p in (ROOT / "crds").iterdir() if p.suffix == ".yaml")


def test_plain_docker_run_is_a_standalone_broker(image: str, container: list[str], cli: Cli) -> None:
    port, admin = free_port(), free_port()
    container.append(cli("run", "-d", "-p", f"127.0.0.1:{port}:9092", "-p", f"127.0.0.1:{admin}:8080",
                            "-e", "TINYSTREAM_ADVERTISED_HOST=127.0.0.1", "-e", f"TINYSTREAM_ADVERTISED_PORT={port}",
                            image).stdout.strip())
    wait_until(lambda: http_status(f"http://127.0.0.1:{admin}/readyz")[0] == 200, what="the broker to be ready")
    values = round_trip(f"127.0.0.1:{port}", "plain")
    assert values == [f"m-{i}".encode() for i in range(100)]
    kcat = shutil.which("kcat")
    if kcat:  # librdkafka too, through the same published port
        subprocess.run([kcat, "-P", "-b", f"127.0.0.1:{port}", "-t", "plain"], input=b"from-kcat\n", check=True,
                       timeout=30)
        out = subprocess.run([kcat, "-C", "-b", f"127.0.0.1:{port}", "-t", "plain", "-e", "-q", "-o", "-1"],
                             capture_output=True, check=True, timeout=30).stdout
        assert out.strip() == b"from-kcat"


def test_broker_runs_as_the_statefulset_runs_it(image: str, container: list[str], tmp_path: Path, cli: Cli) -> None:
    pytest.importorskip("kopf", reason="the operator extra renders the pod spec")
    if os.geteuid() != 0:
        pytest.skip("giving the data volume to the image's user (uid 10001) needs root")
    pytest.importorskip("trustme", reason="a throwaway CA for the controller's certificate")
    from tinystream.controller_auth import broker_principal, read_secret, token_for, write_token_file
    from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
    from tinystream.operator.k8s.resources import (
        ADMIN_TOKEN_FILE,
        CONFIG_DIR,
        CONFIG_FILE,
        CONTROLLER_CA_FILE,
        DATA_DIR,
        IDENTITY_FILE,
        IDENTITY_MOUNT,
        RUN_AS,
        TOKENS_MOUNT,
        USERS_MOUNT,
        broker_user,
        config_map,
        statefulset,
    )
    from tinystream.scram_users import UserStore
    from tinystream.testing.broker import ThrowawayPki

    # Plaintext clients (the TLS listener is the kind suite's); brokers still replicate as the SCRAM user.
    cluster = ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "streaming", "uid": "u"},
                                         "spec": {"brokers": 1, "config": {"log.retention.ms": 3_600_000},
                                                  "listeners": {"tls": False, "authentication": {"type": "none"}},
                                                  "authorization": {"type": "none"}}})
    ctx = OperatorContext(broker_image=image)
    etc, data = tmp_path / "etc", tmp_path / "data"
    etc.mkdir()
    data.mkdir()
    os.chown(data, RUN_AS, RUN_AS)  # the pod's fsGroup makes the PVC the user's
    (etc / CONFIG_FILE).write_text(config_map(cluster, ctx)["data"][CONFIG_FILE])
    pod = statefulset(cluster, ctx, replicas=1, cfg_hash="x")["spec"]["template"]["spec"]
    broker = pod["containers"][0]

    controller_port, port, admin = free_port(), free_port(), free_port()
    state = tmp_path / "controller.json"
    # The controller API over TLS, as the operator serves it: the broker trusts controller-ca.crt from its tokens.
    pki = ThrowawayPki(tmp_path / "pki")
    keystore = pki.issue("controller", "127.0.0.1")
    controller = subprocess.Popen([sys.executable, "-m", "tinystream", "controller", "--port", str(controller_port),
                                   "--state-file", str(state), "--dashboard-port", "0"],
                                  env={**os.environ, "TINYSTREAM_CONTROLLER_SSL_KEYSTORE_LOCATION": str(keystore)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        trusted = ssl.create_default_context(cafile=str(pki.ca_pem))
        wait_until(lambda: http_status(f"https://127.0.0.1:{controller_port}/healthz", trusted)[0] == 200,
                   what="the controller")
        # What the pod mounts, readable by the image's user: the controller's CA (the Secret the operator
        # makes), the pod's own controller token (projected by the kubelet; the local controller here takes
        # a token its secret made) and the inter-broker SCRAM user (the broker-users Secret).
        tokens, identity, users = tmp_path / "tokens", tmp_path / "identity", tmp_path / "users"
        secret = read_secret(tmp_path / "controller.secret")  # made by the controller beside its state
        write_token_file(identity / IDENTITY_FILE, token_for(secret, broker_principal(0)))
        tokens.mkdir()
        shutil.copy(pki.ca_pem, tokens / CONTROLLER_CA_FILE)
        (tokens / ADMIN_TOKEN_FILE).write_text("cluster-admin-token")  # what the brokers' admin HTTP asks for
        store = UserStore()
        store.set_password(broker_user(cluster), "replication-password")
        store.save(users / "users.json")
        (users / "broker-password").write_text("replication-password")
        for path in (identity / IDENTITY_FILE, tokens / CONTROLLER_CA_FILE, tokens / ADMIN_TOKEN_FILE,
                     users / "users.json", users / "broker-password"):
            os.chown(path, RUN_AS, RUN_AS)
        # Host networking stands in for the pod network: the ports are this test's, the rest is the pod's.
        replication = free_port()
        container.append(cli(
            "run", "-d", "--network", "host", "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--user", f"{RUN_AS}:{RUN_AS}",
            "-v", f"{etc}:{CONFIG_DIR}:ro", "-v", f"{data}:{DATA_DIR}", "-v", f"{tokens}:{TOKENS_MOUNT}:ro",
            "-v", f"{identity}:{IDENTITY_MOUNT}:ro", "-v", f"{users}:{USERS_MOUNT}:ro",
            "-e", "TINYSTREAM_BROKER_ID=0", "-e", "TINYSTREAM_ADVERTISED_HOST=127.0.0.1",
            "-e", f"TINYSTREAM_LISTENERS=CLIENT://0.0.0.0:{port},REPLICATION://0.0.0.0:{replication}",
            "-e", f"TINYSTREAM_ADMIN_PORT={admin}",
            "-e", f"TINYSTREAM_CONTROLLER_URL=https://127.0.0.1:{controller_port}",
            image, *broker["args"]).stdout.strip())
        probe = broker["readinessProbe"]["httpGet"]["path"]
        wait_until(lambda: http_status(f"http://127.0.0.1:{admin}{broker['livenessProbe']['httpGet']['path']}")[0]
                   == 200, what="liveness")
        status, body = wait_until(lambda: (r := http_status(f"http://127.0.0.1:{admin}{probe}"))[0] == 200 and r,
                                  what="readiness: registered with the controller")
        assert body["ready"] is True and "registered" in body["reason"]
        # The admin HTTP's data wants the cluster's admin token (probes above needed none).
        assert http_status(f"http://127.0.0.1:{admin}/api/broker")[0] == 401
        assert http_status(f"http://127.0.0.1:{admin}/api/broker", token="cluster-admin-token")[0] == 200
        assert round_trip(f"127.0.0.1:{port}", "pod-shaped", 50) == [f"m-{i}".encode() for i in range(50)]
        # The data went to the volume (the PVC), written by the image's user.
        logs = [p for p in data.rglob("*.log") if "pod-shaped" in str(p)]
        assert logs and all(p.stat().st_uid == RUN_AS for p in logs)
    finally:
        controller.terminate()
        controller.wait(10)
