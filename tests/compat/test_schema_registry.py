"""The schema registry on every compat target, and beside a peer registry: Karapace (Aiven's, Python).

Against Apache Kafka (TINYSTREAM_COMPAT_TARGET=kafka) this proves the store
uses only what any Kafka broker offers; against ours, that our broker serves
what the registry needs (a compacted topic, acks=all, reading to the end).
Each test runs once per registry, [tinystream] and [karapace], on the same
broker with the same requests (confluent-kafka's SchemaRegistryClient and
serializers) and the same assertions: Karapace keeping its schemas in our
broker is itself a compatibility proof, and where both answer alike the
answer is not ours alone. Karapace is not on PyPI; where it is missing
(tinystream.testing.peers.karapace says how to point at one) its cases skip.
"""

from __future__ import annotations

import json
import uuid

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tinystream.registry.app import RegistryOptions
from tinystream.testing.consumers import serialized_roundtrip
from tinystream.testing.peers.errors import PeerUnavailable
from tinystream.testing.peers.karapace import start_karapace
from tinystream.testing.registry import RegistryThread

pytestmark = pytest.mark.compat

V1 = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"}]}
V2 = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"},
                                                    {"name": "ms", "type": "long", "default": 0}]}
BAD = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"},
                                                     {"name": "user", "type": "string"}]}  # new field, no default


class _Ours:
    """Our registry on its own thread, shaped like Karapace's RunningRegistry (url, stop)."""

    def __init__(self, bootstrap: str, topic: str):
        self.thread = RegistryThread(RegistryOptions(bootstrap=bootstrap, port=0, topic=topic))
        self.url = self.thread.start()

    def stop(self) -> None:
        self.thread.stop()


@pytest.fixture(params=["tinystream", "karapace"])
def start_registry(request, bootstrap):
    """start_registry(topic) -> a running registry (.url) of this case's kind on the compat target; stopped after."""
    started: list = []

    def start(topic: str):
        if request.param == "karapace":
            try:
                registry = start_karapace(bootstrap, topic=topic)
            except PeerUnavailable as exc:
                pytest.skip(str(exc))
        else:
            registry = _Ours(bootstrap, topic)
        started.append(registry)
        return registry

    start.kind = request.param
    yield start
    for registry in started:
        registry.stop()


def _unique_topic() -> str:
    return f"_schemas_{uuid.uuid4().hex[:8]}"


def _error(call) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as caught:
        call()
    return caught.value


def test_registry_keeps_its_schemas_in_a_compacted_topic_and_rebuilds_from_it(bootstrap, start_registry):
    topic = _unique_topic()
    registry = start_registry(topic)
    client = SchemaRegistryClient({"url": registry.url})
    first = client.register_schema("clicks-value", Schema(json.dumps(V1), "AVRO"))
    second = client.register_schema("clicks-value", Schema(json.dumps(V2), "AVRO"))
    client.delete_version("clicks-value", 1)
    client.delete_version("clicks-value", 1, permanent=True)
    client.set_compatibility("clicks-value", "FULL_TRANSITIVE")
    registry.stop()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    configs = next(iter(described.values())).result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"

    again = start_registry(topic)
    fresh = SchemaRegistryClient({"url": again.url})
    assert fresh.get_versions("clicks-value") == [2]
    assert fresh.get_latest_version("clicks-value").schema_id == second != first
    assert fresh.get_compatibility("clicks-value") == "FULL_TRANSITIVE"
    assert _error(lambda: fresh.get_version("clicks-value", 1)).error_code == 40402


def test_same_requests_same_answers(bootstrap, start_registry):
    """Register through a serializer, look up by id and version, evolve, refuse with 409, the 404 codes,
    compatibility config at both levels, and deletes: what a client relies on, asked of each registry."""
    registry = start_registry(_unique_topic())
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"

    # register (auto, by the serializer) and read back through the broker
    v1 = AvroSerializer(client, json.dumps(V1))
    assert serialized_roundtrip(bootstrap, topic, v1, AvroDeserializer(client), [{"page": "/a"}]) == [{"page": "/a"}]
    first = client.get_latest_version(subject)
    assert first.version == 1 and first.subject == subject
    assert json.loads(client.get_schema(first.schema_id).schema_str) == V1  # look up by id
    assert client.get_version(subject, 1).schema_id == first.schema_id
    again = client.lookup_schema(subject, Schema(json.dumps(V1), "AVRO"))  # POST /subjects/{subject}
    assert (again.schema_id, again.version) == (first.schema_id, 1)
    assert client.register_schema(subject, Schema(json.dumps(V1), "AVRO")) == first.schema_id  # idempotent

    # evolve (BACKWARD, the default): a field with a default is taken, one without is refused
    second = client.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
    assert second != first.schema_id and client.get_versions(subject) == [1, 2]
    assert client.test_compatibility(subject, Schema(json.dumps(BAD), "AVRO")) is False
    refused = _error(lambda: client.register_schema(subject, Schema(json.dumps(BAD), "AVRO")))
    assert refused.http_status_code == 409 and refused.error_code == 409
    assert client.get_versions(subject) == [1, 2]

    # the not-found codes Confluent documents: 40401 subject, 40402 version, 40403 schema id
    assert _error(lambda: client.get_versions(f"missing-{topic}")).error_code == 40401
    assert _error(lambda: client.get_version(subject, 9)).error_code == 40402
    assert _error(lambda: client.get_schema(999_999)).error_code == 40403
    unknown = _error(lambda: client.lookup_schema(subject, Schema(json.dumps({"type": "int"}), "AVRO")))
    assert unknown.http_status_code == 404 and unknown.error_code == 40403  # a schema the subject lacks

    # compatibility: global default, a subject's own level, then back to the global one
    assert client.get_compatibility() == "BACKWARD"
    assert client.set_compatibility(subject, "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    assert client.register_schema(subject, Schema(json.dumps(BAD), "AVRO")) not in (first.schema_id, second)
    assert _error(lambda: client.set_compatibility(subject, "SIDEWAYS")).error_code == 42203
    client.delete_config(subject)
    assert _error(lambda: client.get_compatibility(subject)).error_code == 40408  # no level of its own now

    # deletes: one version (soft), the subject (soft, then hard); ids stay readable
    assert client.delete_version(subject, 3) == 3
    assert client.get_versions(subject) == [1, 2]
    assert client.delete_subject(subject) == [1, 2]
    assert subject not in client.get_subjects()
    assert _error(lambda: client.get_versions(subject)).error_code == 40401
    assert json.loads(client.get_schema(first.schema_id).schema_str) == V1
    assert client.delete_subject(subject, permanent=True) == [1, 2, 3]  # with the version deleted before
    assert _error(lambda: client.delete_subject(subject)).error_code == 40401


def test_where_the_two_registries_answer_differently(start_registry):
    """Each known difference, asserted per registry so a change on either side shows; the comments say
    which answer Confluent's registry gives where we know it (Karapace 3.16.0 was the peer measured)."""
    registry = start_registry(_unique_topic())
    client = SchemaRegistryClient({"url": registry.url})
    subject = f"diff-{uuid.uuid4().hex[:8]}-value"
    karapace = start_registry.kind == "karapace"
    schema_id = client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    assert sorted(client.get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"]  # the order differs, not the set

    # The text served for an id: ours keeps the registered text (minus whitespace), like Confluent's
    # canonical form keeps the declared order; Karapace sorts the keys. Equal as JSON either way.
    text = client.get_schema(schema_id).schema_str
    assert json.loads(text) == V1
    assert text.startswith('{"fields"' if karapace else '{"type"')

    # Confluent documents GET /schemas/ids/{id}/subjects and /contexts; Karapace 3.16 has neither route (404).
    if karapace:
        assert _error(lambda: client.get_subjects_by_schema_id(schema_id)).http_status_code == 404
        assert _error(lambda: client.get_contexts()).http_status_code == 404
    else:
        assert client.get_subjects_by_schema_id(schema_id) == [subject]
        assert client.get_contexts() == ["."]

    # A record without "fields" is not valid Avro (Avro's Java parser, and so Confluent, refuses it): 42201
    # from both (ours took it as an empty record until this suite compared it with Karapace).
    fieldless = Schema(json.dumps({"type": "record", "name": "X"}), "AVRO")
    assert _error(lambda: client.register_schema(subject, fieldless)).error_code == 42201

    # Soft-deleting a version that is already soft-deleted: 40406 from both, as from Confluent's (ours
    # answered 40401 until this suite compared it with Karapace).
    client.delete_version(subject, 1)
    assert _error(lambda: client.delete_version(subject, 1)).error_code == 40406

    # Registering the same schema again after its only version was deleted for good: Karapace gives the
    # old id back, ours a new one (Confluent's answer not checked here).
    client.delete_version(subject, 1, permanent=True)
    client.clear_caches()  # the client would answer the old id from its own cache
    again = client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    assert (again == schema_id) is karapace
