"""The schema registry on every compat target: its `_schemas` topic, compacted, rebuilt after a restart.

Against Apache Kafka (TINYSTREAM_COMPAT_TARGET=kafka) this proves the store
uses only what any Kafka broker offers; against ours, that our broker serves
what the registry needs (a compacted topic, acks=all, reading to the end).
"""

from __future__ import annotations

import json
import uuid

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tinystream.registry.app import RegistryOptions
from tinystream.testing.registry import RegistryThread

pytestmark = pytest.mark.compat

V1 = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"}]}
V2 = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"},
                                                    {"name": "ms", "type": "long", "default": 0}]}


def test_registry_keeps_its_schemas_in_a_compacted_topic_and_rebuilds_from_it(bootstrap):
    topic = f"_schemas_{uuid.uuid4().hex[:8]}"
    options = RegistryOptions(bootstrap=bootstrap, port=0, topic=topic)
    with RegistryThread(options) as registry:
        client = SchemaRegistryClient({"url": registry.url})
        first = client.register_schema("clicks-value", Schema(json.dumps(V1), "AVRO"))
        second = client.register_schema("clicks-value", Schema(json.dumps(V2), "AVRO"))
        client.delete_version("clicks-value", 1)
        client.delete_version("clicks-value", 1, permanent=True)
        client.set_compatibility("clicks-value", "FULL_TRANSITIVE")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    configs = next(iter(described.values())).result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"

    with RegistryThread(options) as again:
        fresh = SchemaRegistryClient({"url": again.url})
        assert fresh.get_versions("clicks-value") == [2]
        assert fresh.get_latest_version("clicks-value").schema_id == second != first
        assert fresh.get_compatibility("clicks-value") == "FULL_TRANSITIVE"
        with pytest.raises(Exception) as caught:
            fresh.get_version("clicks-value", 1)
        assert getattr(caught.value, "error_code", None) == 40402
