"""The load the faults hit: idempotent acks=all producers and one consumer group, in threads.

Producers (librdkafka, enable.idempotence=true, acks=all) write unique
values `<producer>:<seq>` round-robin over the partitions at a steady rate,
so every partition always has a write in flight and a failover shows up as
a gap in acknowledgements. Timeouts are short (request 5 s) so a frozen
leader costs seconds, not librdkafka's default 30; message.timeout.ms is
long so a record survives any one fault instead of failing.

The group reader commits synchronously every ~0.5 s, asks the coordinator
for its committed offsets every ~2 s (they must never go back), and records
every (partition, offset) it reads: the same offset must always hold the
same value, i.e. a consumer never sees data above the high watermark that a
failover later truncates.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from ledger import Ledger

PRODUCER_CONFIG = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "message.timeout.ms": 90_000,
    "request.timeout.ms": 5_000,
    "socket.timeout.ms": 5_000,
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 250,
    "topic.metadata.refresh.interval.ms": 2_000,
    "log_level": 3,  # errors only: connection refused from a killed broker is expected
}

CONSUMER_CONFIG = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6_000,
    "heartbeat.interval.ms": 1_000,
    "socket.timeout.ms": 5_000,
    "topic.metadata.refresh.interval.ms": 2_000,
    "log_level": 3,
}


class ProducerWorker(threading.Thread):
    def __init__(self, name: str, *, bootstrap: str, topic: str, partitions: int, ledger: Ledger,
                 records_per_s: float) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.partitions, self.ledger = bootstrap, topic, partitions, ledger
        self.interval = 1.0 / records_per_s
        self.halt = threading.Event()
        self.unflushed = 0
        self.error: BaseException | None = None
        self._fatal = threading.Event()

    def _producer(self) -> Producer:
        def on_error(err: KafkaError) -> None:
            if err.fatal():
                self.ledger.fatal_errors.append(f"{self.name}: {err}")
                self._fatal.set()

        return Producer({"bootstrap.servers": self.bootstrap, "client.id": self.name, "error_cb": on_error,
                         **PRODUCER_CONFIG})

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _run(self) -> None:
        producer = self._producer()
        seq = 0
        next_at = time.monotonic()
        while not self.halt.is_set():
            try:
                if self._fatal.is_set():
                    raise KafkaException(KafkaError(KafkaError._FATAL, "fatal error reported", fatal=True))
                value = f"{self.name}:{seq}"
                partition = seq % self.partitions
                self.ledger.sent(value, producer=self.name, seq=seq, partition=partition)
                while True:
                    try:
                        producer.produce(self.topic, value=value.encode(), partition=partition,
                                         on_delivery=self._on_delivery(value))
                        break
                    except BufferError:
                        producer.poll(0.1)
                seq += 1
                next_at += self.interval
                producer.poll(max(0.0, next_at - time.monotonic()))
            except KafkaException as exc:
                # A fatal idempotence error: counted (the test fails on it), then the load goes on
                # with a new producer id so the rest of the run still yields figures.
                if not exc.args[0].fatal():
                    raise
                if not self.ledger.fatal_errors or self.name not in self.ledger.fatal_errors[-1]:
                    self.ledger.fatal_errors.append(f"{self.name}: {exc.args[0]}")
                try:
                    producer.flush(10)
                except KafkaException:
                    pass
                producer, self._fatal = self._producer(), threading.Event()
        self.unflushed = producer.flush(120)

    def _on_delivery(self, value: str):  # type: ignore[no-untyped-def]
        def done(err: KafkaError | None, msg) -> None:  # type: ignore[no-untyped-def]
            self.ledger.delivered(value, offset=None if err else msg.offset(), error=str(err) if err else None)

        return done


class GroupReader(threading.Thread):
    def __init__(self, *, bootstrap: str, topic: str, partitions: int, group: str, ledger: Ledger) -> None:
        super().__init__(name=f"group-{group}", daemon=True)
        self.bootstrap, self.topic, self.partitions, self.group, self.ledger = (
            bootstrap, topic, partitions, group, ledger)
        self.halt = threading.Event()
        self.positions: dict[int, int] = {}  # next offset to read, per partition
        self.errors: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, **CONSUMER_CONFIG})
        consumer.subscribe([self.topic])
        last_commit = last_check = time.monotonic()
        dirty = False
        try:
            while not self.halt.is_set():
                msg = consumer.poll(0.2)
                if msg is not None:
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            self.errors.append(str(msg.error()))
                    else:
                        self.ledger.group_read(msg.partition(), msg.offset(), msg.value().decode())
                        self.positions[msg.partition()] = msg.offset() + 1
                        dirty = True
                now = time.monotonic()
                if dirty and now - last_commit > 0.5:
                    last_commit = now
                    dirty = not self._commit(consumer)
                if now - last_check > 2.0:
                    last_check = now
                    self._check_committed(consumer, when="during the run")
            self._commit(consumer)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer) -> bool:
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException as exc:  # coordinator moving: the next commit carries the same offsets
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                self.errors.append(f"commit: {exc}")
            return False
        self.ledger.group_committed({tp.partition: tp.offset for tp in done or [] if tp.offset >= 0
                                     and not tp.error})
        return True

    def _check_committed(self, consumer: Consumer, *, when: str) -> None:
        try:
            answer = consumer.committed([TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=5)
        except KafkaException:
            return  # no coordinator right now; regressions are checked again later
        if any(tp.error for tp in answer):
            return
        self.ledger.check_committed({tp.partition: tp.offset for tp in answer}, when=when)


def fetch_committed(bootstrap: str, *, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_CONFIG})
    try:
        answer = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answer}


def read_whole_log(bootstrap: str, *, topic: str, partitions: int, timeout_s: float = 60.0
                   ) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, offset 0 up to the high watermark, read with `assign`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-verifier", **CONSUMER_CONFIG})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        log: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        nexts = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while any(nexts[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise AssertionError(f"reading the whole log: stuck at {nexts} of {ends}")
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    continue
                log[msg.partition()].append((msg.offset(), msg.value().decode()))
                nexts[msg.partition()] = msg.offset() + 1
        return {p: [(o, v) for o, v in entries if o < ends[p]] for p, entries in log.items()}
    finally:
        consumer.close()
