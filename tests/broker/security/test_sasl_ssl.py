"""A SASL_SSL listener with SCRAM credentials, against real clients (issue 12).

One broker on `listeners=SASL_SSL://127.0.0.1:0` with a throwaway CA (trustme),
users in a salted credentials file (alice: SCRAM-SHA-256/512 and PLAIN).
Each client logs in and round-trips records; a wrong password, no credentials
and a plaintext client are refused; nothing but ApiVersions and the SASL APIs
is served before authentication.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest
from security_helpers import confluent_sasl_ssl, java_sasl_ssl_properties

from tinystream.broker.protocol.client import KafkaClient, SaslLogin, SaslRefused
from tinystream.testing.broker import BrokerThread, create_topics_request, sasl_ssl_settings

PASSWORD = "alice-secret"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    pytest.importorskip("trustme")
    settings, truststore = sasl_ssl_settings(tmp_path_factory.mktemp("sasl"), users={"alice": PASSWORD})
    with BrokerThread(settings) as broker:
        yield broker, truststore


def confluent(secured, **extra):
    broker, truststore = secured
    return confluent_sasl_ssl(broker.bootstrap, truststore, "alice", PASSWORD, **extra)


def test_confluent_kafka_round_trips_over_scram_sha_512(secured):
    from confluent_kafka import Consumer, Producer  # noqa: PLC0415

    topic = f"sasl-{uuid.uuid4().hex[:6]}"
    producer = Producer(confluent(secured, **{"enable.idempotence": True}))
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(confluent(secured, **{"group.id": "g", "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    assert seen == [f"v{i}".encode() for i in range(20)]


@pytest.mark.parametrize("overrides", [
    pytest.param({"sasl.password": "wrong"}, id="wrong-password"),
    pytest.param({"sasl.username": "mallory"}, id="unknown-user"),
    pytest.param({"security.protocol": "SSL"}, id="no-credentials"),
])
def test_confluent_kafka_is_refused_without_the_right_credentials(secured, overrides):
    from confluent_kafka import KafkaException  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    errors = []
    conf = confluent(secured, error_cb=errors.append, **overrides)
    if overrides.get("security.protocol") == "SSL":
        for key in ("sasl.mechanism", "sasl.username", "sasl.password"):
            conf.pop(key)
    admin = AdminClient(conf)
    with pytest.raises(KafkaException) as refused:
        admin.list_topics(timeout=5)
    admin.poll(1)  # delivers the error callbacks
    if "sasl.password" in overrides or "sasl.username" in overrides:
        said = [e.str() for e in errors] + [str(refused.value)]
        assert any("Authentication failed" in text for text in said), said


def test_kafka_python_scram_sha_256(secured, caplog):
    kafka = pytest.importorskip("kafka")
    broker, truststore = secured
    common = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_SSL", "ssl_cafile": str(truststore),
              "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD}
    topic = f"kp-{uuid.uuid4().hex[:6]}"
    producer = kafka.KafkaProducer(**common)
    producer.send(topic, b"hello").get(timeout=30)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **common)
    assert [m.value for m in consumer][:1] == [b"hello"]
    consumer.close()
    with pytest.raises(kafka.errors.KafkaError):  # kafka-python retries, then gives up bootstrapping
        kafka.KafkaProducer(**{**common, "sasl_plain_password": "nope"},
                            max_block_ms=5000, request_timeout_ms=5000)
    assert "SaslAuthenticationFailedError" in caplog.text  # what the broker answered each attempt


async def test_aiokafka_plain(secured):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.helpers import create_ssl_context  # noqa: PLC0415

    broker, truststore = secured
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL",
        ssl_context=create_ssl_context(cafile=str(truststore)), sasl_mechanism="PLAIN",
        sasl_plain_username="alice", sasl_plain_password=PASSWORD)
    await producer.start()
    try:
        meta = await producer.send_and_wait(f"aio-{uuid.uuid4().hex[:6]}", b"x")
        assert meta.offset == 0
    finally:
        await producer.stop()


def test_kcat_lists_metadata_with_plain_and_is_refused_with_a_wrong_password(secured):
    # PLAIN: Debian's kcat links librdkafka 2.0.2, whose SCRAM client-final repeats the client nonce
    # (librdkafka#4895, fixed in 2.6.1); Kafka 4.x refuses it as this broker does (RFC 5802).
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed: run `make tools` (Debian package kcat)")
    broker, truststore = secured
    args = [kcat, "-b", broker.bootstrap, "-L", "-m", "10", "-X", "security.protocol=SASL_SSL",
            "-X", f"ssl.ca.location={truststore}", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice"]
    ok = subprocess.run([*args, "-X", f"sasl.password={PASSWORD}"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "1 brokers" in ok.stdout, ok.stderr
    bad = subprocess.run([*args, "-X", "sasl.password=nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "uthentication" in bad.stderr, bad.stderr


async def test_nothing_but_the_login_is_served_before_authentication(secured):
    import ssl  # noqa: PLC0415

    broker, truststore = secured
    host, port = broker.info.host, broker.info.port
    context = ssl.create_default_context(cafile=str(truststore))
    client = await KafkaClient.connect(host, port, ssl_context=context)
    with pytest.raises((ConnectionError, asyncio.TimeoutError)):
        await client.request(create_topics_request([("sneaky", 1, 1, {})]), timeout=5)
    await client.close()
    with pytest.raises(SaslRefused):
        await KafkaClient.connect(host, port, ssl_context=context, sasl=SaslLogin("SCRAM-SHA-512", "alice", "x"))
    good = await KafkaClient.connect(host, port, ssl_context=context, sasl=SaslLogin("SCRAM-SHA-512", "alice", PASSWORD))
    created = await good.request(create_topics_request([("allowed", 1, 1, {})]))
    assert created.topics[0].error_code == 0
    await good.close()
    with pytest.raises((ConnectionError, OSError, asyncio.TimeoutError)):  # a plaintext client on a TLS port
        plain = await KafkaClient.connect(host, port)
        await plain.request(create_topics_request([("plain", 1, 1, {})]), timeout=5)


@pytest.mark.slow
@pytest.mark.compat
def test_kafka_java_tools_with_their_own_command_config(secured, tmp_path):
    from tinystream.testing.peers import apache_kafka  # noqa: PLC0415

    if not any(apache_kafka.jars_dir().glob("kafka-clients-*.jar")):
        pytest.skip("Kafka's jars are missing: run `make tools` (tools/install-kafka-jars.sh)")
    broker, truststore = secured
    config = tmp_path / "client.properties"

    def write(password: str) -> str:
        return java_sasl_ssl_properties(config, truststore, "alice", password)

    topic = f"java-{uuid.uuid4().hex[:6]}"
    created = apache_kafka.run_java_tool(apache_kafka.TOPIC_COMMAND, [
        "--bootstrap-server", broker.bootstrap, "--command-config", write(PASSWORD), "--create", "--topic", topic,
        "--partitions", "2", "--replication-factor", "1"], timeout=120)
    assert created.returncode == 0, created.stderr[-2000:]
    listed = apache_kafka.run_java_tool(apache_kafka.TOPIC_COMMAND, [
        "--bootstrap-server", broker.bootstrap, "--command-config", config, "--list"], timeout=120)
    assert topic in listed.stdout.split()
    refused = apache_kafka.run_java_tool(apache_kafka.TOPIC_COMMAND, [
        "--bootstrap-server", broker.bootstrap, "--command-config", write("wrong"), "--list"], timeout=120)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "SaslAuthenticationException" in said, said[-2000:]
