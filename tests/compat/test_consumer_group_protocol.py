"""KIP-848 consumer groups (`group.protocol=consumer`) with real clients.

The same scenario with confluent-kafka (librdkafka, in this process) and
with the Java KafkaConsumer (tests/compat/java/Kip848Consumer.java, compiled
against the Kafka jars; slow): one member joins and gets every partition, a
second joins and the partitions split between them without overlap, the
second leaves and the first gets them all back; every record is consumed
and committed; a restarted member resumes from the committed offsets; and
`kafka-consumer-groups --describe` shows the group with its member.

Rebalances here wait for the server's heartbeat interval (5 s by default, as
in Kafka): a member waiting for partitions another member is revoking hears
of them on its next heartbeat.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import compat_helpers as ch
import pytest
from test_transactions_restart import own_broker  # noqa: F401 - the fixture

from tinystream.cli.consumer_group_describe import describe_consumer_group
from tinystream.testing.waiting import wait_until

pytestmark = pytest.mark.compat

PARTITIONS = 4
PER_PARTITION = 10
ALL = set(range(PARTITIONS))
SOURCE = Path(__file__).parent / "java" / "Kip848Consumer.java"


def wait_for(predicate: Callable[[], object], timeout: float, what: str, tick: Callable[[], None] | None = None):
    """`wait_until`; with `tick` (a member's poll, which blocks for its own timeout) run before each check, not a sleep."""
    if tick is None:
        return wait_until(predicate, timeout=timeout, what=what)
    return wait_until(lambda: (tick(), predicate())[1], timeout=timeout, what=what, interval=0)


def produce_per_partition(bootstrap: str, topic: str, count: int, tag: str) -> None:
    records = [ch.Rec(value=f"{tag}-{p}-{i}".encode(), partition=p) for p in range(PARTITIONS) for i in range(count)]
    ch.produce("confluent", bootstrap, topic, records)


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        reader.close()


# --------------------------------------------------------------------------- confluent-kafka


class ConfluentMember:
    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        from confluent_kafka import Consumer

        self.name = name
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer", "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })
        self.consumer.subscribe([topic])
        self.records: list[tuple[int, int, bytes]] = []

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is None:
            return
        assert not msg.error(), msg.error()
        self.records.append((msg.partition(), msg.offset(), msg.value()))
        self.consumer.commit(message=msg, asynchronous=False)

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close()  # leaves the group (member epoch -1)


def test_confluent_consumers_split_rebalance_commit_and_resume(bootstrap, new_topic):
    ch.require_client("confluent")
    topic, group = new_topic(PARTITIONS), ch.unique_name("kip848-ck")
    produce_per_partition(bootstrap, topic, PER_PARTITION, "first")

    a = ConfluentMember(bootstrap, group, topic, "a")
    wait_for(lambda: a.assignment() == ALL and len(a.records) == PARTITIONS * PER_PARTITION, 30,
             "a to own every partition and read every record", tick=a.poll)

    b = ConfluentMember(bootstrap, group, topic, "b")

    def both() -> None:
        a.poll()
        b.poll()

    wait_for(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, 30, "the partitions to split", tick=both)
    assert a.assignment() | b.assignment() == ALL and not a.assignment() & b.assignment()

    b.close()
    wait_for(lambda: a.assignment() == ALL, 30, "a to get every partition back", tick=a.poll)
    a.close()
    assert sorted((p, o) for p, o, _ in a.records + b.records) == [
        (p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
    assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

    # A restarted member resumes from the committed offsets: only the new records.
    produce_per_partition(bootstrap, topic, 3, "second")
    c = ConfluentMember(bootstrap, group, topic, "c")
    wait_for(lambda: len(c.records) >= PARTITIONS * 3, 30, "c to read the new records", tick=c.poll)
    c.close()
    assert sorted((p, o) for p, o, _ in c.records) == [
        (p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION, PER_PARTITION + 3)]
    assert all(v.startswith(b"second-") for _, _, v in c.records)


def test_confluent_regex_subscription_follows_new_topics(bootstrap):
    """librdkafka sends a `^` pattern as SubscribedTopicRegex; the coordinator matches it (RE2, whole names)
    and a topic created later that matches joins the assignment."""
    ch.require_client("confluent")
    prefix = ch.unique_name("kip848rx")
    ch.create_topic(bootstrap, f"{prefix}-a", 2)
    ch.create_topic(bootstrap, f"x{prefix}-b", 1)  # does not match
    member = ConfluentMember(bootstrap, ch.unique_name("rx"), f"^{prefix}-.*", "rx")
    try:
        def topics() -> set[tuple[str, int]]:
            return {(tp.topic, tp.partition) for tp in member.consumer.assignment()}

        wait_for(lambda: topics() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}, 30, "the matching topic",
                 tick=member.poll)
        ch.create_topic(bootstrap, f"{prefix}-c", 1)
        wait_for(lambda: (f"{prefix}-c", 0) in topics(), 60, "the new matching topic", tick=member.poll)
        assert {t for t, _ in topics()} == {f"{prefix}-a", f"{prefix}-c"}
    finally:
        member.close()


def test_confluent_static_member_comes_back_without_a_rebalance(bootstrap, new_topic):
    """group.instance.id: close leaves with epoch -2 (the member stays, holding its partitions); a new
    incarnation with the same instance id takes its place and its partitions at the same group epoch."""
    ch.require_client("confluent")
    topic, group = new_topic(2), ch.unique_name("kip848-static")

    def member():
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                      "group.instance.id": "instance-1"})
        c.subscribe([topic])
        wait_for(lambda: len(c.assignment()) == 2, 30, "the static member's partitions", tick=lambda: c.poll(0.1))
        return c

    first = member()
    before = describe_consumer_group(bootstrap, group)
    first.close()
    left = describe_consumer_group(bootstrap, group)
    assert [m.member_epoch for m in left.members] == [-2] and left.group_epoch == before.group_epoch
    second = member()
    after = describe_consumer_group(bootstrap, group)
    second.close()
    assert after.group_epoch == before.group_epoch  # no rebalance
    assert len(after.members) == 1 and after.members[0].member_id != before.members[0].member_id
    assert after.members[0].assignment == {topic: [0, 1]}


def test_confluent_member_goes_on_after_its_coordinator_restarts(own_broker):  # noqa: F811 - the fixture
    """SIGKILL the broker under a member: the restarted coordinator loads the group (epoch, member,
    assignment, offsets) and the member goes on from the committed offsets without a rebalance."""
    ch.require_client("confluent")
    broker, restart = own_broker
    bootstrap = broker.bootstrap
    topic, group = ch.create_topic(bootstrap, ch.unique_name("kip848-restart"), PARTITIONS), ch.unique_name("rs")
    produce_per_partition(bootstrap, topic, PER_PARTITION, "first")
    a = ConfluentMember(bootstrap, group, topic, "a")
    wait_for(lambda: a.assignment() == ALL and len(a.records) == PARTITIONS * PER_PARTITION, 30,
             "a to read every record", tick=a.poll)
    restart()
    produce_per_partition(bootstrap, topic, 3, "second")
    before = len(a.records)

    def poll_through_errors() -> None:
        try:
            a.poll()
        except Exception:  # noqa: BLE001 - commits fail while the coordinator is away; the member retries
            time.sleep(0.1)

    wait_for(lambda: len(a.records) >= before + PARTITIONS * 3, 60, "a to read on after the restart",
             tick=poll_through_errors)
    # The restarted coordinator read the group back from __consumer_offsets: the member went on at its
    # epoch, without a rebalance.
    described = describe_consumer_group(bootstrap, group)
    assert described is not None and described.group_epoch == 1 and len(described.members) == 1
    assert described.members[0].member_epoch == 1
    a.close()
    after = a.records[before:]
    assert sorted((p, o) for p, o, _ in after) == [
        (p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION, PER_PARTITION + 3)]
    assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), PER_PARTITION + 3)


# --------------------------------------------------------------------------- Java KafkaConsumer


def _compile(tmp_path: Path) -> str:
    from tinystream.testing.peers.apache_kafka import jars_dir, java_executable

    jars = jars_dir()
    javac = Path(java_executable()).with_name("javac")
    if not javac.exists():
        pytest.skip("javac not found (a JDK is needed to compile the consumer)")
    classes = tmp_path / "classes"
    classpath = f"{jars}/*"
    subprocess.run([str(javac), "-d", str(classes), "-cp", classpath, str(SOURCE)], check=True, timeout=120)
    return f"{classes}:{classpath}"


class JavaMember:
    """Kip848Consumer in its own JVM; its stdout lines are collected by a thread."""

    def __init__(self, classpath: str, bootstrap: str, topic: str, group: str, name: str) -> None:
        from tinystream.testing.peers.apache_kafka import TOOL_JVM_OPTS, java_executable

        self.name = name
        self.proc = subprocess.Popen(
            [java_executable(), *TOOL_JVM_OPTS, "-cp", classpath, "Kip848Consumer", bootstrap, topic, group, name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.assignment: set[int] = set()
        self.records: list[tuple[int, int, str]] = []
        self.committed_through = 0  # records committed (a COMMITTED line follows each poll's records)
        self.closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def drain(self) -> None:
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line.startswith("ASSIGNMENT"):
                rest = line[len("ASSIGNMENT"):].strip()
                self.assignment = {int(p) for p in rest.split(",")} if rest else set()
            elif line.startswith("RECORD "):
                _, p, o, v = line.split(" ", 3)
                self.records.append((int(p), int(o), v))
            elif line == "COMMITTED":
                self.committed_through = len(self.records)
            elif line == "CLOSED":
                self.closed = True

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(10)  # the last lines (records, CLOSED) are in the queue
        self.drain()
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}: {stderr[-3000:]}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.mark.slow
def test_java_consumers_split_rebalance_commit_and_resume(bootstrap, new_topic, tmp_path):
    ch.require_client("java")
    from tinystream.testing.peers.apache_kafka import CONSUMER_GROUPS, run_java_tool

    classpath = _compile(tmp_path)
    topic, group = new_topic(PARTITIONS), ch.unique_name("kip848-java")
    produce_per_partition(bootstrap, topic, PER_PARTITION, "first")
    members: list[JavaMember] = []
    try:
        a = JavaMember(classpath, bootstrap, topic, group, "a")
        members.append(a)
        wait_for(lambda: (a.drain(), a.assignment == ALL and len(a.records) == PARTITIONS * PER_PARTITION)[1], 90,
                 "a to own every partition and read every record")
        b = JavaMember(classpath, bootstrap, topic, group, "b")
        members.append(b)

        def split() -> bool:
            a.drain()
            b.drain()
            return len(a.assignment) == 2 and len(b.assignment) == 2

        wait_for(split, 90, "the partitions to split between a and b")
        assert a.assignment | b.assignment == ALL and not a.assignment & b.assignment
        b.stop()
        wait_for(lambda: (a.drain(), a.assignment == ALL)[1], 60, "a to get every partition back")
        a.stop()
        assert sorted((p, o) for p, o, _ in a.records + b.records) == [
            (p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
        assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

        produce_per_partition(bootstrap, topic, 3, "second")
        c = JavaMember(classpath, bootstrap, topic, group, "c")
        members.append(c)
        wait_for(lambda: (c.drain(), c.committed_through >= PARTITIONS * 3 and c.assignment == ALL)[1], 90,
                 "the restarted consumer to read the new records")
        assert sorted((p, o) for p, o, _ in c.records) == [
            (p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION, PER_PARTITION + 3)]

        # kafka-consumer-groups shows the group, its member and its offsets while c runs.
        out = run_java_tool(CONSUMER_GROUPS, ["--bootstrap-server", bootstrap, "--describe", "--group", group],
                            timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        rows = [line.split() for line in out.stdout.splitlines() if line.startswith(group)]
        assert sorted(int(r[2]) for r in rows if r[1] == topic) == list(range(PARTITIONS)), out.stdout
        assert all(r[3] == str(PER_PARTITION + 3) and r[5] == "0" and r[6] != "-" for r in rows), out.stdout
        state = run_java_tool(CONSUMER_GROUPS, ["--bootstrap-server", bootstrap, "--describe", "--group", group,
                                                "--state"], timeout=120)
        assert "uniform" in state.stdout and "Stable" in state.stdout, state.stdout
        c.stop()
    finally:
        for m in members:
            m.kill()
