"""mTLS on the registry's HTTPS listener: real TLS, certificates as the operator issues them (CN=<user>, from
a clients CA), confluent-kafka's SchemaRegistryClient with ssl.certificate.location, rules per principal."""

from __future__ import annotations

import datetime
import json
import os
import ssl
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastavro")

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from tinystream.operator.k8s.certificates import derived_ca, issue  # noqa: E402
from tinystream.registry.auth import CertificateAuth  # noqa: E402
from tinystream.registry.authz import Operation, RulesFile, allowed  # noqa: E402
from tinystream.scram_users import UserStore  # noqa: E402
from tinystream.tls_principal import PrincipalMapper  # noqa: E402

NOW = datetime.datetime.now(datetime.UTC)
RECORD = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
RULES = {"rules": [
    {"principal": "User:CN=alice", "subject": "orders-value", "operations": ["WRITE"]},
    {"principal": "User:writer", "subject": "orders-", "pattern": "PREFIXED", "operations": ["WRITE"]},
]}


def _ca(title: str):
    return derived_ca(title.encode(), "demo", "ns", created=NOW, days=30, title=title)


@pytest.fixture
def pki(tmp_path):
    """Files: the server's chain, the clients CA bundle, client certificates of alice and bob (clients CA)
    and mallory (CN=alice too, but from another CA)."""
    cluster_ca, clients_ca, other_ca = _ca("cluster CA"), _ca("clients CA"), _ca("other CA")
    server = issue(cluster_ca, "demo-schema-registry", frozenset({"localhost"}), now=NOW, days=30,
                   ip_addresses=frozenset({"127.0.0.1"}))
    files = {"server.crt": server.cert_pem, "server.key": server.key_pem, "cluster-ca.crt": cluster_ca.cert_pem,
             "clients-ca.crt": clients_ca.cert_pem}
    for name, user, ca in (("alice", "alice", clients_ca), ("bob", "bob", clients_ca), ("mallory", "alice", other_ca)):
        cert = issue(ca, user, frozenset(), now=NOW, days=30)
        files[f"{name}.crt"], files[f"{name}.key"] = cert.cert_pem, cert.key_pem
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    store = UserStore()
    store.set_password("writer", "w-secret")
    store.save(tmp_path / "users.json")
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    return tmp_path


@pytest.fixture
def registry(pki, start_registry):
    return start_registry(users_file=pki / "users.json", rules_file=pki / "rules.json",
                          tls_certfile=pki / "server.crt", tls_keyfile=pki / "server.key",
                          tls_client_cafile=pki / "clients-ca.crt")


def _client(registry, pki, who: str | None = None, **extra) -> SchemaRegistryClient:
    conf = {"url": registry.url, "ssl.ca.location": str(pki / "cluster-ca.crt"), **extra}
    if who is not None:
        conf.update({"ssl.certificate.location": str(pki / f"{who}.crt"), "ssl.key.location": str(pki / f"{who}.key")})
    return SchemaRegistryClient(conf)


def test_a_client_certificate_logs_in_as_the_broker_names_it(registry, pki):
    assert registry.url.startswith("https://")
    alice = _client(registry, pki, "alice")
    schema_id = alice.register_schema("orders-value", Schema(RECORD, "AVRO"))
    assert alice.get_latest_version("orders-value").schema_id == schema_id
    with pytest.raises(SchemaRegistryError) as refused:  # User:CN=alice may write orders-value only
        alice.register_schema("payments-value", Schema(RECORD, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    assert "CN=alice" in refused.value.error_message


def test_a_certificate_without_a_rule_gets_403(registry, pki):
    with pytest.raises(SchemaRegistryError) as refused:
        _client(registry, pki, "bob").register_schema("orders-value", Schema(RECORD, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    assert "User 'CN=bob'" in refused.value.error_message
    assert _client(registry, pki, "bob").get_subjects() == []


def test_no_certificate_and_no_password_gets_401(registry, pki):
    context = ssl.create_default_context(cafile=str(pki / "cluster-ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{registry.url}/subjects", context=context, timeout=30)
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"].startswith("Basic ")


def test_a_certificate_of_another_ca_is_refused_in_the_handshake(registry, pki):
    context = ssl.create_default_context(cafile=str(pki / "cluster-ca.crt"))
    context.load_cert_chain(pki / "mallory.crt", pki / "mallory.key")
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)) as refused:
        urllib.request.urlopen(f"{registry.url}/subjects", context=context, timeout=30).read()
    assert not isinstance(refused.value, urllib.error.HTTPError)  # no answer at all, not even a 401


def test_basic_logins_keep_working_and_a_wrong_password_is_not_rescued_by_a_certificate(registry, pki):
    writer = _client(registry, pki, **{"basic.auth.user.info": "writer:w-secret"})
    assert writer.register_schema("orders-key", Schema('"string"', "AVRO")) >= 1
    with pytest.raises(SchemaRegistryError) as refused:  # Basic, when sent, decides
        _client(registry, pki, "alice", **{"basic.auth.user.info": "writer:wrong"}).get_subjects()
    assert refused.value.http_status_code == 401


def test_the_mapping_rules_name_the_user(pki):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    der = x509.load_pem_x509_certificate((pki / "alice.crt").read_bytes()).public_bytes(Encoding.DER)
    assert CertificateAuth(PrincipalMapper.parse("DEFAULT")).check(der) == "CN=alice"
    assert CertificateAuth(PrincipalMapper.parse("RULE:^CN=(.*?)$/$1/U")).check(der) == "ALICE"
    assert CertificateAuth(PrincipalMapper.parse("RULE:^CN=x$/x/")).check(der) is None  # no rule: no login
    assert CertificateAuth(PrincipalMapper.parse("DEFAULT")).check(None) is None


def test_a_swapped_kubernetes_mount_is_read_again(tmp_path):
    """The kubelet's way (AtomicWriter): rules.json -> ..data/rules.json, ..data -> a timestamped folder."""
    def publish(folder: str, principal: str) -> None:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "rules.json").write_text(json.dumps(
            {"rules": [{"principal": principal, "subject": "s", "operations": ["READ"]}]}))
        os.utime(tmp_path / folder / "rules.json", ns=(1, 1))  # the same mtime both times: the swap must tell
        (tmp_path / "..data_tmp").symlink_to(folder)
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")

    publish("..2026_01", "User:CN=a")
    (tmp_path / "rules.json").symlink_to("..data/rules.json")
    rules = RulesFile(tmp_path / "rules.json")
    assert allowed(rules.rules(), "User:CN=a", Operation.READ, "s")
    publish("..2026_02", "User:CN=b")
    assert allowed(rules.rules(), "User:CN=b", Operation.READ, "s")
    assert not allowed(rules.rules(), "User:CN=a", Operation.READ, "s")


async def test_a_follower_refuses_to_forward_a_certificate_login_and_names_the_leader():
    """The follower holds no credential of a certificate caller: 50003 naming the leader, not a 401 there."""
    from aiohttp.test_utils import make_mocked_request

    from tinystream.registry.errors import ErrorCode, RegistryError
    from tinystream.registry.forward import Forwarder

    class Follower:
        own_url = "https://a:8081"

        async def writer(self, wait_s: float) -> str | None:
            return "https://b:8081"

    async def never_here():
        raise AssertionError("a follower does not serve a write")

    forwarder = Forwarder(Follower(), applied=lambda: 0, wait_applied=lambda offset: never_here())
    request = make_mocked_request("POST", "/subjects/orders-value/versions")
    with pytest.raises(RegistryError) as refused:
        await forwarder.route(request, "/subjects/{subject}/versions", never_here, by_certificate=True)
    assert refused.value.code is ErrorCode.FORWARDING_FAILED and "https://b:8081" in str(refused.value)
