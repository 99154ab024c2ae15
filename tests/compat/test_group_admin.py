"""Listing and describing consumer groups, with lag, through each admin API and the Java tool.

A group with one live member has committed offsets 4, 6 and 10 on three
partitions that hold 10 records each, so its lag is 6, 4 and 0. Every
admin client must list the group, describe it as Stable with that member
and its assignment, and report those offsets; `kafka-consumer-groups
--describe` must print the same lag. Once the member leaves, the group is
Empty and keeps its offsets; the Java tool can then reset and delete it.
"""

from __future__ import annotations

import threading

import compat_helpers as ch
import pytest
from admin_clients import JavaAdmin, close_admin, open_admin
from compat_helpers import client_params, require_client

from tinystream.testing.waiting import wait_until

pytestmark = pytest.mark.compat

COMMITTED = {0: 4, 1: 6, 2: 10}
PER_PARTITION = 10


class LiveMember:
    """A confluent-kafka group member that commits COMMITTED once assigned and keeps polling."""

    def __init__(self, bootstrap: str, topic: str, group: str):
        from confluent_kafka import Consumer

        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "compat-live",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "partition.assignment.strategy": "range"})
        self.assigned = threading.Event()
        self.stopping = threading.Event()
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        try:
            self.consumer.subscribe([self.topic], on_assign=lambda c, parts: None)
            while not self.stopping.is_set():
                self.consumer.poll(0.2)
                if not self.assigned.is_set() and len(self.consumer.assignment()) == len(COMMITTED):
                    self.consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in COMMITTED.items()],
                                         asynchronous=False)
                    self.assigned.set()
        except Exception as exc:
            self.error = exc
            self.assigned.set()
        finally:
            self.consumer.close()

    def __enter__(self) -> LiveMember:
        self.thread.start()
        assert self.assigned.wait(30), "member never got its assignment"
        assert self.error is None, self.error
        return self

    def __exit__(self, *exc_info) -> None:
        self.stopping.set()
        self.thread.join(20)


def _setup(bootstrap: str, new_topic) -> str:
    topic = new_topic(partitions=3)
    records = [ch.Rec(value=f"g-{p}-{i}".encode(), partition=p) for p in range(3) for i in range(PER_PARTITION)]
    ch.produce("confluent", bootstrap, topic, records)
    return topic


@pytest.mark.parametrize("client", client_params(("confluent", "kafka-python", "aiokafka", "java")))
def test_list_and_describe_group_with_lag(client, bootstrap, new_topic):
    require_client(client)
    topic = _setup(bootstrap, new_topic)
    group = ch.unique_name(f"compat-admin-{client}")
    admin = open_admin(client, bootstrap)
    try:
        with LiveMember(bootstrap, topic, group):
            assert group in wait_until(lambda: group in admin.list_groups() and admin.list_groups(),
                                       timeout=15, interval=0.3, what=f"{group} listed"), group
            described = wait_until(lambda: (d := admin.describe_group(group))["state"] == "STABLE" and d,
                                   timeout=15, interval=0.3, what=lambda: f"{group} Stable: {admin.describe_group(group)}")
            assert described, admin.describe_group(group)
            assert described["protocol"] == "range", described
            (member,) = described["members"]
            assert member["client_id"] == "compat-live", member
            if member["partitions"] is not None:  # aiokafka leaves assignments undecoded
                assert member["partitions"] == [0, 1, 2], member
            assert admin.group_offsets(group, topic) == COMMITTED
            highs = {p: high for p, (_, high) in ch.watermarks(bootstrap, topic).items()}
            lag = {p: highs[p] - COMMITTED[p] for p in COMMITTED}
            assert lag == {0: 6, 1: 4, 2: 0}
        # The member left: the group is Empty and keeps its offsets.
        state = wait_until(lambda: admin.describe_group(group)["state"] == "EMPTY",
                           timeout=15, interval=0.3, what=lambda: f"{group} Empty: {admin.describe_group(group)}")
        assert state, admin.describe_group(group)
        assert admin.group_offsets(group, topic) == COMMITTED
    finally:
        close_admin(admin)


@pytest.mark.slow
def test_java_consumer_groups_tool_lag_reset_delete(bootstrap, new_topic):
    """kafka-consumer-groups: --describe prints LAG; --reset-offsets works on an Empty group; --delete."""
    require_client("java")
    topic = _setup(bootstrap, new_topic)
    group = ch.unique_name("compat-java-tool")
    tool = JavaAdmin(bootstrap)
    with LiveMember(bootstrap, topic, group):
        rows = tool.describe_offsets(group)
        by_partition = {int(r["PARTITION"]): r for r in rows if r["TOPIC"] == topic}
        assert {p: int(r["LAG"]) for p, r in by_partition.items()} == {0: 6, 1: 4, 2: 0}, rows
        assert {p: int(r["LOG-END-OFFSET"]) for p, r in by_partition.items()} == {0: 10, 1: 10, 2: 10}
        assert all(r["CONSUMER-ID"] != "-" for r in by_partition.values()), rows
    wait_until(lambda: tool.describe_group(group)["state"] == "EMPTY", timeout=15, interval=0.3, what=f"{group} Empty")

    tool.groups(["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"])
    assert tool.group_offsets(group, topic) == {0: 0, 1: 0, 2: 0}
    tool.groups(["--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "7", "--execute"])
    assert tool.group_offsets(group, topic) == {0: 0, 1: 7, 2: 0}
    tool.groups(["--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute"])
    assert tool.group_offsets(group, topic) == {0: 10, 1: 10, 2: 10}

    tool.delete_group(group)
    wait_until(lambda: group not in tool.list_groups(), timeout=15, interval=0.3, what=f"{group} deleted")
