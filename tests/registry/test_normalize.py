"""normalize=true: semantically equal schemas get one id (pure cases, then confluent-kafka's client against us)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tinystream.registry.model import SchemaType
from tinystream.registry.normalize import normalize

AVRO_A = '{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "int"}}, {"name": "b", "type": "string"}]}'
AVRO_B = '{"fields": [{"type": "int", "name": "a"}, {"name": "b", "type": "string"}],\n "name": "R", "type": "record"}'
AVRO_SWAPPED = '{"type": "record", "name": "R", "fields": [{"name": "b", "type": "string"}, {"name": "a", "type": "int"}]}'
JSON_A = '{"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "integer"}}}'
JSON_B = '{"properties": {"y": {"type": "integer"}, "x": {"type": "string"}}, "type": "object"}'
PROTO_A = 'syntax = "proto3";\npackage p;\n\nmessage M {\n  string name = 1; // the name\n  int64 id = 2;\n}\n'
PROTO_B = 'syntax="proto3"; package p;\n/* a message */ message M { string name=1;\n\n   int64   id = 2; }'
PROTO_OTHER = 'syntax = "proto3";\npackage p;\nmessage M {\n  string name = 1;\n  int64 id = 3;\n}\n'


@pytest.mark.parametrize(("a", "b", "kind"), [
    (AVRO_A, AVRO_B, SchemaType.AVRO),
    (JSON_A, JSON_B, SchemaType.JSON),
    (PROTO_A, PROTO_B, SchemaType.PROTOBUF),
])
def test_equal_schemas_normalize_to_one_text(a, b, kind):
    assert a != b and normalize(a, kind) == normalize(b, kind)


@pytest.mark.parametrize(("a", "b", "kind"), [
    (AVRO_A, AVRO_SWAPPED, SchemaType.AVRO),  # field order is meaning (the binary layout)
    (PROTO_A, PROTO_OTHER, SchemaType.PROTOBUF),
    ('{"type": "string", "default": {"b": 1, "a": 2}}', '{"type": "string", "default": {"b": 1, "a": 3}}', SchemaType.JSON),
])
def test_different_schemas_stay_different(a, b, kind):
    assert normalize(a, kind) != normalize(b, kind)


def test_a_proto_string_keeps_its_spaces_and_comment_marks():
    text = 'syntax = "proto3";\nmessage M {\n  string s = 1 [json_name = "a  // b"];\n}\n'
    assert '"a  // b"' in normalize(text, SchemaType.PROTOBUF)


def test_normalized_avro_is_still_avro():
    fastavro = pytest.importorskip("fastavro")
    fastavro.parse_schema(json.loads(normalize(AVRO_B, SchemaType.AVRO)))


def test_the_client_gets_one_id_with_normalize(start_registry):
    pytest.importorskip("fastavro")
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    registry = start_registry()
    client = SchemaRegistryClient({"url": registry.url})
    first = client.register_schema("n-value", Schema(AVRO_A, "AVRO"), normalize_schemas=True)
    assert client.register_schema("n-value", Schema(AVRO_B, "AVRO"), normalize_schemas=True) == first
    assert client.lookup_schema("n-value", Schema(AVRO_B, "AVRO"), normalize_schemas=True).schema_id == first
    assert client.get_versions("n-value") == [1]
    json_id = client.register_schema("j-value", Schema(JSON_A, "JSON"), normalize_schemas=True)
    assert client.register_schema("j-value", Schema(JSON_B, "JSON"), normalize_schemas=True) == json_id
    proto_id = client.register_schema("p-value", Schema(PROTO_A, "PROTOBUF"), normalize_schemas=True)
    assert client.register_schema("p-value", Schema(PROTO_B, "PROTOBUF"), normalize_schemas=True) == proto_id
    # without normalize, the other key order is another schema (and a second version)
    client.set_compatibility("plain-value", "NONE")
    plain = client.register_schema("plain-value", Schema(AVRO_A, "AVRO"))
    assert client.register_schema("plain-value", Schema(AVRO_B, "AVRO")) != plain


def _config(url: str, method: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_the_subject_config_normalizes_without_the_flag(start_registry):
    """The config key "normalize" (the client's ServerConfig has no field for it: set over plain HTTP)."""
    pytest.importorskip("fastavro")
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    registry = start_registry()
    assert _config(f"{registry.url}/config/c-value", "PUT", {"normalize": True}) == {"normalize": True}
    assert _config(f"{registry.url}/config/c-value", "GET") == {"compatibilityLevel": "BACKWARD", "normalize": True}
    client = SchemaRegistryClient({"url": registry.url})
    first = client.register_schema("c-value", Schema(AVRO_A, "AVRO"))
    assert client.register_schema("c-value", Schema(AVRO_B, "AVRO")) == first
    assert client.get_versions("c-value") == [1]
    # a level set later keeps "normalize"; deleting the subject's config drops both
    assert _config(f"{registry.url}/config/c-value", "PUT", {"compatibility": "FULL"}) == {
        "compatibility": "FULL", "normalize": True}
    _config(f"{registry.url}/config/c-value", "DELETE")
    assert _config(f"{registry.url}/config/c-value?defaultToGlobal=true", "GET") == {"compatibilityLevel": "BACKWARD"}


def test_the_normalize_key_is_rebuilt_from_the_records():
    from tinystream.registry.state import RegistryState
    writer = RegistryState()
    records = writer.plan_config("s", None, True) + writer.plan_config(None, "FULL", False)
    reader = RegistryState()
    assert all(reader.apply(r) for r in records)
    assert reader.normalizes("s") and not reader.normalizes("other")
    assert reader.compatibility("s").value == "FULL" and "s" not in reader.configs
