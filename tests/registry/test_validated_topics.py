"""Topics validated by the registry (confluent.value/key.schema.validation): a real broker and a real registry.

The broker is started with confluent.schema.registry.url pointing at a port chosen first, then the registry
is started on that port (it keeps its schemas in a topic of that same broker). confluent-kafka's
AvroSerializer produces; raw Produce requests show the exact error, message and record_errors.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.storage.batch import Compression, Record
from tinystream.broker.topics.schema_ids import SchemaIdLookup
from tinystream.config.topic_configs import KEY_SCHEMA_VALIDATION, VALUE_SCHEMA_VALIDATION
from tinystream.registry.app import RegistryOptions
from tinystream.scram_users import UserStore
from tinystream.testing.broker import (
    BrokerThread,
    create_topics_request,
    entity,
    now_batch,
    produce_request,
    request,
    test_settings,
)
from tinystream.testing.registry import RegistryThread

USER = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [{"name": "id", "type": "int"}]})
ON = {VALUE_SCHEMA_VALIDATION: "true"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    def __init__(self, broker: BrokerThread, port: int) -> None:
        self.broker, self.port = broker, port
        self.registry: RegistryThread | None = None

    def start_registry(self) -> str:
        self.registry = RegistryThread(RegistryOptions(bootstrap=self.broker.bootstrap, port=self.port,
                                                       topic="_schemas"))
        return self.registry.start()

    def stop_registry(self) -> None:
        if self.registry is not None:
            self.registry.stop()
            self.registry = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def stack(tmp_path) -> Iterator[Stack]:
    port = _free_port()
    settings = test_settings(tmp_path / "data", **{"confluent.schema.registry.url": f"http://127.0.0.1:{port}"})
    with BrokerThread(settings) as broker:
        running = Stack(broker, port)
        running.start_registry()
        try:
            yield running
        finally:
            running.stop_registry()


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    with stack(tmp_path_factory.mktemp("validated")) as running:
        yield running


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _produce(broker: BrokerThread, topic: str, *records: Record, compression=Compression.NONE):
    host, port = broker.bootstrap.rsplit(":", 1)
    client = await KafkaClient.connect(host, int(port))
    try:
        response = await client.request(produce_request(topic, 0, now_batch(list(records), compression=compression),
                                                      version=9))
    finally:
        await client.close()
    return response.responses[0].partition_responses[0]


def _framed(schema_id: int) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + b"\x02"


def test_avro_serializer_produces_to_a_validated_topic(validated):
    topic = _topic("users")
    _create(validated.broker.bootstrap, topic, ON)
    serialize = AvroSerializer(SchemaRegistryClient({"url": validated.url}), USER)
    reports: list = []
    producer = Producer({"bootstrap.servers": validated.broker.bootstrap, "linger.ms": 5})
    for i in range(20):
        value = serialize({"id": i}, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, value, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(20) == 0
    assert [err for err, _ in reports] == [None] * 20 and max(o for _, o in reports) == 19


@pytest.mark.asyncio
async def test_a_value_without_the_prefix_is_invalid_record_naming_subject_and_record(validated):
    topic = _topic("raw")
    _create(validated.broker.bootstrap, topic, ON)
    schema_id = SchemaRegistryClient({"url": validated.url}).register_schema(f"{topic}-value", Schema(USER, "AVRO"))
    ok = Record(value=_framed(schema_id))
    assert (await _produce(validated.broker, topic, ok)).error_code == ErrorCode.none
    part = await _produce(validated.broker, topic, ok, ok, Record(value=b'{"id": 1}'))
    assert part.error_code == ErrorCode.invalid_record
    assert f"subject '{topic}-value'" in part.error_message and "record 2: value starts with byte 123" in part.error_message
    assert [(e.batch_index, f"{topic}-value" in e.batch_index_error_message) for e in part.record_errors] == [(2, True)]
    assert (await _produce(validated.broker, topic, Record(value=None))).base_offset == 1  # tombstones pass; nothing
    # of the refused batch was appended
    zipped = await _produce(validated.broker, topic, ok, Record(value=b"raw"), compression=Compression.ZSTD)
    assert zipped.error_code == ErrorCode.invalid_record and "record 1: value" in zipped.error_message
    zipped = await _produce(validated.broker, topic, ok, ok, compression=Compression.GZIP)
    assert zipped.error_code == ErrorCode.none and zipped.base_offset == 2


@pytest.mark.asyncio
async def test_an_id_registered_only_under_another_subject_is_refused(validated):
    topic = _topic("other")
    _create(validated.broker.bootstrap, topic, ON)
    client = SchemaRegistryClient({"url": validated.url})
    other = client.register_schema(f"elsewhere-{topic}-value",
                                   Schema(json.dumps({"type": "record", "name": "Only", "fields": []}), "AVRO"))
    part = await _produce(validated.broker, topic, Record(value=_framed(other)))
    assert part.error_code == ErrorCode.invalid_record
    assert f"schema id {other} is not registered under the subject (subject '{topic}-value')" in part.error_message
    part = await _produce(validated.broker, topic, Record(value=_framed(987654)))
    assert part.error_code == ErrorCode.invalid_record and "not registered in the schema registry" in part.error_message


@pytest.mark.asyncio
async def test_key_validation_checks_the_key_subject(validated):
    topic = _topic("keyed")
    _create(validated.broker.bootstrap, topic, {KEY_SCHEMA_VALIDATION: "true"})
    key_id = SchemaRegistryClient({"url": validated.url}).register_schema(
        f"{topic}-key", Schema('"string"', "AVRO"))
    assert (await _produce(validated.broker, topic, Record(key=_framed(key_id), value=b"free"))).error_code == 0
    part = await _produce(validated.broker, topic, Record(key=b"plain", value=_framed(key_id)))
    assert part.error_code == ErrorCode.invalid_record and "record 0: key" in part.error_message
    assert f"'{topic}-key'" in part.error_message


@pytest.mark.asyncio
async def test_the_same_topic_without_validation_accepts_anything(validated):
    topic = _topic("free")
    _create(validated.broker.bootstrap, topic, {})
    part = await _produce(validated.broker, topic, Record(key=b"k", value=b"raw"), Record(value=_framed(424242)))
    assert part.error_code == ErrorCode.none


def test_a_record_name_strategy_is_invalid_config(validated):
    admin = AdminClient({"bootstrap.servers": validated.broker.bootstrap})
    topic = _topic("rns")
    future = admin.create_topics([NewTopic(topic, 1, 1, config={
        **ON, "confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy"})])
    with pytest.raises(Exception) as info:
        future[topic].result(10)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "TopicNameStrategy only" in info.value.args[0].str()


@pytest.mark.asyncio
async def test_without_a_registry_url_turning_it_on_is_refused_and_produce_is_policy_violation(broker):
    """`broker` (tests/registry/conftest.py) has no confluent.schema.registry.url."""
    host, port = broker.bootstrap.rsplit(":", 1)
    client = await KafkaClient.connect(host, int(port))
    try:
        response = await client.request(create_topics_request([("nourl", 1, 1, ON)]))
        refused = response.topics[0]
        assert refused.error_code == ErrorCode.invalid_config
        assert "needs confluent.schema.registry.url" in refused.error_message
        response = await client.request(create_topics_request([("nourl", 1, 1, {})]))
        assert response.topics[0].error_code == ErrorCode.none
        alter = request(44, 1, validate_only=False, resources=(entity(
            44, 1, "AlterConfigsResource", resource_type=2, resource_name="nourl", configs=(
                entity(44, 1, "AlterableConfig", name=KEY_SCHEMA_VALIDATION, config_operation=0, value="true"),)),))
        altered = (await client.request(alter)).responses[0]
        assert altered.error_code == ErrorCode.invalid_config
        assert f"{KEY_SCHEMA_VALIDATION}=true needs confluent.schema.registry.url" in altered.error_message
    finally:
        await client.close()
    # A topic that has it on anyway (the broker restarted without the URL): every produce says why.
    broker.call(lambda b: b.topics.store.update("nourl", configs=ON))
    part = await _produce(broker, "nourl", Record(value=_framed(1)))
    assert part.error_code == ErrorCode.policy_violation
    assert "no confluent.schema.registry.url" in part.error_message


@pytest.mark.asyncio
async def test_a_stopped_registry_is_retriable_and_the_producer_delivers_once_it_is_back(tmp_path):
    with stack(tmp_path) as running:
        topic = _topic("outage")
        _create(running.broker.bootstrap, topic, ON)
        schema_id = SchemaRegistryClient({"url": running.url}).register_schema(f"{topic}-value", Schema(USER, "AVRO"))
        running.stop_registry()
        part = await _produce(running.broker, topic, Record(value=_framed(schema_id)))
        assert part.error_code == ErrorCode.not_enough_replicas  # retriable: nothing appended, retry the same batch
        assert "schema registry could not be asked" in part.error_message and str(running.port) in part.error_message

        reports: list = []
        producer = Producer({"bootstrap.servers": running.broker.bootstrap, "retry.backoff.ms": 100,
                             "message.timeout.ms": 30000})
        producer.produce(topic, _framed(schema_id), on_delivery=lambda err, msg: reports.append(err))
        producer.flush(1.0)
        assert reports == []  # still retrying, not failed
        running.start_registry()
        assert producer.flush(25) == 0
        assert reports == [None]


def test_describe_configs_shows_the_keys_and_their_defaults(validated):
    from confluent_kafka.admin import ConfigResource

    topic = _topic("described")
    _create(validated.broker.bootstrap, topic, ON)
    admin = AdminClient({"bootstrap.servers": validated.broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    assert entries[VALUE_SCHEMA_VALIDATION].value == "true" and not entries[VALUE_SCHEMA_VALIDATION].is_default
    assert entries[KEY_SCHEMA_VALIDATION].value == "false"
    assert entries["confluent.value.subject.name.strategy"].value == (
        "io.confluent.kafka.serializers.subject.TopicNameStrategy")


# -- a registry that needs a login (confluent.basic.auth.user.info.file) ------------------------------------

LOGIN_USERS = {"app": "app-secret", "broker": "broker-secret"}
LOGIN_RULES = {"rules": [{"principal": "User:app", "subject": "*", "operations": ["WRITE"]},
                   {"principal": "User:broker", "subject": "*", "operations": ["READ"]}]}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    home = tmp_path_factory.mktemp("validation-login")
    store = UserStore()
    for name, password in LOGIN_USERS.items():
        store.set_password(name, password)
    store.save(home / "users.json")
    (home / "rules.json").write_text(json.dumps(LOGIN_RULES))
    login = home / "registry-login"
    login.write_text("broker:broker-secret\n")
    port = _free_port()
    settings = test_settings(home / "data", **{"confluent.schema.registry.url": f"http://127.0.0.1:{port}",
                                               "confluent.basic.auth.user.info.file": str(login)})
    with BrokerThread(settings) as broker:
        registry = RegistryThread(RegistryOptions(bootstrap=broker.bootstrap, port=port, topic="_schemas",
                                                  users_file=home / "users.json", rules_file=home / "rules.json",
                                                  failed_login_delay=0))
        registry.start()
        try:
            yield broker, registry.url, login
        finally:
            registry.stop()


@pytest.mark.asyncio
async def test_a_broker_with_the_registry_login_accepts_registered_ids_and_refuses_unknown_ones(secured):
    broker, url, _ = secured
    _create(broker.bootstrap, "logged-in", ON)
    client = SchemaRegistryClient({"url": url, "basic.auth.user.info": "app:app-secret"})
    schema_id = client.register_schema("logged-in-value", Schema(USER, "AVRO"))
    part = await _produce(broker, "logged-in", Record(value=_framed(schema_id)))
    assert part.error_code == ErrorCode.none
    part = await _produce(broker, "logged-in", Record(value=_framed(424242)))
    assert part.error_code == ErrorCode.invalid_record and "not registered in the schema registry" in part.error_message


@pytest.mark.asyncio
async def test_a_wrong_login_is_retriable_and_a_fixed_file_is_read_again(secured):
    broker, url, login = secured
    _create(broker.bootstrap, "rotated", ON)
    client = SchemaRegistryClient({"url": url, "basic.auth.user.info": "app:app-secret"})
    schema_id = client.register_schema("rotated-value", Schema(json.dumps(
        {"type": "record", "name": "Rotated", "fields": [{"name": "a", "type": "int"}]}), "AVRO"))
    good = login.read_text()
    try:
        login.write_text("broker:not-the-password\n")
        os.utime(login, (1_000_000, 1_000_000))  # a modification time surely different from the last one read
        part = await _produce(broker, "rotated", Record(value=_framed(schema_id)))
        assert part.error_code == ErrorCode.not_enough_replicas and "401" in part.error_message  # nothing appended
    finally:
        login.write_text(good)
        os.utime(login, (2_000_000, 2_000_000))
    part = await _produce(broker, "rotated", Record(value=_framed(schema_id)))
    assert part.error_code == ErrorCode.none and part.base_offset == 0


def test_a_malformed_login_file_stops_the_lookup_at_start(tmp_path):
    (tmp_path / "login").write_text("no-colon-here")
    with pytest.raises(ValueError, match="user:password"):
        SchemaIdLookup("http://127.0.0.1:1", user_info_file=str(tmp_path / "login"))
