"""Reassignments under an acks=all writer lose no acknowledged record: a controller and 4 brokers as processes
(tinystream/dev/cluster.py), a topic of RF 2 with min.insync.replicas=1, confluent-kafka writing all along,
kafka-python's AlterPartitionReassignments moving every partition {0,1} -> {2,3} -> {0,1} several times.

The regression it guards (commit c8b2eef): a leader that had asked the controller to add reassignment
targets to the ISR kept acknowledging records on its committed ISR alone; the controller committed the
expanded ISR and at once completed the move, electing an added replica that lacked those records. The HW
must wait for the maximal ISR (broker/replication/partition.py `maximal_isr`) while the AlterPartition is
unanswered. Unit level: tests/broker/replication/test_partition.py.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tinystream.dev.cluster import LocalCluster
from tinystream.testing.waiting import wait_until

TOPIC = "moving"
PARTITIONS = 6
ROUNDS = 6  # moves: {0,1} -> {2,3} -> {0,1} ... every partition each time
PAIRS = ([2, 3], [0, 1])

pytestmark = pytest.mark.slow  # a 5-process cluster and six full moves under a writer


class Writer(threading.Thread):
    """confluent-kafka, acks=all, writing distinct values round-robin over the partitions until stopped;
    keeps (partition, value) of every record the cluster acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer  # noqa: PLC0415 - the test extra's client

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                                  "log_level": 0})
        self.acked: set[tuple[int, bytes]] = set()
        self.failed = 0
        self.stop = threading.Event()

    def _delivered(self, err: Any, msg: Any) -> None:  # noqa: ANN401 - confluent's KafkaError, Message
        if err is None:
            self.acked.add((msg.partition(), msg.value()))
        else:
            self.failed += 1

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, f"{n:08d}".encode(), partition=n % PARTITIONS,
                                      on_delivery=self._delivered)
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.001)
        self.producer.flush(60)


def _replicas(bootstrap: str) -> dict[int, list[int]]:
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    meta = client.list_topics(TOPIC, timeout=10)
    return {p.id: sorted(p.replicas) for p in meta.topics[TOPIC].partitions.values()}


def _move_all(admin: Any, bootstrap: str, target: list[int]) -> None:  # noqa: ANN401 - kafka-python's admin
    from kafka import TopicPartition  # noqa: PLC0415

    answer = admin.alter_partition_reassignments({TopicPartition(TOPIC, p): target for p in range(PARTITIONS)})
    assert all(err is None for err in answer.values()), answer
    wait_until(lambda: not admin.list_partition_reassignments()
               and _replicas(bootstrap) == dict.fromkeys(range(PARTITIONS), target),
               timeout=120, interval=0.2, what=f"every partition on {target}")


def _read_all(bootstrap: str) -> set[tuple[int, bytes]]:
    """Every record of every partition, from offset 0 up to its high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: PLC0415

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-back", "enable.auto.commit": False,
                         "log_level": 0})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS) if ends[p]])
    got: set[tuple[int, bytes]] = set()
    reached: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)

    def done() -> bool:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.add((msg.partition(), msg.value()))
            reached[msg.partition()] = msg.offset() + 1
        return all(reached[p] >= ends[p] for p in range(PARTITIONS))

    try:
        wait_until(done, timeout=120, interval=0, what=lambda: f"read up to {ends}, at {reached}")
    finally:
        consumer.close()
    return got


@pytest.mark.timeout(600)
def test_moves_between_broker_pairs_under_an_acks_all_writer_lose_no_acknowledged_record(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415
    from kafka import KafkaAdminClient  # noqa: PLC0415

    cluster = LocalCluster(brokers=4, data_dir=tmp_path / "data", first_port=0, echo=lambda _: None)
    bootstrap = cluster.open()
    writer: Writer | None = None
    try:
        topic = NewTopic(TOPIC, num_partitions=PARTITIONS, replica_assignment=[[0, 1]] * PARTITIONS,
                         config={"min.insync.replicas": "1"})
        creator = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        creator.create_topics([topic])[TOPIC].result(30)
        wait_until(lambda: _replicas(bootstrap) == dict.fromkeys(range(PARTITIONS), [0, 1]), timeout=30,
                   what="the topic on brokers 0 and 1")
        writer = Writer(bootstrap)
        writer.start()
        wait_until(lambda: len(writer.acked) >= 500, timeout=60, what="the writer under way")
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            for round_ in range(ROUNDS):
                _move_all(admin, bootstrap, PAIRS[round_ % 2])
        finally:
            admin.close()
        writer.stop.set()
        writer.join(90)
        assert not writer.is_alive()
        assert len(writer.acked) > 1000  # records were written all through the moves
        lost = writer.acked - _read_all(bootstrap)
        assert not lost, f"{len(lost)} of {len(writer.acked)} acknowledged records lost: {sorted(lost)[:10]}"
    finally:
        if writer is not None:
            writer.stop.set()
        cluster.close()
