"""The one place that talks to brokers: confluent-kafka (librdkafka).

Why confluent-kafka: librdkafka is the most used non-Java Kafka client; it
fetches and decodes record batches in C on its own threads (the Python side
only touches finished messages), it has the idempotent producer (KIP-98)
with per-partition sequences and the murmur2 partitioner that Java clients
use, batched ListOffsets by timestamp (KIP-79) through AdminClient, and
DeleteRecords. kafka-python and aiokafka decode records in Python, which
would cap a Spark task at a fraction of the rate; the Java client would need
a JVM jar, which a Python data source must not need (Spark Connect).

Three roles, each created where it is used:
    OffsetsClient   on the driver (the Python planner process): topic metadata,
                    earliest / latest / by-timestamp offsets, with retries
    read_range      on an executor, inside DataSourceReader.read(): a consumer
                    with manual assignment reads [from, until) of one partition
    RecordProducer  on an executor, inside a writer's write(): idempotent producer
                    that turns delivery failures into one ProduceError

confluent_kafka errors are translated here (`raise ... from exc`); the rest of
the connector sees only tinystream.spark.errors.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, OffsetSpec

from tinystream.spark.errors import DataLossError, KafkaClientError, ProduceError
from tinystream.spark.offsets import OffsetRange, TopicPartition
from tinystream.spark.planning import DataLoss, LossReason, check_read_range

log = logging.getLogger("tinystream.spark")

# Errors worth another try after fetchOffset.retryIntervalMs: leadership moving, a topic
# just created or re-created, a broker briefly away.
RETRIABLE_CODES = {
    "NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE",
    "UNKNOWN_TOPIC_OR_PART", "REQUEST_TIMED_OUT", "NOT_COORDINATOR", "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE", "_TRANSPORT", "_TIMED_OUT", "_NOENT",
    "_ALL_BROKERS_DOWN", "_WAIT_COORD", "_UNKNOWN_PARTITION",
}

METADATA_TIMEOUT_S = 15.0
READ_CHUNK = 8192  # messages per consume() call and per Arrow batch


def translate(exc: BaseException, what: str) -> KafkaClientError:
    """A confluent_kafka exception as a KafkaClientError carrying the broker's message."""
    err = exc.args[0] if getattr(exc, "args", None) else None
    if err is not None and hasattr(err, "name") and hasattr(err, "str"):
        code = err.name()
        retriable = bool(err.retriable()) or code in RETRIABLE_CODES
        return KafkaClientError(f"{what}: {code}: {err.str()}", code=code, retriable=retriable)
    return KafkaClientError(f"{what}: {exc}")


def with_retries(call: Callable[[], Any], *, what: str, retries: int, interval_ms: int) -> Any:
    """Run `call`; retry retriable Kafka errors `retries` times, `interval_ms` apart."""
    attempt = 0
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = translate(exc, what)
        except KafkaClientError as exc:
            error = exc
        if not error.retriable or attempt >= retries:
            raise error
        attempt += 1
        log.info("%s failed (%s); retry %d of %d", what, error, attempt, retries)
        time.sleep(interval_ms / 1000)


def client_config(bootstrap: str, conf: Mapping[str, str], **defaults: Any) -> dict[str, Any]:
    """librdkafka settings: our defaults, then the user's kafka.* options on top."""
    out: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 3, **defaults}
    out.update(conf)
    out["bootstrap.servers"] = bootstrap
    return out


# --- driver -----------------------------------------------------------------


class OffsetsClient:
    """Metadata and ListOffsets through one AdminClient, created on first use."""
    def __init__(self, bootstrap: str, conf: Mapping[str, str], *, retries: int = 3, retry_interval_ms: int = 1000):
        self._bootstrap = bootstrap
        self._conf = dict(conf)
        self._retries = retries
        self._interval = retry_interval_ms
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        if self._admin is None:
            admin_conf = {k: v for k, v in self._conf.items() if k not in CONSUMER_ONLY_CONF}
            try:
                self._admin = AdminClient(client_config(self._bootstrap, admin_conf))
            except Exception as exc:
                raise translate(exc, "creating the admin client") from exc
        return self._admin

    def _isolation(self) -> Any:
        level = self._conf.get("isolation.level", "read_uncommitted")
        return IsolationLevel.READ_COMMITTED if level == "read_committed" else IsolationLevel.READ_UNCOMMITTED

    def partitions_by_topic(self, topics: tuple[str, ...] | None = None) -> dict[str, int]:
        """{topic: partition count} for all topics (or just `topics`, when they exist)."""
        def call() -> dict[str, int]:
            out: dict[str, int] = {}
            names = topics or (None,)
            for name in names:
                md = self.admin.list_topics(topic=name, timeout=METADATA_TIMEOUT_S)
                for topic, info in md.topics.items():
                    if info.error is not None:
                        if info.error.name() in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID"):
                            continue  # not there (yet): no partitions, as Spark's source sees it
                        raise KafkaClientError(
                            f"metadata of topic {topic!r}: {info.error.name()}: {info.error.str()}",
                            code=info.error.name(), retriable=bool(info.error.retriable()),
                        )
                    if info.partitions:
                        out[topic] = len(info.partitions)
            return out

        return with_retries(call, what="fetching topic metadata", retries=self._retries, interval_ms=self._interval)

    def _list_offsets(self, specs: Mapping[TopicPartition, Any], what: str) -> dict[TopicPartition, int]:
        if not specs:
            return {}

        def call() -> dict[TopicPartition, int]:
            request = {KafkaTP(tp.topic, tp.partition): spec for tp, spec in specs.items()}
            futures = self.admin.list_offsets(
                request, isolation_level=self._isolation(), request_timeout=METADATA_TIMEOUT_S
            )
            out = {}
            for ktp, future in futures.items():
                out[TopicPartition(ktp.topic, ktp.partition)] = future.result().offset
            return out

        return with_retries(call, what=what, retries=self._retries, interval_ms=self._interval)

    def earliest(self, tps: list[TopicPartition] | tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        return self._list_offsets({tp: OffsetSpec.earliest() for tp in tps}, "listing earliest offsets")

    def latest(self, tps: list[TopicPartition] | tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        return self._list_offsets({tp: OffsetSpec.latest() for tp in tps}, "listing latest offsets")

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """First offset whose timestamp >= the given one (KIP-79); None when there is none."""
        found = self._list_offsets(
            {tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()}, "listing offsets by timestamp"
        )
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def close(self) -> None:
        self._admin = None


# librdkafka warns (and ignores) consumer-only settings on an AdminClient; keep its log clean.
CONSUMER_ONLY_CONF = {
    "group.id", "isolation.level", "fetch.min.bytes", "fetch.max.bytes", "fetch.wait.max.ms",
    "max.partition.fetch.bytes", "queued.min.messages", "queued.max.messages.kbytes",
    "enable.partition.eof", "check.crcs", "session.timeout.ms", "heartbeat.interval.ms",
    "group.instance.id", "partition.assignment.strategy", "max.poll.interval.ms", "fetch.queue.backoff.ms",
    "group.protocol", "client.rack",
}


# --- executor: read -----------------------------------------------------------


def _consumer(bootstrap: str, conf: Mapping[str, str]) -> Any:
    settings = client_config(
        bootstrap, conf,
        # Never joins the group (manual assign) and never commits; librdkafka still wants an id.
        **{"group.id": f"tinystream-spark-{uuid.uuid4().hex[:12]}"},
        **{"isolation.level": "read_uncommitted"},  # Spark's (and Java's) default
    )
    settings.update({
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",  # an out-of-range fetch is data loss, decided by failOnDataLoss
        "enable.partition.eof": True,  # tells "caught up" apart from "nothing yet"
    })
    try:
        return Consumer(settings)
    except Exception as exc:
        raise translate(exc, "creating the consumer") from exc


def report_losses(losses: tuple[DataLoss, ...] | list[DataLoss], fail_on_data_loss: bool) -> None:
    """failOnDataLoss=true: raise on the first finding; false: log each and go on."""
    for loss in losses:
        if fail_on_data_loss:
            raise DataLossError(loss.message())
        log.warning("%s; failOnDataLoss=false, skipping", loss.message())


def read_range(
    r: OffsetRange,
    *,
    bootstrap: str,
    conf: Mapping[str, str],
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    retries: int = 3,
    retry_interval_ms: int = 1000,
    chunk: int = READ_CHUNK,
) -> Iterator[list[Any]]:
    """Yield lists of messages with offsets in [r.from_offset, r.until_offset) of one partition.

    Gaps inside the range (compaction, transaction markers) are not data loss; a range
    start below the log start offset, or an end past the log end, is (see planning).
    """
    consumer = _consumer(bootstrap, conf)
    ktp = KafkaTP(r.tp.topic, r.tp.partition)

    def watermarks() -> tuple[int, int]:
        def call() -> tuple[int, int]:
            return consumer.get_watermark_offsets(ktp, timeout=METADATA_TIMEOUT_S, cached=False)

        return with_retries(call, what=f"watermarks of {r.tp}", retries=retries, interval_ms=retry_interval_ms)

    try:
        low, high = watermarks()
        check = check_read_range(r, log_start=low, log_end=high)
        report_losses(check.losses, fail_on_data_loss)
        if check.range is None:
            return
        next_offset, until = check.range.from_offset, check.range.until_offset
        consumer.assign([KafkaTP(r.tp.topic, r.tp.partition, next_offset)])
        last_progress = time.monotonic()
        while next_offset < until:
            messages = consumer.consume(num_messages=min(chunk, until - next_offset), timeout=0.5)
            batch = []
            done = False
            for m in messages:
                err = m.error()
                if err is None:
                    offset = m.offset()
                    if offset >= until:
                        done = True
                        break
                    batch.append(m)
                    next_offset = offset + 1
                    continue
                code = err.code()
                if code == KafkaError._PARTITION_EOF:
                    if m.offset() >= until:
                        done = True  # everything up to `until` that exists has been delivered
                    continue
                if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    # Deleted while we read (retention, DeleteRecords).
                    low, high = watermarks()
                    loss = DataLoss(r.tp, LossReason.OFFSETS_DELETED,
                                    f"cannot fetch offset {next_offset}: the log now starts at {low}")
                    report_losses([loss], fail_on_data_loss)
                    if low >= until:
                        done = True
                        break
                    next_offset = low
                    consumer.assign([KafkaTP(r.tp.topic, r.tp.partition, next_offset)])
                    break
                raise KafkaClientError(f"reading {r.tp} at offset {next_offset}: {err.name()}: {err.str()}",
                                       code=err.name(), retriable=bool(err.retriable()))
            if batch:
                last_progress = time.monotonic()
                yield batch
            if done:
                return
            if not batch and time.monotonic() - last_progress > poll_timeout_ms / 1000:
                raise KafkaClientError(
                    f"timed out after {poll_timeout_ms} ms reading {r.tp}: got up to offset {next_offset}, "
                    f"planned until {until} (kafkaConsumer.pollTimeoutMs)", code="_TIMED_OUT",
                )
    finally:
        consumer.close()


# --- executor: write ----------------------------------------------------------


class RecordProducer:
    """An idempotent producer that collects delivery failures and raises them together."""
    def __init__(self, bootstrap: str, conf: Mapping[str, str]):
        settings = client_config(
            bootstrap, conf,
            # KIP-98 idempotence, and acks=all with it, as the Java client (and so Spark's sink) defaults to.
            **{"enable.idempotence": True, "acks": "all", "linger.ms": 5},
            # Java's default partitioner for keyed records, so keys land where Java clients put them.
            partitioner="murmur2_random",
            # delivery.timeout.ms of the Java client: 120 s.
            **{"message.timeout.ms": 120_000},
        )
        # Python callbacks for failures only: a callback per acknowledged record would
        # cost more than producing it.
        settings["delivery.report.only.error"] = True
        try:
            self._producer = Producer(settings)
        except Exception as exc:
            raise translate(exc, "creating the producer") from exc
        self.sent = 0
        self.failed = 0
        self._first_error: tuple[str, str, str] | None = None  # (topic, code, message)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            if self._first_error is None:
                self._first_error = (msg.topic(), err.name(), err.str())

    def send(self, topic: str, value: bytes | None, *, key: bytes | None = None, partition: int | None = None,
             headers: list[tuple[str, bytes | None]] | None = None) -> None:
        while True:
            try:
                if headers:
                    self._producer.produce(topic, value, key, -1 if partition is None else partition,
                                           on_delivery=self._on_delivery, headers=headers)
                else:
                    self._producer.produce(topic, value, key, -1 if partition is None else partition,
                                           on_delivery=self._on_delivery)
                break
            except BufferError:
                self._producer.poll(0.1)  # local queue full: let deliveries drain
            except Exception as exc:
                raise ProduceError(f"producing to {topic!r}: {translate(exc, 'produce')}") from exc
        self.sent += 1
        if self.sent % 1000 == 0:
            self._producer.poll(0)
            self.raise_if_failed()

    def raise_if_failed(self) -> None:
        if self._first_error is not None:
            topic, code, message = self._first_error
            raise ProduceError(
                f"{self.failed} record(s) not delivered; first failure, topic {topic!r}: {code}: {message}",
                code=code,
            )

    def flush(self, timeout_s: float = 300.0) -> None:
        remaining = self._producer.flush(timeout_s)
        self.raise_if_failed()
        if remaining:
            raise ProduceError(f"{remaining} record(s) still unacknowledged after {timeout_s:.0f} s", code="_TIMED_OUT")
