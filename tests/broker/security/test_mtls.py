"""mTLS on an SSL listener with ssl.client.auth=required, against real clients (issue 12).

One broker on `listeners=SSL://127.0.0.1:0`, a throwaway CA (trustme) for the broker and the clients,
and `ssl.principal.mapping.rules=RULE:^CN=(.*?),.*$/$1/L,DEFAULT`. confluent-kafka, kafka-python and Kafka's
Java tools present client certificates and round-trip records; the broker names each connection
`User:<mapped CN>`. A client without a certificate, or with one from another CA, is refused at the handshake.
"""

from __future__ import annotations

import ssl
import time
import uuid

import pytest

from tinystream.broker.protocol.client import KafkaClient
from tinystream.testing.broker import BrokerThread, ThrowawayPki, create_topics_request, test_settings
from tinystream.testing.waiting import wait_until


@pytest.fixture(scope="module")
def mtls(tmp_path_factory):
    pytest.importorskip("trustme")
    folder = tmp_path_factory.mktemp("mtls")
    pki = ThrowawayPki(folder / "pki")
    settings = test_settings(folder / "data", **{
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.issue("broker", common_name="broker")),
        "ssl.truststore.location": str(pki.ca_pem), "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/L,DEFAULT"})
    with BrokerThread(settings) as broker:
        yield broker, pki


def principals(broker: BrokerThread) -> set[str]:
    return broker.call(lambda b: {c._client.auth.principal for c in b.server._connections})


def test_confluent_kafka_with_a_client_certificate(mtls):
    from confluent_kafka import Consumer, Producer  # noqa: PLC0415

    broker, pki = mtls
    cert = pki.issue("alice", common_name="Alice", unit="eng")
    conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem),
            "ssl.certificate.location": str(cert), "ssl.key.location": str(cert), "log_level": 0}
    topic = f"mtls-{uuid.uuid4().hex[:6]}"
    producer = Producer(conf)
    for i in range(10):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(30) == 0
    assert "User:alice" in principals(broker)  # CN=Alice,OU=eng,O=... through the rule, lower-cased
    consumer = Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    assert seen == [f"v{i}".encode() for i in range(10)]


@pytest.mark.parametrize("certificate", ["none", "other-ca"])
def test_confluent_kafka_without_a_trusted_certificate_is_refused(mtls, tmp_path, certificate):
    from confluent_kafka import KafkaException  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    broker, pki = mtls
    conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem),
            "log_level": 0}
    if certificate == "other-ca":
        stranger = ThrowawayPki(tmp_path / "other").issue("mallory", common_name="mallory")
        conf.update({"ssl.certificate.location": str(stranger), "ssl.key.location": str(stranger)})
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=5)


def test_kafka_python_with_a_client_certificate(mtls):
    kafka = pytest.importorskip("kafka")
    broker, pki = mtls
    cert = pki.issue("bob", common_name="bob")
    common = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SSL", "ssl_cafile": str(pki.ca_pem),
              "ssl_certfile": str(cert), "ssl_keyfile": str(cert)}
    topic = f"kp-{uuid.uuid4().hex[:6]}"
    producer = kafka.KafkaProducer(**common)
    producer.send(topic, b"hello").get(timeout=30)
    assert "User:bob" in principals(broker)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **common)
    assert [m.value for m in consumer][:1] == [b"hello"]
    consumer.close()


async def test_a_client_without_a_certificate_is_refused_at_the_handshake(mtls):
    broker, pki = mtls
    context = ssl.create_default_context(cafile=str(pki.ca_pem))
    with pytest.raises((ConnectionError, OSError, TimeoutError)):
        client = await KafkaClient.connect(broker.info.host, broker.info.port, ssl_context=context)
        await client.request(create_topics_request([("nope", 1, 1, {})]), timeout=5)
    assert not any(p.startswith("User:ANONYMOUS") for p in principals(broker))


@pytest.mark.slow
@pytest.mark.compat
def test_kafka_java_tools_with_a_pem_keystore(mtls, tmp_path):
    from tinystream.testing.peers import apache_kafka  # noqa: PLC0415

    if not any(apache_kafka.jars_dir().glob("kafka-clients-*.jar")):
        pytest.skip("Kafka's jars are missing: run `make tools` (tools/install-kafka-jars.sh)")
    broker, pki = mtls
    cert = pki.issue("carol", common_name="carol")
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={pki.ca_pem}\nssl.keystore.type=PEM\nssl.keystore.location={cert}\n")
    topic = f"java-{uuid.uuid4().hex[:6]}"
    created = apache_kafka.run_java_tool(apache_kafka.TOPIC_COMMAND, [
        "--bootstrap-server", broker.bootstrap, "--command-config", str(config), "--create", "--topic", topic,
        "--partitions", "1", "--replication-factor", "1"], timeout=120)
    assert created.returncode == 0, created.stderr[-2000:]
    no_cert = tmp_path / "no-cert.properties"
    no_cert.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca_pem}\n")
    refused = apache_kafka.run_java_tool(apache_kafka.TOPIC_COMMAND, [
        "--bootstrap-server", broker.bootstrap, "--command-config", str(no_cert), "--list"], timeout=120)
    said = refused.stdout + refused.stderr
    # TLS 1.3: the client finishes its side of the handshake before the broker refuses it, so Java reports the
    # connection closed "during authentication" (or an SslAuthenticationException when it reads the alert).
    assert refused.returncode != 0, said[-2000:]
    assert "SslAuthenticationException" in said or "terminated during authentication" in said, said[-2000:]


@pytest.fixture(scope="module")
def two_cas(tmp_path_factory):
    """The operator's layout (resources.security_config): the broker certificate and ssl.truststore.location
    of the cluster CA, the client listener's own truststore of the clients CA (its tls users' CA)."""
    import datetime  # noqa: PLC0415

    from tinystream.operator.k8s.certificates import derived_ca, issue  # noqa: PLC0415

    folder = tmp_path_factory.mktemp("two-cas")
    now = datetime.datetime.now(datetime.UTC)
    cluster = derived_ca(b"cluster", "demo", "ns", created=now, days=30)
    clients = derived_ca(b"clients", "demo", "ns", created=now, days=30, title="clients CA")
    broker_cert = issue(cluster, "demo-broker", frozenset({"localhost"}), now=now, days=30,
                        ip_addresses=frozenset({"127.0.0.1"}))
    files = {"broker.pem": broker_cert.cert_pem + broker_cert.key_pem, "ca.crt": cluster.cert_pem,
             "clients-ca.crt": clients.cert_pem}
    for name, pem in files.items():
        (folder / name).write_text(pem)
    for name, ca in (("user", clients), ("stranger", cluster)):  # the second: signed by the cluster CA only
        cert = issue(ca, name, frozenset(), now=now, days=30)
        (folder / f"{name}.pem").write_text(cert.cert_pem + cert.key_pem)
    settings = test_settings(folder / "data", **{
        "listeners": "CLIENT://127.0.0.1:0", "listener.security.protocol.map": "CLIENT:SSL",
        "inter.broker.listener.name": "CLIENT",
        "ssl.keystore.location": str(folder / "broker.pem"), "ssl.truststore.location": str(folder / "ca.crt"),
        "ssl.client.auth": "required",
        "listener.name.client.ssl.truststore.location": str(folder / "clients-ca.crt")})
    with BrokerThread(settings) as broker:
        yield broker, folder


@pytest.mark.parametrize("who,accepted", [("user", True), ("stranger", False)])
def test_the_client_listener_accepts_certificates_of_the_clients_ca_only(two_cas, who, accepted):
    """Issue 23 item 4: a client verifies the broker with the cluster CA; the broker verifies the client with
    the clients CA, so a certificate the cluster CA signed (a broker's kind) does not log a client in."""
    from confluent_kafka import KafkaException  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    broker, folder = two_cas
    cert = str(folder / f"{who}.pem")
    conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(folder / "ca.crt"), "ssl.certificate.location": cert, "ssl.key.location": cert,
            "log_level": 0}
    if accepted:
        admin = AdminClient(conf)  # kept: its connection stays open while principals() looks
        assert admin.list_topics(timeout=10).brokers
        # librdkafka swaps its bootstrap connection for the broker's own: look until that one is up too
        wait_until(lambda: "User:CN=user" in principals(broker), timeout=10, what="the user's connection")
    else:
        with pytest.raises(KafkaException):
            AdminClient(conf).list_topics(timeout=5)
        assert "User:CN=stranger" not in principals(broker)
