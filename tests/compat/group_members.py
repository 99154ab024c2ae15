"""Consumer-group members for the rebalance scenarios, one class per client.

Each member runs in its own thread (aiokafka's in its own event loop), polls
with a short timeout, and follows the pattern that gives exactly-once
consumption across rebalances for a consumer that commits its own offsets:

* every record returned by poll is handed to the shared `Ledger` at once
  (that is "processed");
* after each poll the member commits what it processed, synchronously; a
  commit refused because a rebalance started is ignored, because
* when partitions are revoked (eager: all of them; cooperative: only the
  moving ones) the rebalance callback commits what was processed on them
  before the member rejoins -- Kafka accepts commits from the current
  generation while the group is PreparingRebalance;
* on stop, a final synchronous commit, then close (which sends LeaveGroup).

So a record is seen twice only if the broker hands a partition to a new
owner from an offset older than the last commit, or serves a record twice.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from tinystream.testing.kafka_python import remember_rejoins

HEARTBEAT_MS = 500
SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms


@dataclass
class Ledger:
    """What every member consumed, and the assignments they were given."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    seen: list[tuple[str, int, int, bytes]] = field(default_factory=list)  # member, partition, offset, value
    events: list[tuple[float, str, str, tuple[int, ...]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    owned: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))

    def add(self, member: str, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.seen.append((member, partition, offset, value))

    def event(self, member: str, kind: str, partitions) -> None:
        """Assignments arrive in full (eager) or as increments (cooperative); revokes always precede moves."""
        with self.lock:
            self.events.append((time.monotonic(), member, kind, tuple(sorted(partitions))))
            if kind == "assign":
                self.owned[member] |= set(partitions)
            else:
                self.owned[member] -= set(partitions)

    def note(self, member: str, text: str) -> None:
        with self.lock:
            self.notes.append(f"{member}: {text}")

    def settled(self, members: list[str], partitions: int) -> bool:
        """Every partition owned by exactly one of `members`."""
        with self.lock:
            owned = [p for m in members for p in self.owned.get(m, ())]
        return sorted(owned) == list(range(partitions))

    def error(self, member: str, text: str) -> None:
        with self.lock:
            self.errors.append(f"{member}: {text}")

    def unique_values(self) -> int:
        with self.lock:
            return len({v for _, _, _, v in self.seen})

    def duplicates(self) -> dict[bytes, list[tuple[str, int, int]]]:
        where = defaultdict(list)
        with self.lock:
            for member, partition, offset, value in self.seen:
                where[value].append((member, partition, offset))
        return {v: w for v, w in where.items() if len(w) > 1}

    def timeline(self) -> str:
        with self.lock:
            start = self.events[0][0] if self.events else 0
            return "\n".join(f"  {t - start:6.2f}s {m:>6} {k:<8} {list(p)}" for t, m, k, p in self.events)


class Member(threading.Thread):
    """Base: run() polls until stop() is called; subclasses implement the client."""

    def __init__(self, name: str, *, bootstrap: str, topic: str, group: str, assignor: str, ledger: Ledger):
        super().__init__(name=f"member-{name}", daemon=True)
        self.member = name
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.assignor = assignor
        self.ledger = ledger
        self.stopping = threading.Event()
        self.started = threading.Event()
        self.processed: dict[int, int] = {}  # partition -> next offset to commit

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping.set()
        self.join(timeout)
        if self.is_alive():
            self.ledger.error(self.member, "did not stop")

    def run(self) -> None:
        try:
            self.consume()
        except Exception as exc:  # reported through the ledger; the test fails on it
            self.ledger.error(self.member, f"{type(exc).__name__}: {exc}")
        finally:
            self.started.set()

    def consume(self) -> None:
        raise NotImplementedError

    def _final_commit(self, commit, poll, error_type, timeout: float = 10.0) -> None:
        """Commit before leaving; during a rebalance, poll to finish it and retry (as Kafka's clients advise).

        Records a poll returns here are processed like any other."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                commit()
                return
            except error_type as exc:
                if time.monotonic() > deadline:
                    self.ledger.error(self.member, f"final commit failed: {exc!r}")
                    return
                self.ledger.note(self.member, f"final commit retried: {exc!r}")
                self._process(poll())

    def _process(self, polled) -> None:
        """Hand polled records to the ledger (confluent: a Message or None; others: {tp: [records]})."""
        if polled is None:
            return
        if isinstance(polled, dict):
            for tp, msgs in polled.items():
                for msg in msgs:
                    self.ledger.add(self.member, tp.partition, msg.offset, msg.value)
                    self.processed[tp.partition] = msg.offset + 1
            return
        if not polled.error():
            self.ledger.add(self.member, polled.partition(), polled.offset(), polled.value())
            self.processed[polled.partition()] = polled.offset() + 1


# --------------------------------------------------------------------------- confluent-kafka


class ConfluentMember(Member):
    STRATEGY = {"range": "range", "roundrobin": "roundrobin", "cooperative-sticky": "cooperative-sticky"}

    def consume(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "partition.assignment.strategy": self.STRATEGY[self.assignor],
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": SESSION_MS,
            "fetch.wait.max.ms": 100,
        })

        def commit(partitions) -> None:
            offsets = [TopicPartition(self.topic, p, self.processed[p]) for p in partitions if p in self.processed]
            if offsets:
                consumer.commit(offsets=offsets, asynchronous=False)

        def on_assign(c, parts):
            self.ledger.event(self.member, "assign", [p.partition for p in parts])

        def on_revoke(c, parts):
            self.ledger.event(self.member, "revoke", [p.partition for p in parts])
            try:
                commit([p.partition for p in parts])
            except KafkaException as exc:
                self.ledger.note(self.member, f"commit on revoke failed: {exc}")
            for p in parts:
                self.processed.pop(p.partition, None)

        def on_lost(c, parts):
            self.ledger.event(self.member, "lost", [p.partition for p in parts])
            for p in parts:
                self.processed.pop(p.partition, None)

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        self.started.set()
        try:
            while not self.stopping.is_set():
                msgs = consumer.consume(num_messages=100, timeout=0.2)
                touched = set()
                for msg in msgs:
                    if msg.error():
                        self.ledger.error(self.member, str(msg.error()))
                        continue
                    self.ledger.add(self.member, msg.partition(), msg.offset(), msg.value())
                    self.processed[msg.partition()] = msg.offset() + 1
                    touched.add(msg.partition())
                if touched:
                    try:
                        commit(touched)
                    except KafkaException:
                        pass  # a rebalance started: on_revoke commits
            self._final_commit(lambda: commit(list(self.processed)), lambda: consumer.poll(0.1), KafkaException)
        finally:
            consumer.close()


# --------------------------------------------------------------------------- kafka-python


class KafkaPythonMember(Member):
    def consume(self) -> None:
        from kafka import AsyncConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.errors import KafkaError

        strategy = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                    "cooperative-sticky": CooperativeStickyAssignor}[self.assignor]
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
            auto_offset_reset="earliest", partition_assignment_strategy=(strategy,),
            heartbeat_interval_ms=HEARTBEAT_MS, session_timeout_ms=SESSION_MS, fetch_max_wait_ms=100,
        )
        member = self

        def offsets_for(partitions):
            # kafka-python runs the rebalance listener (which pops from `processed`) on its IO thread:
            # each offset is read once.
            return {TopicPartition(member.topic, p): OffsetAndMetadata(offset, "", -1)
                    for p in partitions if (offset := member.processed.get(p)) is not None}

        def commit(partitions) -> None:
            offsets = offsets_for(partitions)
            if offsets:
                consumer.commit(offsets)

        # kafka-python 3 runs rebalance listeners on its IO thread, where the
        # blocking commit() refuses to run; an async listener awaits the
        # coordinator's own commit coroutine instead (as its error message says).
        class Listener(AsyncConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                member.ledger.event(member.member, "revoke", [tp.partition for tp in revoked])
                offsets = offsets_for([tp.partition for tp in revoked])
                try:
                    if offsets:
                        await consumer._coordinator._commit_offsets_sync_async(offsets)
                except KafkaError as exc:
                    member.ledger.note(member.member, f"commit on revoke failed: {exc!r}")
                for tp in revoked:
                    member.processed.pop(tp.partition, None)

            async def on_partitions_assigned(self, assigned):
                member.ledger.event(member.member, "assign", [tp.partition for tp in assigned])

            async def on_partitions_lost(self, lost):
                member.ledger.event(member.member, "lost", [tp.partition for tp in lost])
                for tp in lost:
                    member.processed.pop(tp.partition, None)

        consumer.subscribe([self.topic], listener=Listener())
        remember_rejoins(consumer)  # a rejoin for new metadata that a poll left running is finished by the next
        self.started.set()
        try:
            while not self.stopping.is_set():
                batches = consumer.poll(timeout_ms=200)
                touched = set()
                for tp, msgs in batches.items():
                    for msg in msgs:
                        self.ledger.add(self.member, tp.partition, msg.offset, msg.value)
                        self.processed[tp.partition] = msg.offset + 1
                    touched.add(tp.partition)
                if touched:
                    try:
                        commit(touched)
                    except KafkaError:
                        pass
            self._final_commit(lambda: commit(list(self.processed)), lambda: consumer.poll(timeout_ms=100), KafkaError)
        finally:
            consumer.close()


# --------------------------------------------------------------------------- aiokafka


class AiokafkaMember(Member):
    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from aiokafka.errors import KafkaError

        strategy = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[self.assignor]
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
            auto_offset_reset="earliest", partition_assignment_strategy=(strategy,),
            heartbeat_interval_ms=HEARTBEAT_MS, session_timeout_ms=SESSION_MS, fetch_max_wait_ms=100,
        )
        member = self

        async def commit(partitions) -> None:
            offsets = {TopicPartition(member.topic, p): member.processed[p] for p in partitions
                       if p in member.processed}
            if offsets:
                await consumer.commit(offsets)

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                member.ledger.event(member.member, "revoke", [tp.partition for tp in revoked])
                try:
                    await commit([tp.partition for tp in revoked])
                except KafkaError as exc:
                    member.ledger.note(member.member, f"commit on revoke failed: {exc!r}")
                for tp in revoked:
                    member.processed.pop(tp.partition, None)

            async def on_partitions_assigned(self, assigned):
                member.ledger.event(member.member, "assign", [tp.partition for tp in assigned])

        await consumer.start()
        consumer.subscribe([self.topic], listener=Listener())
        self.started.set()
        try:
            while not self.stopping.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                touched = set()
                for tp, msgs in batches.items():
                    for msg in msgs:
                        self.ledger.add(self.member, tp.partition, msg.offset, msg.value)
                        self.processed[tp.partition] = msg.offset + 1
                    touched.add(tp.partition)
                if touched:
                    try:
                        await commit(touched)
                    except KafkaError:
                        pass
            deadline = time.monotonic() + 10
            while True:
                try:
                    await commit(list(self.processed))
                    break
                except KafkaError as exc:
                    if time.monotonic() > deadline:
                        self.ledger.error(self.member, f"final commit failed: {exc!r}")
                        break
                    self.ledger.note(self.member, f"final commit retried: {exc!r}")
                    self._process(await consumer.getmany(timeout_ms=100))
        finally:
            await consumer.stop()


MEMBER_CLASSES = {"confluent": ConfluentMember, "kafka-python": KafkaPythonMember, "aiokafka": AiokafkaMember}
