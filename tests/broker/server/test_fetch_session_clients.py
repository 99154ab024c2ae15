"""Real consumers over many partitions with fetch sessions on (KIP-227), through a group rebalance.

Which clients open sessions: kafka-python (2.1+) and the Java consumer do;
librdkafka (confluent-kafka) and aiokafka send sessionless full fetches
(session_id 0, epoch -1). Each is run through the same story, and the
broker's own counters (`fetch_sessions.requests`, also on /metrics) say
which kind of fetch it sent:

1. consumer A alone on a 60-partition topic reads round 1;
2. consumer B joins: the group rebalances, A's assignment shrinks (its
   session forgets partitions) and B's session opens; round 2 is read by
   the two together;
3. B leaves: A gets its partitions back (added mid-session) and reads
   round 3.

Every round must be read exactly once, by value. Offsets are committed
after each poll, so a moved partition resumes where its last owner stopped.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tinystream.testing.broker import BrokerThread, test_settings
from tinystream.testing.kafka_python import remember_rejoins
from tinystream.testing.peers.apache_kafka import CONSOLE_CONSUMER, jars_dir, java_executable, run_java_tool
from tinystream.testing.peers.errors import PeerUnavailable
from tinystream.testing.waiting import wait_until

PARTITIONS = 60
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("sessions") / "data")) as b:
        yield b


def fetch_kinds(broker: BrokerThread) -> dict[str, float]:
    """Fetch requests by session context (and "by topic id"), from the broker's /metrics."""
    with urllib.request.urlopen(f"{broker.info.admin_url}/metrics", timeout=5) as r:  # noqa: S310 - loopback
        text = r.read().decode()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    kinds = {s.labels["kind"]: s.value for s in samples if s.name == "tinystream_fetch_session_requests_total"}
    kinds["by topic id"] = next(s.value for s in samples if s.name == "tinystream_fetch_requests_by_topic_id_total")
    return kinds


def produce_round(bootstrap: str, topic: str, round_no: int) -> set[bytes]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = {b"r%d-p%d" % (round_no, p) for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        producer.produce(topic, value=b"r%d-p%d" % (round_no, p), partition=p)
    assert producer.flush(20) == 0
    return values


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(20)


class Member:
    """A group member polling in its own thread: what it read, and what it is assigned."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str) -> None:
        self.got: list[bytes] = []
        self.assigned: set[int] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        poll = {"kafka-python": self._kafka_python, "confluent-kafka": self._confluent}[client]
        self._thread = threading.Thread(target=self._guard, args=(poll, bootstrap, topic, group), daemon=True)
        self._thread.start()

    def __str__(self) -> str:
        """For the waits' messages: the assignment, and what the member's thread died of, if it did."""
        return f"{sorted(self.assigned)}" + (f" (stopped by {self._error!r})" if self._error is not None else "")

    def values(self) -> list[bytes]:
        with self._lock:
            return list(self.got)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "member did not stop"
        if self._error is not None:
            raise self._error

    def _guard(self, poll: Callable[[str, str, str], None], *args: str) -> None:
        try:
            poll(*args)
        except BaseException as exc:  # reported by stop()
            self._error = exc

    def _kafka_python(self, bootstrap: str, topic: str, group: str) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, fetch_max_wait_ms=100, heartbeat_interval_ms=500,
                                 session_timeout_ms=10000, max_poll_interval_ms=30000)
        # A lone member rejoins when the topic's metadata arrives; a 100 ms poll that gives up before that
        # rejoin's SyncGroup answer would otherwise leave the member unassigned for good.
        remember_rejoins(consumer)
        try:
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=100)
                with self._lock:
                    for records in batches.values():
                        self.got += [m.value for m in records]
                if batches:
                    consumer.commit()
                self.assigned = {tp.partition for tp in consumer.assignment()}
        finally:
            consumer.close()

    def _confluent(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                             "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        consumer.subscribe([topic])
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    with self._lock:
                        self.got.append(msg.value())
                    consumer.commit(message=msg, asynchronous=False)
                self.assigned = {tp.partition for tp in consumer.assignment()}
        finally:
            consumer.close()


def read_round(members: list[Member], before: list[int], expected: set[bytes]) -> None:
    """Every value of the round read once, across `members` (each from its count `before`)."""
    def news() -> list[bytes]:
        return [v for m, b in zip(members, before, strict=True) for v in m.values()[b:]]
    wait_until(lambda: len(news()) >= len(expected), timeout=TIMEOUT,
               what=lambda: f"{len(expected)} records (read {len(news())}; assigned {', '.join(map(str, members))})")
    time.sleep(0.5)  # a duplicate would show up now
    got = news()
    assert sorted(got) == sorted(expected), f"{len(got)} read, {len(set(got) & expected)} of {len(expected)} expected"


@pytest.mark.parametrize(("client", "sessions"), [("kafka-python", True), ("confluent-kafka", False)])
def test_many_partitions_through_a_rebalance(running, client, sessions):
    topic, group = f"sess-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(running.bootstrap, topic)
    kinds_before = fetch_kinds(running)
    a = Member(client, running.bootstrap, topic, group)
    try:
        wait_until(lambda: len(a.assigned) == PARTITIONS, timeout=TIMEOUT,
                   what=lambda: f"A to own every partition {a}")
        read_round([a], [0], produce_round(running.bootstrap, topic, 1))
        b = Member(client, running.bootstrap, topic, group)
        try:
            wait_until(lambda: a.assigned and b.assigned and len(a.assigned | b.assigned) == PARTITIONS
                       and not a.assigned & b.assigned, timeout=TIMEOUT,
                       what=lambda: f"A and B to split the partitions ({a}, {b})")
            read_round([a, b], [len(a.values()), 0], produce_round(running.bootstrap, topic, 2))
        finally:
            b.stop()
        wait_until(lambda: len(a.assigned) == PARTITIONS, timeout=TIMEOUT,
                   what=lambda: f"A to own every partition again {a}")
        read_round([a], [len(a.values())], produce_round(running.bootstrap, topic, 3))
    finally:
        a.stop()
    kinds = fetch_kinds(running)
    incremental = kinds.get("incremental", 0) - kinds_before.get("incremental", 0)
    if sessions:
        assert incremental > 10 and kinds.get("full", 0) > kinds_before.get("full", 0)
    else:
        assert incremental == 0 and kinds.get("sessionless", 0) > kinds_before.get("sessionless", 0)


@pytest.mark.slow
def test_java_console_consumer_reads_many_partitions_in_a_session(running):
    try:
        jars_dir()
        java_executable()
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    topic = f"java-{uuid.uuid4().hex[:6]}"
    create_topic(running.bootstrap, topic)
    expected = produce_round(running.bootstrap, topic, 1)
    kinds_before = fetch_kinds(running)
    out = run_java_tool(CONSOLE_CONSUMER, [
        "--bootstrap-server", running.bootstrap, "--topic", topic, "--from-beginning",
        "--max-messages", str(2 * PARTITIONS), "--timeout-ms", "6000",
        "--consumer-property", "fetch.max.wait.ms=100",
    ], timeout=90)
    # The console consumer stops on its timeout once the topic is drained: the idle fetches are incremental.
    values = [line for line in out.stdout.splitlines() if line.startswith("r1-p")]  # the rest is its log
    assert sorted(values) == sorted(v.decode() for v in expected), out.stdout[-2000:] + out.stderr[-2000:]
    kinds = fetch_kinds(running)
    assert kinds.get("incremental", 0) - kinds_before.get("incremental", 0) > 10
    assert kinds.get("error", 0) == kinds_before.get("error", 0)
    # Kafka 4.x's consumer fetches by topic id (Fetch v13+, KIP-516).
    assert kinds["by topic id"] - kinds_before["by topic id"] > 10
