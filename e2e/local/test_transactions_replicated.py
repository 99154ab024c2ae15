"""Transactions on a local 3-broker cluster (controller + brokers as processes), RF 3, min ISR 2.

confluent-kafka commits and aborts across six partitions led by different
brokers (markers reach remote leaders by WriteTxnMarkers), then the broker
leading the transactional id's __transaction_state partition is SIGKILLed:
the new leader loads the coordinator state at a new coordinator epoch and
the next transaction commits. A read_committed consumer sees both committed
transactions exactly once and none of the aborted records. A hand-made
transactional batch for a partition the transaction does not hold, sent to a
leader that is not the coordinator, is refused after that leader asks the
coordinator (KIP-890 verification across brokers). (~40 s: slow.)
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from pathlib import Path

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.coordinator import partition_for_group
from tinystream.broker.protocol.client import KafkaClient
from tinystream.dev.cluster import ClusterError, LocalCluster
from tinystream.testing.broker import now_batch, produce_request, request

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


def test_a_leader_verifies_with_a_coordinator_on_another_broker(cluster: LocalCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = f"verify-{uuid.uuid4().hex[:6]}"
    for future in admin.create_topics([NewTopic(topic, 3, 3)]).values():
        future.result()
    time.sleep(1)
    txn_id = f"tx-{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        any_broker = await KafkaClient.connect(*cluster.brokers[0].bootstrap.rsplit(":", 1))
        found = await any_broker.request(request(10, 3, key=txn_id, key_type=1))
        assert found.error_code == ErrorCode.none
        coordinator = await KafkaClient.connect(found.host, found.port)
        for _ in range(100):
            init = await coordinator.request(request(22, 4, transactional_id=txn_id,
                                                     transaction_timeout=datetime.timedelta(seconds=60),
                                                     producer_id=-1, producer_epoch=-1))
            if init.error_code == ErrorCode.none:
                break
            await asyncio.sleep(0.1)
        assert init.error_code == ErrorCode.none
        meta = admin.list_topics(topic, timeout=10).topics[topic].partitions
        remote = [p for p, m in meta.items() if m.leader != found.node_id]
        assert remote, "every partition is led by the coordinator's broker"
        partition = remote[0]
        leader = cluster.broker(meta[partition].leader)
        client = await KafkaClient.connect(*leader.bootstrap.rsplit(":", 1))
        batch = now_batch([(None, b"x")], producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                          base_sequence=0, transactional=True)
        answer = await client.request(produce_request(topic, partition, batch, acks=-1, transactional_id=txn_id))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.invalid_txn_state
        for c in (any_broker, coordinator, client):
            await c.close()

    asyncio.run(scenario())
