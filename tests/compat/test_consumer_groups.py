"""A group of three members on six partitions: every record exactly once across rebalances.

Timeline (seconds): a producer writes N records over ~3 s while
    0.0  A joins          1.0  B joins          2.0  C joins
    3.5  A leaves         4.0  D joins
and the members drain the topic. Each member commits what it processed after
every poll and, on revocation, before it rejoins (group_members.py), so the
union of what they saw must be every record exactly once. The committed
offsets at the end must equal the high watermarks.

Run per client with each of its assignors, and with clients mixed in one
group (the leader, whichever client it is, assigns for all).
"""

from __future__ import annotations

import threading
import time

import compat_helpers as ch
import pytest
from group_members import MEMBER_CLASSES, Ledger

pytestmark = pytest.mark.compat

PARTITIONS = 6
N = 1200

# (label, assignor, clients of A, B, C, D, slow?) -- each case takes ~6 s; the
# default run keeps every assignor and every client at least once.
CASES = [
    ("confluent", "range", ("confluent",) * 4, False),
    ("confluent", "roundrobin", ("confluent",) * 4, True),
    ("confluent", "cooperative-sticky", ("confluent",) * 4, False),
    ("kafka-python", "range", ("kafka-python",) * 4, True),
    ("kafka-python", "roundrobin", ("kafka-python",) * 4, False),
    ("kafka-python", "cooperative-sticky", ("kafka-python",) * 4, False),
    ("aiokafka", "range", ("aiokafka",) * 4, False),
    ("aiokafka", "roundrobin", ("aiokafka",) * 4, True),
    ("mixed", "range", ("confluent", "kafka-python", "aiokafka", "confluent"), False),
    ("mixed", "roundrobin", ("kafka-python", "aiokafka", "confluent", "kafka-python"), True),
    ("mixed", "cooperative-sticky", ("confluent", "kafka-python", "kafka-python", "confluent"), False),
]


def _producer(bootstrap: str, topic: str, stop_after: float) -> threading.Thread:
    from confluent_kafka import Producer

    def run():
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        chunk = 40
        pause = stop_after / (N / chunk)
        for start in range(0, N, chunk):
            for i in range(start, min(N, start + chunk)):
                producer.produce(topic, value=f"rec-{i:06d}".encode(), partition=i % PARTITIONS)
            producer.poll(0)
            time.sleep(pause)
        assert producer.flush(30) == 0

    thread = threading.Thread(target=run, name="producer", daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(("label", "assignor", "clients"), [
    pytest.param(*c[:3], id=f"{c[0]}-{c[1]}", marks=[pytest.mark.slow] if c[3] else []) for c in CASES
])
def test_group_exactly_once_across_rebalances(label, assignor, clients, bootstrap, new_topic):
    topic = new_topic(partitions=PARTITIONS)
    group = ch.unique_name(f"compat-{label}-{assignor}")
    ledger = Ledger()

    def member(name: str, client: str):
        m = MEMBER_CLASSES[client](name, bootstrap=bootstrap, topic=topic, group=group,
                                   assignor=assignor, ledger=ledger)
        m.start()
        m.started.wait(30)
        return m

    a = member("A", clients[0])
    producer = _producer(bootstrap, topic, stop_after=3.0)
    time.sleep(1.0)
    b = member("B", clients[1])
    time.sleep(1.0)
    c = member("C", clients[2])
    time.sleep(1.5)
    a.stop()
    time.sleep(0.5)
    d = member("D", clients[3])
    producer.join(30)

    deadline = time.monotonic() + 45
    while ledger.unique_values() < N and time.monotonic() < deadline and not ledger.errors:
        time.sleep(0.2)
    settle = time.monotonic() + 15
    while not ledger.settled(["B", "C", "D"], PARTITIONS) and time.monotonic() < settle:
        time.sleep(0.1)
    settled = ledger.settled(["B", "C", "D"], PARTITIONS)
    time.sleep(1.0)  # let a late duplicate show up
    for m in (b, c, d):
        m.stop()

    context = f"{label}/{assignor}, notes {ledger.notes}, timeline:\n{ledger.timeline()}"
    assert settled, f"B, C and D never owned all {PARTITIONS} partitions exactly once\n{context}"
    assert not ledger.errors, f"member errors {ledger.errors}\n{context}"
    dups = ledger.duplicates()
    assert not dups, f"{len(dups)} records seen twice, e.g. {list(dups.items())[:3]}\n{context}"
    assert ledger.unique_values() == N, f"saw {ledger.unique_values()} of {N}\n{context}"
    assert {v for *_, v in ledger.seen} == {f"rec-{i:06d}".encode() for i in range(N)}

    # Everything processed was committed: committed offsets equal the high watermarks.
    committed = _committed(bootstrap, group, topic)
    highs = {p: high for p, (_, high) in ch.watermarks(bootstrap, topic).items()}
    assert committed == highs, f"committed {committed} != high watermarks {highs}\n{context}"


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        consumer.close()
