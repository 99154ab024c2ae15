"""Several instances over HTTPS, as on Kubernetes: two `tinystream schema-registry` processes serve certificates
from one throwaway CA and name each other by the advertised URL; a follower forwards a write to the leader over
HTTPS trusting that CA (--forward-cafile), and the write lands once. A follower that does not trust it refuses
the write with 50003 rather than sending the caller's credentials to a server it cannot verify."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from tinystream.operator.k8s.certificates import derived_ca, issue  # noqa: E402
from tinystream.scram_users import UserStore  # noqa: E402
from tinystream.testing.consumers import read_partition  # noqa: E402
from tinystream.testing.kube_control_plane import free_port  # noqa: E402

NOW = datetime.datetime.now(datetime.UTC)
TOPIC = "_schemas_https_group"
LOGIN = "app:app-secret"


def _avro(name: str) -> Schema:
    return Schema(json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]}), "AVRO")


@pytest.fixture
def pki(tmp_path) -> Path:
    """The registry certificate (for localhost, as the operator's names the pods), its CA, a users file."""
    ca = derived_ca(b"registry-https", "demo", "ns", created=NOW, days=30)
    cert = issue(ca, "demo-schema-registry", frozenset({"localhost"}), now=NOW, days=30)
    files = {"registry.crt": cert.cert_pem, "registry.key": cert.key_pem, "ca.crt": ca.cert_pem}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    store = UserStore()
    store.set_password("app", "app-secret")
    store.save(tmp_path / "users.json")
    return tmp_path


def _start(broker, pki: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"https://localhost:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", broker.bootstrap, "--port", str(port),
         "--topic", TOPIC, "--users-file", str(pki / "users.json"), "--failed-login-delay", "0",
         "--tls-certfile", str(pki / "registry.crt"), "--tls-keyfile", str(pki / "registry.key"),
         "--group-id", "https-group", "--session-timeout-ms", "6000", "--advertised-url", url, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline().strip()
    assert line.startswith("schema-registry=https://"), (line, process.stderr.read() if process.poll() else "")
    return process, url


def _client(url: str, pki: Path) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url, "ssl.ca.location": str(pki / "ca.crt"), "basic.auth.user.info": LOGIN,
                                 "max.retries": 0})


def test_a_write_through_a_follower_reaches_the_leader_over_https_once(broker, pki):
    processes: list[subprocess.Popen] = []
    try:
        leader, leader_url = _start(broker, pki, "--forward-cafile", str(pki / "ca.crt"))
        processes.append(leader)
        assert _client(leader_url, pki).register_schema("first", _avro("First")) == 1  # alone: it leads
        follower, follower_url = _start(broker, pki, "--forward-cafile", str(pki / "ca.crt"))
        processes.append(follower)
        through = _client(follower_url, pki)
        assert through.register_schema("second", _avro("Second")) == 2  # forwarded over HTTPS
        assert through.get_versions("second") == [1]  # read-your-writes on the follower
        assert through.register_schema("second", _avro("Second")) == 2  # the same again: no new version

        # One without the CA bundle verifies the leader with the system's CAs, which refuse it: 50003, no write.
        untrusting, untrusting_url = _start(broker, pki)
        processes.append(untrusting)
        with pytest.raises(SchemaRegistryError) as refused:
            _client(untrusting_url, pki).register_schema("third", _avro("Third"))
        assert (refused.value.http_status_code, refused.value.error_code) == (500, 50003)
        assert leader_url in str(refused.value) and "certificate" in str(refused.value).lower()

        assert _client(leader_url, pki).register_schema("last", _avro("Last")) == 3
        values = [json.loads(v) for v in read_partition(broker.bootstrap, TOPIC, 3) if v]
        assert [v["subject"] for v in values] == ["first", "second", "last"]  # each write once, "third" never
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
