"""Two registries on one `_schemas` topic, registering at once: ids stay unique and both end with the same state."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tinystream.testing.waiting import wait_until

PER_INSTANCE = 15  # on this machine ~12 of the 30 registrations lost an id race and were planned again


def _schema(owner: str, i: int) -> str:
    return json.dumps({"type": "record", "name": f"{owner}{i}", "fields": [{"name": "a", "type": "int"}]})


def register_at_once(url_a: str, url_b: str, *, count: int, subject: Callable[[str, int], str]) -> dict[str, int]:
    """Owners A and B each register `count` schemas, A through `url_a` and B through `url_b`, in two threads at
    once; {schema text: id answered}. Any client error fails the test."""
    got: dict[str, int] = {}
    errors: list[BaseException] = []

    def register(owner: str, url: str) -> None:
        client = SchemaRegistryClient({"url": url})
        try:
            for i in range(count):
                got[_schema(owner, i)] = client.register_schema(subject(owner, i), Schema(_schema(owner, i), "AVRO"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=register, args=args) for args in (("A", url_a), ("B", url_b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    return got


def test_concurrent_registrations_on_two_instances_race_for_ids_and_agree(start_registry):
    first = start_registry()
    second = start_registry(topic=first.options.topic)
    got = register_at_once(first.url, second.url, count=PER_INSTANCE, subject=lambda owner, i: f"{owner}-{i}")
    assert len(got) == 2 * PER_INSTANCE and len(set(got.values())) == 2 * PER_INSTANCE  # one id per schema

    def same_state() -> bool:
        a, b = first.server.state, second.server.state
        return a.schemas == b.schemas and a.subjects == b.subjects
    wait_until(same_state, what="both instances to hold the same state")
    for text, schema_id in got.items():  # every id answered names the schema that was registered
        for registry in (first, second):
            assert json.loads(registry.server.state.schemas[schema_id].text) == json.loads(text)


def test_concurrent_registrations_into_one_subject_keep_every_id_a_version(start_registry):
    first = start_registry()
    second = start_registry(topic=first.options.topic)
    SchemaRegistryClient({"url": first.url}).set_compatibility("shared", "NONE")
    got = register_at_once(first.url, second.url, count=10, subject=lambda owner, i: "shared")
    wait_until(lambda: first.server.state.subjects == second.server.state.subjects, what="the same subjects")
    versions = first.server.state.versions("shared")
    assert [v.version for v in versions] == list(range(1, 21))
    assert sorted(v.schema_id for v in versions) == sorted(got.values())  # no answered id lost its version
