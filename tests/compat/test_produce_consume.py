"""Keyed and unkeyed records with headers, through every client.

Each client produces a mixed set (keyed and unkeyed, zero, one or two
headers) and reads it back; the reference reader checks the stored bytes.
A cross check has records produced by one client read by all the others.
"""

from __future__ import annotations

import compat_helpers as ch
import pytest
from compat_helpers import client_params, require_client

pytestmark = pytest.mark.compat

N = 60


@pytest.mark.parametrize("client", client_params())
def test_keyed_unkeyed_headers_roundtrip(client, bootstrap, new_topic):
    require_client(client)
    topic = new_topic(partitions=3)
    records = ch.make_records(N, prefix=client)
    records = ch.produce(client, bootstrap, topic, records)

    stored = ch.read_all(bootstrap, topic, min_count=N)
    ch.assert_records_match(records, stored, context=f"{client} -> reference")

    got = ch.consume(client, bootstrap, topic, N)
    ch.assert_records_match(records, got, context=f"reference -> {client}")


@pytest.mark.parametrize("consumer", client_params())
def test_cross_client_read(consumer, bootstrap, new_topic):
    """Records from each Python client, read by `consumer`."""
    require_client(consumer)
    topic = new_topic(partitions=2)
    records: list[ch.Rec] = []
    for producer in ch.PY_CLIENTS:
        batch = ch.make_records(10, prefix=f"from-{producer}")
        records += ch.produce(producer, bootstrap, topic, batch)
    got = ch.consume(consumer, bootstrap, topic, len(records))
    ch.assert_records_match(records, got, context=f"python clients -> {consumer}",
                            one_partitioner=False)


def test_empty_and_binary_values(bootstrap, new_topic):
    """Null value (tombstone), empty value, empty key and binary bytes survive (Python clients)."""
    topic = new_topic()
    records = [
        ch.Rec(value=b"", key=b"empty-value"),
        ch.Rec(value=bytes(range(256)), key=b"\x00\xff"),
        ch.Rec(value=b"x", key=b""),
        ch.Rec(value=b"bin-header", headers=(("h", bytes(range(10))), ("h", b"dup-name"))),
    ]
    for producer in ch.PY_CLIENTS:
        ch.produce(producer, bootstrap, topic, records)
    stored = ch.read_all(bootstrap, topic, min_count=len(records) * 3)
    ch.assert_records_match(records * 3, stored, context="edge values", one_partitioner=False)
    for consumer in ch.PY_CLIENTS:
        ch.assert_records_match(records * 3, ch.consume(consumer, bootstrap, topic, len(records) * 3),
                                context=f"edge values -> {consumer}", one_partitioner=False)


def test_tombstone(bootstrap, new_topic):
    from confluent_kafka import Producer

    topic = new_topic()
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"gone", value=None)
    assert producer.flush(20) == 0
    (got,) = ch.read_all(bootstrap, topic, min_count=1)
    assert got.key == b"gone" and got.value is None
    for consumer in ("kafka-python", "aiokafka"):
        (got,) = ch.consume(consumer, bootstrap, topic, 1)
        assert got.key == b"gone" and got.value is None, consumer
