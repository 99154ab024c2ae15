"""remember_rejoins: a kafka-python leader whose own rejoin outlives a poll still finishes it.

The leader rejoins because its topic gained partitions (its metadata snapshot changed, no rejoin was
requested). `poll(timeout_ms=0)` gives up at once and leaves the join running; the join finishes
while no poll is waiting for it. Without `remember_rejoins`, kafka-python 3.0.12 then forgets it: the
member never learns the new assignment (see tinystream/testing/kafka_python.py).
"""

from __future__ import annotations

import uuid

import pytest

from tinystream.testing.broker import BrokerThread, test_settings
from tinystream.testing.kafka_python import remember_rejoins
from tinystream.testing.waiting import wait_until


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("rejoins") / "data")) as b:
        yield b


def test_a_rejoin_left_running_by_a_poll_is_finished_by_the_next(running):
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    from kafka import KafkaConsumer

    topic, group = f"rejoin-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
    consumer = KafkaConsumer(topic, bootstrap_servers=running.bootstrap, group_id=group, enable_auto_commit=False,
                             metadata_max_age_ms=200, heartbeat_interval_ms=500, session_timeout_ms=10000)
    remember_rejoins(consumer)
    coordinator = consumer._coordinator  # the join in flight is what this test is about

    def assigned() -> list[int]:
        consumer.poll(timeout_ms=100)
        return sorted(tp.partition for tp in consumer.assignment())

    try:
        wait_until(lambda: assigned() == [0, 1], timeout=30, what="the first assignment")
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(20)
        # A poll that starts the rejoin (when the new metadata is in) and returns before its answers.
        wait_until(lambda: consumer.poll(timeout_ms=0) == {} and coordinator._join_task is not None, timeout=30,
                   what="a poll that leaves a rejoin running")
        wait_until(lambda: coordinator._join_task.is_done, timeout=30, what="the rejoin's answers")
        wait_until(lambda: assigned() == [0, 1, 2, 3], timeout=30,
                   what=lambda: f"the new partitions to be assigned (state {coordinator.state})")
    finally:
        consumer.close()
