"""Transactions on a local 3-broker cluster (controller + brokers as processes), RF 3, min ISR 2.

confluent-kafka commits and aborts across six partitions led by different
brokers (markers reach remote leaders by WriteTxnMarkers), then the broker
leading the transactional id's __transaction_state partition is SIGKILLed:
the new leader loads the coordinator state at a new coordinator epoch and
the next transaction commits. A read_committed consumer sees both committed
transactions exactly once and none of the aborted records. (~40 s: slow.)
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tinystream.broker.groups.coordinator import partition_for_group
from tinystream.dev.cluster import ClusterError, LocalCluster

pytestmark = [pytest.mark.slow]

TXN_PARTITIONS = 3
TOPIC_PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path: Path):
    c = LocalCluster(brokers=3, data_dir=tmp_path / "data", log_dir=tmp_path / "logs", first_port=0,
                     overrides=[f"transaction.state.log.num.partitions={TXN_PARTITIONS}",
                                "offsets.topic.num.partitions=3", "broker.heartbeat.interval.ms=500"],
                     echo=lambda _line: None)
    try:
        c.open()
    except ClusterError as exc:
        pytest.fail(f"local cluster did not start: {exc} (logs: {c.log_dir})")
    try:
        yield c
    finally:
        c.close()


def test_commit_abort_and_coordinator_failover(cluster: LocalCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"txn-{uuid.uuid4().hex[:6]}"
    for future in admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 3,
                                                config={"min.insync.replicas": "2"})]).values():
        future.result()
    txn_id = f"tx-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "acks": "all"})
    producer.init_transactions(60)

    def transaction(prefix: str, commit: bool) -> None:
        producer.begin_transaction()
        for i in range(30):
            producer.produce(topic, value=f"{prefix}{i}".encode(), partition=i % TOPIC_PARTITIONS)
        assert producer.flush(30) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(90)

    transaction("c", True)
    transaction("a", False)
    state = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"].partitions
    coordinator = state[partition_for_group(txn_id, TXN_PARTITIONS)].leader
    cluster.broker(coordinator).kill()
    transaction("d", True)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{txn_id}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(TOPIC_PARTITIONS)])
        got: list[str] = []
        deadline, quiet = time.time() + 60, None
        while time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value().decode())
                quiet = None
            elif len(got) >= 60:
                quiet = quiet or time.time() + 3
                if time.time() > quiet:
                    break
    finally:
        consumer.close()
    assert sorted(got) == sorted([f"c{i}" for i in range(30)] + [f"d{i}" for i in range(30)])
