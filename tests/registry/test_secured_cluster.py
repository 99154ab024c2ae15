"""A registry on a SASL/SCRAM cluster: it logs in as its own user, and its callers log in with the same users file."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastavro")

from tinystream.registry.app import RegistryOptions
from tinystream.testing.broker import BrokerThread, sasl_plaintext_settings
from tinystream.testing.registry import RegistryThread

USERS = {"schema-registry": "registry-secret", "app": "app-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    folder = tmp_path_factory.mktemp("registry-sasl")
    with BrokerThread(sasl_plaintext_settings(folder, users=USERS)) as running:
        yield running, folder / "users.json"


def _sasl(password: str) -> tuple[tuple[str, str], ...]:
    return (("security_protocol", "SASL_PLAINTEXT"), ("sasl_mechanism", "SCRAM-SHA-512"),
            ("sasl_plain_username", "schema-registry"), ("sasl_plain_password", password))


def test_registry_logs_in_to_the_cluster_and_asks_its_callers_to_log_in(secured):
    broker, users = secured
    options = RegistryOptions(bootstrap=broker.bootstrap, port=0, topic="_schemas_sasl", users_file=users,
                              client_options=_sasl("registry-secret"))
    with RegistryThread(options) as registry:
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
        client = SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "app:app-secret"})
        assert client.register_schema("s", Schema('"string"', "AVRO")) == 1
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{registry.url}/subjects", timeout=10)
        assert caught.value.code == 401


def test_a_registry_with_a_wrong_cluster_password_does_not_start(secured):
    broker, users = secured
    options = RegistryOptions(bootstrap=broker.bootstrap, port=0, topic="_schemas_sasl_bad", users_file=users,
                              client_options=_sasl("wrong"))
    with pytest.raises(Exception):  # noqa: B017 - aiokafka's login failure; the point is it does not serve
        RegistryThread(options).start(timeout=30)


def test_the_command_line_takes_sasl_flags_and_a_password_file(secured, tmp_path):
    broker, users = secured
    password = tmp_path / "password"
    password.write_text("registry-secret\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", broker.bootstrap, "--port", "0",
         "--topic", "_schemas_sasl_cli", "--users-file", str(users), "--security-protocol", "SASL_PLAINTEXT",
         "--sasl-username", "schema-registry", "--sasl-password-file", str(password)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("schema-registry=http://"), line
        url = line.split("=", 1)[1]
        request = urllib.request.Request(f"{url}/subjects/cli/versions", method="POST",
                                         data=json.dumps({"schema": '"int"'}).encode(),
                                         headers={"Authorization": "Basic " + base64.b64encode(b"app:app-secret").decode()})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read()) == {"id": 1}
    finally:
        process.terminate()
        process.wait(30)
