"""A real local cluster (controller + 3 broker processes) with the dashboard, produced to and consumed from.

Module-independent session fixture: N records to partition 0 of a 2-partition
topic, then a consumer in group GROUP reads COMMITTED of them, commits twice (FIRST_COMMIT,
then COMMITTED) and leaves the group.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tinystream.dev.cluster import LocalCluster

TOPIC = "dash-orders"
GROUP = "dash-readers"
N = 120
FIRST_COMMIT = 20  # committed twice: the second commit advances the group by COMMITTED - FIRST_COMMIT records
COMMITTED = 45


@dataclass(frozen=True)
class Cluster:
    cluster: LocalCluster
    dashboard: str


def get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
        return json.loads(response.read())


def _produce_and_consume(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=3)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(N):
        producer.send(TOPIC, value=f"order-{i}".encode(), partition=0)
    producer.flush()
    producer.close()
    _read_and_commit(bootstrap)


def _read_and_commit(bootstrap: str) -> None:
    """A group member reads COMMITTED records, commits twice and leaves. librdkafka here: kafka-python's
    group member was seen three times under CI load to join and then receive nothing for 30 s, silently
    (here and in tests/compat), which is chased on its own; this fixture is about the dashboard."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + 60
    try:
        while seen < COMMITTED and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=COMMITTED - seen, timeout=0.5):
                assert message.error() is None, message.error()
                seen += 1
        assert seen == COMMITTED, f"{seen} of {COMMITTED} records in 60 s; assignment {consumer.assignment()}"
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, FIRST_COMMIT)], asynchronous=False)
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED)], asynchronous=False)
    finally:
        consumer.close()


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("dashboard-cluster")
    cluster = LocalCluster(brokers=3, data_dir=root / "data", first_port=0, echo=lambda _: None)
    cluster.open(dashboard=True)
    try:
        assert cluster.dashboard_url
        _produce_and_consume(cluster.bootstrap)
        yield Cluster(cluster=cluster, dashboard=cluster.dashboard_url)
    finally:
        cluster.close()
