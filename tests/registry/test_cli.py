"""`tinystream schema-registry` as a process: it prints its URL, serves, and refuses to bind wide open."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

pytest.importorskip("fastavro")


def test_the_command_serves_and_prints_its_url(broker, tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", broker.bootstrap, "--port", "0",
         "--topic", "_schemas_cli"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("schema-registry=http://127.0.0.1:"), (line, process.stderr.read() if process.poll() else "")
        url = line.split("=", 1)[1]
        request = urllib.request.Request(f"{url}/subjects/cli/versions", method="POST",
                                         data=json.dumps({"schema": '"string"'}).encode())
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read()) == {"id": 1}
    finally:
        process.terminate()
        process.wait(30)


def test_binding_beyond_loopback_needs_a_users_file():
    result = subprocess.run([sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", "127.0.0.1:1",
                             "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--users-file" in result.stderr


@pytest.mark.parametrize(("rules", "with_users", "says"), [
    ({"rules": []}, False, "--users-file"),
    ({"rules": [{"principal": "alice", "subject": "s", "operations": ["READ"]}]}, True, "rule 0"),
    ("not json", True, "rules.json"),
])
def test_a_rules_file_needs_users_and_must_parse(tmp_path, rules, with_users, says):
    (tmp_path / "rules.json").write_text(rules if isinstance(rules, str) else json.dumps(rules))
    (tmp_path / "users.json").write_text('{"users": {}}')
    args = ["--rules-file", str(tmp_path / "rules.json")] + (["--users-file", str(tmp_path / "users.json")] if with_users else [])
    result = subprocess.run([sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", "127.0.0.1:1", *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and says in result.stderr, result.stderr


def test_the_command_serves_https_with_a_certificate(broker, tmp_path):
    """--tls-certfile/--tls-keyfile (on Kubernetes: a certificate from the cluster CA): HTTPS a client verifies;
    plain HTTP on the same port gets no schema."""
    import ssl

    import trustme

    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "chain.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    process = subprocess.Popen(
        [sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", broker.bootstrap, "--port", "0",
         "--topic", "_schemas_https", "--tls-certfile", str(tmp_path / "chain.pem"),
         "--tls-keyfile", str(tmp_path / "chain.pem")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("schema-registry=https://127.0.0.1:"), (line, process.stderr.read() if process.poll() else "")
        url = line.split("=", 1)[1]
        trusted = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        with urllib.request.urlopen(f"{url}/schemas/types", timeout=30, context=trusted) as response:
            assert json.loads(response.read()) == ["AVRO", "JSON", "PROTOBUF"]
        with pytest.raises(OSError):  # a client that does not trust the CA is refused the handshake
            urllib.request.urlopen(f"{url}/schemas/types", timeout=30, context=ssl.create_default_context())
    finally:
        process.terminate()
        process.wait(30)


def test_a_tls_certificate_needs_its_key(tmp_path):
    (tmp_path / "c.pem").write_text("x")
    result = subprocess.run([sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", "127.0.0.1:1",
                             "--tls-certfile", str(tmp_path / "c.pem")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--tls-keyfile" in result.stderr


def _registry_process(broker, *args: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", broker.bootstrap, "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline().strip()
    assert line.startswith("schema-registry=http://"), (line, process.stderr.read() if process.poll() else "")
    return process, line.split("=", 1)[1]


def test_two_processes_in_a_group_survive_the_leader_being_killed(broker):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    from tinystream.testing.waiting import wait_until

    def avro(name: str) -> Schema:
        return Schema(json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]}), "AVRO")

    group = ["--topic", "_schemas_cli_group", "--group-id", "cli-group", "--session-timeout-ms", "6000"]
    first, first_url = _registry_process(broker, *group)
    second = None
    try:
        assert SchemaRegistryClient({"url": first_url}).register_schema("a", avro("A")) == 1  # alone: it leads
        second, second_url = _registry_process(broker, *group)
        follower = SchemaRegistryClient({"url": second_url})
        assert follower.register_schema("b", avro("B")) == 2  # forwarded to the first, the leader (sticky)
        first.kill()  # no LeaveGroup: the broker drops it after the session timeout
        first.wait(30)
        got = wait_until(lambda: follower.register_schema("c", avro("C")), timeout=60, retry_on=(SchemaRegistryError,),
                         what="the second instance to take over")
        assert got == 3 and follower.register_schema("d", avro("D")) == 4  # ids go on, none used again
        assert json.loads(follower.get_schema(1).schema_str) == json.loads(avro("A").schema_str)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(30)


@pytest.mark.parametrize(("args", "says"), [
    (["--group-id", "g", "--host", "0.0.0.0", "--users-file", "USERS"], "--advertised-url"),
    (["--advertised-url", "not a url"], "--advertised-url"),
    (["--forward-cafile", "USERS"], "--group-id"),
])
def test_instance_options_are_checked(tmp_path, args, says):
    (tmp_path / "users.json").write_text('{"users": {}}')
    args = [str(tmp_path / "users.json") if a == "USERS" else a for a in args]
    result = subprocess.run([sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", "127.0.0.1:1", *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and says in result.stderr, result.stderr
