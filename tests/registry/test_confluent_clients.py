"""confluent-kafka's SchemaRegistryClient and its Avro/JSON serializers against our registry and a real broker."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]
pytest.importorskip("grpc_tools")  # the registry's Protobuf parsing; generates the test's message classes

from confluent_kafka.schema_registry import ConfigCompatibilityLevel, Schema, SchemaReference, SchemaRegistryClient, ServerConfig
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

from tinystream.registry import protobuf_parse
from tinystream.testing.consumers import serialized_roundtrip

pytestmark = pytest.mark.compat

USER_V1 = {"type": "record", "name": "User", "namespace": "shop", "fields": [{"name": "id", "type": "int"}]}
USER_V2 = {"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "email", "type": "string", "default": ""}]}
USER_BAD = {"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "age", "type": "int"}]}  # new field without a default


def test_avro_serializer_register_produce_consume_evolve_and_409(broker, start_registry):
    registry = start_registry()
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"users-{uuid.uuid4().hex[:8]}"
    v1 = AvroSerializer(client, json.dumps(USER_V1))
    decoded = serialized_roundtrip(broker.bootstrap, topic, v1, AvroDeserializer(client), [{"id": 1}, {"id": 2}])
    assert decoded == [{"id": 1}, {"id": 2}]
    first = client.get_latest_version(f"{topic}-value")
    assert first.version == 1

    v2 = AvroSerializer(client, json.dumps(USER_V2))  # backward compatible: int -> long, a field with a default
    decoded = serialized_roundtrip(broker.bootstrap, topic, v2, AvroDeserializer(client), [{"id": 3, "email": "a@b"}], already=2)
    assert decoded == [{"id": 1}, {"id": 2}, {"id": 3, "email": "a@b"}]  # each decoded with its writer's schema
    client.clear_latest_caches()  # the client keeps "latest" per subject
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.version == 2 and latest.schema_id != first.schema_id
    # a reader on v2 (the deserializer's reader schema) resolves v1 data: the BACKWARD promise kept
    new_reader = AvroDeserializer(client, json.dumps(USER_V2))
    decoded = serialized_roundtrip(broker.bootstrap, topic, v2, new_reader, [{"id": 4, "email": "c@d"}], already=3)
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
    assert serialized_roundtrip(broker.bootstrap, topic, serializer, JSONDeserializer(None, schema_registry_client=client), values) == values
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


def _message_class(tmp_path, files: dict[str, str], message: str):
    """Compile `files` with protoc (grpc_tools) into descriptors and build `message`'s class in a pool of its own."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = tmp_path / "set.pb"
    assert protoc.main(["protoc", f"-I{tmp_path}", f"-I{protobuf_parse._WELL_KNOWN}", "--include_imports",
                        f"--descriptor_set_out={out}", *files]) == 0
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:  # dependencies come first
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(message))


def test_protobuf_serializer_registers_with_references_roundtrips_and_409(broker, start_registry, tmp_path):
    tag = uuid.uuid4().hex[:8]
    money_proto = f"tsmoney{tag}/money.proto"
    money = f'syntax = "proto3";\npackage money{tag};\nmessage Money {{ int64 cents = 1; string currency = 2; }}\n'
    order = (f'syntax = "proto3";\npackage shop{tag};\nimport "{money_proto}";\nimport "google/protobuf/timestamp.proto";\n'
             f"message Order {{ int64 id = 1; money{tag}.Money total = 2; google.protobuf.Timestamp at = 3; "
             "repeated string items = 4; }\n")
    Order = _message_class(tmp_path, {money_proto: money, f"tsorder{tag}.proto": order}, f"shop{tag}.Order")

    registry = start_registry()
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"orders-pb-{tag}"
    serializer = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    values = []
    for number in (1, 2):
        value = Order(id=number, items=["tea", "cake"][:number])
        value.total.cents, value.total.currency = 250 * number, "EUR"
        value.at.seconds = 1_700_000_000 + number
        values.append(value)
    # with the registry client, the deserializer fetches the writer's schema by id (?format=serialized) and its references
    deserialize = ProtobufDeserializer(Order, {"use.deprecated.format": False}, client)
    decoded = serialized_roundtrip(broker.bootstrap, topic, serializer, deserialize, values)
    assert decoded == values

    # the serializer registered the import as its own subject (skipping timestamp.proto, built in)
    assert client.get_subjects() == sorted([money_proto, f"{topic}-value"])
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject) for r in latest.schema.references] == [(money_proto, money_proto)]
    served = client.get_schema(latest.schema_id, fmt="serialized")
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served.schema_str))
    assert descriptor.message_type[0].name == "Order" and money_proto in descriptor.dependency

    # an incompatible change (a field's wire type) is refused with 409, a compatible one is taken
    subject = f"{topic}-value"
    retyped = order.replace("int64 id = 1", "string id = 1")
    refs = latest.schema.references
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(subject, Schema(retyped, "PROTOBUF", refs))
    assert caught.value.http_status_code == 409
    assert client.test_compatibility(subject, Schema(retyped, "PROTOBUF", refs)) is False
    widened = order.replace("repeated string items = 4;", "repeated string items = 4; string note = 5;")
    assert client.register_schema(subject, Schema(widened, "PROTOBUF", refs)) != latest.schema_id
    assert client.get_versions(subject) == [1, 2]


def test_protobuf_schemas_registered_as_proto_text_serve_a_serializer_that_only_looks_up(broker, start_registry, tmp_path):
    """An operator registers .proto text (curl, Java); confluent-kafka looks the same files up as descriptors."""
    tag = uuid.uuid4().hex[:8]
    money_proto = f"tsmoney{tag}/money.proto"
    money = f'syntax = "proto3";\npackage money{tag};\nmessage Money {{ int64 cents = 1; }}\n'
    order = (f'syntax = "proto3";\npackage shop{tag};\nimport "{money_proto}";\n\n'
             f"message Order {{\n  int64 id = 1;\n  money{tag}.Money total = 2;\n  map<string, int32> counts = 3;\n}}\n")
    Order = _message_class(tmp_path, {money_proto: money, f"tsorder{tag}.proto": order}, f"shop{tag}.Order")
    registry = start_registry()
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"orders-text-{tag}"
    client.register_schema(money_proto, Schema(money, "PROTOBUF"))
    reference = SchemaReference(money_proto, money_proto, 1)
    order_id = client.register_schema(f"{topic}-value", Schema(order, "PROTOBUF", [reference]))

    serializer = ProtobufSerializer(Order, client, {"use.deprecated.format": False, "auto.register.schemas": False})
    value = Order(id=7, counts={"tea": 2})
    value.total.cents = 300
    framed = serializer(value, SerializationContext(topic, MessageField.VALUE))
    assert framed[1:5] == order_id.to_bytes(4, "big")  # the id of the text it found, not a new registration
    deserialize = ProtobufDeserializer(Order, {"use.deprecated.format": False}, client)
    assert serialized_roundtrip(broker.bootstrap, topic, lambda v, ctx: framed, deserialize, [value]) == [value]
    assert client.get_versions(f"{topic}-value") == [1] and client.get_versions(money_proto) == [1]
