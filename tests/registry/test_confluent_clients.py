"""confluent-kafka's SchemaRegistryClient and its Avro/JSON serializers against our registry and a real broker."""

from __future__ import annotations

import json
import uuid

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import ConfigCompatibilityLevel, Schema, SchemaRegistryClient, ServerConfig
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.compat

USER_V1 = {"type": "record", "name": "User", "namespace": "shop", "fields": [{"name": "id", "type": "int"}]}
USER_V2 = {"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "email", "type": "string", "default": ""}]}
USER_BAD = {"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "age", "type": "int"}]}  # new field without a default


def _roundtrip(bootstrap: str, topic: str, serialize, deserialize, values: list, *, already: int = 0) -> list:
    """Produce `values`, then read the topic from the start (`already` records were there) and decode all."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    decoded: list = []
    try:
        for _ in range(120):
            if len(decoded) == already + len(values):
                break
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            decoded.append(deserialize(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return decoded


def test_avro_serializer_register_produce_consume_evolve_and_409(broker, start_registry):
    registry = start_registry()
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"users-{uuid.uuid4().hex[:8]}"
    v1 = AvroSerializer(client, json.dumps(USER_V1))
    decoded = _roundtrip(broker.bootstrap, topic, v1, AvroDeserializer(client), [{"id": 1}, {"id": 2}])
    assert decoded == [{"id": 1}, {"id": 2}]
    first = client.get_latest_version(f"{topic}-value")
    assert first.version == 1

    v2 = AvroSerializer(client, json.dumps(USER_V2))  # backward compatible: int -> long, a field with a default
    decoded = _roundtrip(broker.bootstrap, topic, v2, AvroDeserializer(client), [{"id": 3, "email": "a@b"}], already=2)
    assert decoded == [{"id": 1}, {"id": 2}, {"id": 3, "email": "a@b"}]  # each decoded with its writer's schema
    client.clear_latest_caches()  # the client keeps "latest" per subject
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.version == 2 and latest.schema_id != first.schema_id
    # a reader on v2 (the deserializer's reader schema) resolves v1 data: the BACKWARD promise kept
    new_reader = AvroDeserializer(client, json.dumps(USER_V2))
    decoded = _roundtrip(broker.bootstrap, topic, v2, new_reader, [{"id": 4, "email": "c@d"}], already=3)
    assert decoded == [{"id": 1, "email": ""}, {"id": 2, "email": ""}, {"id": 3, "email": "a@b"}, {"id": 4, "email": "c@d"}]

    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(f"{topic}-value", Schema(json.dumps(USER_BAD), "AVRO"))
    assert caught.value.http_status_code == 409 and caught.value.error_code == 409
    assert client.test_compatibility(f"{topic}-value", Schema(json.dumps(USER_BAD), "AVRO")) is False
    assert client.get_versions(f"{topic}-value") == [1, 2]


def test_json_serializer_roundtrip_and_incompatible_change(broker, start_registry):
    registry = start_registry()
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}, "required": ["id"],
              "additionalProperties": False}
    serializer = JSONSerializer(json.dumps(schema), client)
    values = [{"id": 1, "item": "tea"}, {"id": 2}]
    assert _roundtrip(broker.bootstrap, topic, serializer, JSONDeserializer(None, schema_registry_client=client), values) == values
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
    narrowed = {**schema, "properties": {"id": {"type": "string"}, "item": {"type": "string"}}}
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(f"{topic}-value", Schema(json.dumps(narrowed), "JSON"))
    assert caught.value.http_status_code == 409


def test_restart_rebuilds_from_the_topic_with_the_same_ids_and_two_instances_agree(start_registry):
    first = start_registry()
    client = SchemaRegistryClient({"url": first.url})
    id_a = client.register_schema("a-value", Schema(json.dumps(USER_V1), "AVRO"))
    id_b = client.register_schema("b-value", Schema(json.dumps(USER_V1), "AVRO"))
    id_c = client.register_schema("a-value", Schema(json.dumps(USER_V2), "AVRO"))
    assert id_a == id_b and id_c != id_a
    client.set_compatibility("b-value", "FULL")
    client.set_config("a-value", ServerConfig(compatibility_level=ConfigCompatibilityLevel.FORWARD))
    assert client.get_compatibility("a-value") == "FORWARD"
    client.delete_config("a-value")
    client.delete_version("b-value", 1)
    first.stop()

    again = start_registry(topic=first.options.topic)
    fresh = SchemaRegistryClient({"url": again.url})
    assert fresh.get_latest_version("a-value").schema_id == id_c
    assert fresh.get_version("a-value", 1).schema_id == id_a
    assert fresh.get_subjects() == ["a-value"]
    assert fresh.get_compatibility("b-value") == "FULL"
    assert json.loads(fresh.get_schema(id_a).schema_str) == USER_V1

    second = start_registry(topic=first.options.topic)  # a second instance on the same topic
    other = SchemaRegistryClient({"url": second.url})
    id_d = fresh.register_schema("c-value", Schema(json.dumps({"type": "string"}), "AVRO"))
    from tinystream.testing.waiting import wait_until
    wait_until(lambda: second.server.state.subjects.get("c-value"), what="the second instance to read c-value")
    assert other.get_latest_version("c-value").schema_id == id_d
    assert other.register_schema("d-value", Schema(json.dumps({"type": "string"}), "AVRO")) == id_d
