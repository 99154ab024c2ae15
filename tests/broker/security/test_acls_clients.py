"""ACLs against real clients on a SASL_SSL broker with the authorizer on (issue 12).

The same broker setup as test_sasl_ssl.py (`sasl_ssl_settings`, a throwaway
CA) plus `authorizer.class.name`; `admin` is a super user, `alice` starts with
no ACLs. Each client is refused with Kafka's error and allowed once an ACL
grants it; the Java tools manage ACLs and SCRAM credentials themselves.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest
from security_helpers import confluent_sasl_ssl, java_sasl_ssl_properties

from tinystream.broker.protocol.client import KafkaClient, SaslLogin
from tinystream.testing.broker import BrokerThread, acl_creation, create_acls_request, sasl_ssl_settings

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    pytest.importorskip("trustme")
    settings, truststore = sasl_ssl_settings(tmp_path_factory.mktemp("acl"), users=USERS, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"})
    with BrokerThread(settings) as broker:
        yield broker, truststore


def confluent(acl_broker, user: str = "alice", **extra):
    broker, truststore = acl_broker
    return confluent_sasl_ssl(broker.bootstrap, truststore, user, USERS[user], **extra)


def admin_creates_topic(acl_broker, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    admin = AdminClient(confluent(acl_broker, "admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def admin_grants(acl_broker, *bindings) -> None:
    """Through librdkafka's CreateAcls (confluent-kafka's AdminClient)."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    admin = AdminClient(confluent(acl_broker, "admin"))
    for future in admin.create_acls(list(bindings)).values():
        future.result(30)


def binding(kind: str, name: str, operation: str, *, pattern: str = "LITERAL", permission: str = "ALLOW"):
    from confluent_kafka.admin import (  # noqa: PLC0415
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType[kind], name, ResourcePatternType[pattern], "User:alice", "*",
                      AclOperation[operation], AclPermissionType[permission])


def test_confluent_kafka_is_refused_then_allowed_and_deny_wins(acl_broker):
    from confluent_kafka import KafkaError, Producer  # noqa: PLC0415
    from confluent_kafka.admin import (  # noqa: PLC0415
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    topic = f"ck-{uuid.uuid4().hex[:6]}"
    admin_creates_topic(acl_broker, topic)

    def produce() -> KafkaError | None:
        results = []
        producer = Producer(confluent(acl_broker, **{"message.timeout.ms": 10_000}))
        producer.produce(topic, b"v", on_delivery=lambda err, _msg: results.append(err))
        producer.flush(30)
        return results[0]

    refused = produce()
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    admin_grants(acl_broker, binding("TOPIC", topic[:3], "WRITE", pattern="PREFIXED"))
    assert produce() is None
    admin_grants(acl_broker, binding("TOPIC", topic, "WRITE", permission="DENY"))
    denied = produce()
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = AdminClient(confluent(acl_broker, "admin"))
    listed = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)).result(30)
    assert {(b.name, b.permission_type.name) for b in listed} == {(topic[:3], "ALLOW"), (topic, "DENY")}


def test_kafka_python_is_refused_then_allowed(acl_broker):
    kafka = pytest.importorskip("kafka")
    broker, truststore = acl_broker
    topic = f"kp-{uuid.uuid4().hex[:6]}"
    admin_creates_topic(acl_broker, topic)
    common = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_SSL", "ssl_cafile": str(truststore),
              "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice",
              "sasl_plain_password": USERS["alice"]}
    producer = kafka.KafkaProducer(**common, max_block_ms=10_000)
    with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
        producer.send(topic, b"no").get(timeout=30)
    admin_grants(acl_broker, binding("TOPIC", topic, "WRITE"))
    producer.send(topic, b"yes").get(timeout=30)
    producer.close()


async def test_aiokafka_is_refused_then_allowed(acl_broker):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.errors import TopicAuthorizationFailedError  # noqa: PLC0415
    from aiokafka.helpers import create_ssl_context  # noqa: PLC0415

    broker, truststore = acl_broker
    topic = f"aio-{uuid.uuid4().hex[:6]}"
    await asyncio.to_thread(admin_creates_topic, acl_broker, topic)
    consumer = aiokafka.AIOKafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL",
        ssl_context=create_ssl_context(cafile=str(truststore)), sasl_mechanism="PLAIN",
        sasl_plain_username="alice", sasl_plain_password=USERS["alice"], group_id="aio-group",
        auto_offset_reset="earliest")
    with pytest.raises(TopicAuthorizationFailedError):
        await consumer.start()
        await consumer.getmany(timeout_ms=5000)
    await consumer.stop()
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL",
        ssl_context=create_ssl_context(cafile=str(truststore)), sasl_mechanism="PLAIN",
        sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
    await producer.start()
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(topic, b"no")
        await asyncio.to_thread(admin_grants, acl_broker, binding("TOPIC", topic, "WRITE"))
        meta = await producer.send_and_wait(topic, b"yes")
        assert meta.offset == 0
    finally:
        await producer.stop()


def test_kcat_is_refused_then_allowed(acl_broker):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed: run `make tools` (Debian package kcat)")
    broker, truststore = acl_broker
    topic = f"kc-{uuid.uuid4().hex[:6]}"
    admin_creates_topic(acl_broker, topic)
    # PLAIN: Debian's kcat (librdkafka 2.0.2) has a SCRAM bug (test_sasl_ssl.py says which).
    args = [kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-X", "security.protocol=SASL_SSL",
            "-X", f"ssl.ca.location={truststore}", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice",
            "-X", f"sasl.password={USERS['alice']}"]
    refused = subprocess.run(args, input="no\n", capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "authorization failed" in refused.stderr.lower(), refused.stderr
    admin_grants(acl_broker, binding("TOPIC", topic, "WRITE"))
    ok = subprocess.run(args, input="yes\n", capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr


async def test_acls_granted_through_the_protocol_client_apply_at_once(acl_broker):
    import ssl  # noqa: PLC0415

    broker, truststore = acl_broker
    context = ssl.create_default_context(cafile=str(truststore))
    admin = await KafkaClient.connect(broker.info.host, broker.info.port, ssl_context=context,
                                      sasl=SaslLogin("SCRAM-SHA-512", "admin", USERS["admin"]))
    try:
        reply = await admin.request(create_acls_request(acl_creation("GROUP", "proto-", "User:alice", "READ",
                                                                     pattern="PREFIXED")))
        assert reply.results[0].error_code == 0
    finally:
        await admin.close()
    assert broker.call(lambda b: b.ctx.authorizer.authorize("User:alice", "10.0.0.1", 3, 3, "proto-group"))


# -- Kafka's own Java tools ------------------------------------------------------------------


def java_config(tmp_path, truststore, user: str) -> str:
    return java_sasl_ssl_properties(tmp_path / f"{user}.properties", truststore, user, USERS[user])


def java_tools():
    from tinystream.testing.peers import apache_kafka  # noqa: PLC0415

    if not any(apache_kafka.jars_dir().glob("kafka-clients-*.jar")):
        pytest.skip("Kafka's jars are missing: run `make tools` (tools/install-kafka-jars.sh)")
    return apache_kafka


ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


@pytest.mark.slow
@pytest.mark.compat
def test_kafka_acls_sh_and_the_java_console_clients(acl_broker, tmp_path):
    kafka = java_tools()
    broker, truststore = acl_broker
    admin, alice = java_config(tmp_path, truststore, "admin"), java_config(tmp_path, truststore, "alice")
    topic = f"java-{uuid.uuid4().hex[:6]}"
    admin_creates_topic(acl_broker, topic)

    def acls(*args: str):
        return kafka.run_java_tool(ACL_COMMAND, ["--bootstrap-server", broker.bootstrap, "--command-config", admin,
                                                 *args], timeout=120)

    def console_produce():
        return kafka.run_java_tool(kafka.CONSOLE_PRODUCER, [
            "--bootstrap-server", broker.bootstrap, "--producer.config", alice, "--topic", topic,
            "--producer-property", "max.block.ms=10000", "--producer-property", "delivery.timeout.ms=15000",
            "--producer-property", "request.timeout.ms=10000"], input="hello\n", timeout=120)

    def console_consume():
        return kafka.run_java_tool(kafka.CONSOLE_CONSUMER, [
            "--bootstrap-server", broker.bootstrap, "--consumer.config", alice, "--topic", topic,
            "--group", "java-group", "--from-beginning", "--max-messages", "1", "--timeout-ms", "30000"],
            timeout=120)

    refused = console_produce()
    said = refused.stdout + refused.stderr
    assert "TopicAuthorizationException" in said or "not authorized to access topics" in said, said[-2000:]
    refused = console_consume()
    said = refused.stdout + refused.stderr
    assert "Processed a total of 0 messages" in said and ("GroupAuthorizationException" in said
                                                           or "TopicAuthorizationException" in said), said[-2000:]
    added = acls("--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    assert added.returncode == 0, added.stderr[-2000:]
    added = acls("--add", "--allow-principal", "User:alice", "--consumer", "--topic", topic, "--group", "java-group")
    assert added.returncode == 0, added.stderr[-2000:]
    listed = acls("--list", "--topic", topic)
    assert listed.returncode == 0 and "User:alice" in listed.stdout and "WRITE" in listed.stdout, listed.stdout
    produced = console_produce()
    assert produced.returncode == 0, (produced.stdout + produced.stderr)[-2000:]
    consumed = console_consume()
    assert "hello" in consumed.stdout, consumed.stderr[-2000:]
    removed = acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic)
    assert removed.returncode == 0, removed.stderr[-2000:]
    listed = acls("--list", "--topic", topic)
    assert "WRITE" not in listed.stdout and "READ" in listed.stdout, listed.stdout
    refused = kafka.run_java_tool(ACL_COMMAND, ["--bootstrap-server", broker.bootstrap, "--command-config", alice,
                                                "--list"], timeout=120)
    said = refused.stdout + refused.stderr
    assert "ClusterAuthorizationException" in said or "not authorized" in said.lower(), said[-2000:]


@pytest.mark.slow
@pytest.mark.compat
def test_kafka_configs_sh_alters_and_describes_scram_users(acl_broker, tmp_path):
    kafka = java_tools()
    broker, truststore = acl_broker
    admin = java_config(tmp_path, truststore, "admin")
    altered = kafka.run_java_tool(CONFIG_COMMAND, [
        "--bootstrap-server", broker.bootstrap, "--command-config", admin, "--alter", "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=carol-secret]", "--entity-type", "users", "--entity-name", "carol"],
        timeout=120)
    assert altered.returncode == 0, (altered.stdout + altered.stderr)[-2000:]
    described = kafka.run_java_tool(CONFIG_COMMAND, [
        "--bootstrap-server", broker.bootstrap, "--command-config", admin, "--describe", "--entity-type", "users",
        "--entity-name", "carol"], timeout=120)
    assert "SCRAM-SHA-512=iterations=8192" in described.stdout, described.stdout + described.stderr[-2000:]
    # carol logs in with what kafka-configs.sh set (her first call: Metadata, which needs no ACL)
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    conf = {**confluent(acl_broker), "sasl.username": "carol", "sasl.password": "carol-secret"}
    deadline = time.monotonic() + 10
    while True:
        try:
            AdminClient(conf).list_topics(timeout=5)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise


def test_confluent_kafka_transactions_need_write_on_the_transactional_id(acl_broker):
    from confluent_kafka import KafkaException, Producer  # noqa: PLC0415

    topic, txn_id = f"txn-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    admin_creates_topic(acl_broker, topic)
    admin_grants(acl_broker, binding("TOPIC", topic, "WRITE"))
    refused = Producer(confluent(acl_broker, **{"transactional.id": txn_id}))
    with pytest.raises(KafkaException) as error:
        refused.init_transactions(15)
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(error.value) or \
        "Transactional Id authorization failed" in str(error.value), error.value
    admin_grants(acl_broker, binding("TRANSACTIONAL_ID", "tx-", "WRITE", pattern="PREFIXED"))
    producer = Producer(confluent(acl_broker, **{"transactional.id": txn_id}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"in a transaction")
    producer.commit_transaction(30)
