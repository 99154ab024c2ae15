"""Client adapters for the compatibility suite: one produce and one consume per client.

Every scenario is written once against these adapters and parametrized over
the clients that can do it:

    kafka-python   pure Python, sync        (KafkaProducer / KafkaConsumer)
    aiokafka       pure Python, asyncio     (AIOKafkaProducer / AIOKafkaConsumer)
    confluent      librdkafka via confluent-kafka
    kcat           librdkafka's CLI, as packaged by Debian (an older librdkafka)
    java           Apache Kafka's own console tools (the Java client)

The reference reader (`read_all`) is confluent-kafka with manual assignment
from offset 0 to each partition's high watermark: it needs no group, so a
produce test does not depend on the group coordinator.

Values stay printable ASCII with no tab, comma or colon so that the
line-based tools (kcat, the console producer) carry them unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tinystream.testing.waiting import wait_until

PY_CLIENTS = ("kafka-python", "aiokafka", "confluent")
ALL_CLIENTS = (*PY_CLIENTS, "kcat", "java")
CODECS = ("gzip", "snappy", "lz4", "zstd")

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Rec:
    """A record as produced (partition None: the client's partitioner picks)."""

    value: bytes
    key: bytes | None = None
    headers: Headers = ()
    partition: int | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Got:
    """A record as consumed."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int = -1

    def content(self) -> tuple:
        return (self.key, self.value, self.headers)


@dataclass
class ClientError(AssertionError):
    client: str
    detail: str
    output: str = field(default="")

    def __str__(self) -> str:
        return f"{self.client}: {self.detail}\n{self.output[-3000:]}"


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_records(count: int, prefix: str = "v", *, with_keys: bool = True, with_headers: bool = True,
                 pad_to: int = 0) -> list[Rec]:
    """Keyed and unkeyed records, some with one header, some with two, some with none."""
    records = []
    for i in range(count):
        key = f"key-{i % 5}".encode() if with_keys and i % 2 == 0 else None
        headers: Headers = ()
        if with_headers and i % 3 == 0:
            headers = (("trace", f"t{i}".encode()), ("source", b"compat"))
        elif with_headers and i % 3 == 1:
            headers = (("only", b"1"),)
        value = f"{prefix}-{i:06d}".encode()
        if pad_to > len(value):
            value += b"." * (pad_to - len(value))
        records.append(Rec(value=value, key=key, headers=headers))
    return records


def assert_records_match(expected: Sequence[Rec], got: Sequence[Got], *, context: str = "",
                         one_partitioner: bool = True) -> None:
    """Same multiset of (key, value, headers); no duplicates; keyed order kept.

    With `one_partitioner` every key must sit in one partition; records from
    several clients may not (librdkafka hashes keys with CRC32 by default,
    the Java client and kafka-python with murmur2).
    """
    want = Counter((r.key, r.value, r.headers) for r in expected)
    have = Counter(g.content() for g in got)
    missing = want - have
    extra = have - want
    assert not missing and not extra, (
        f"{context}: {sum(missing.values())} missing, {sum(extra.values())} unexpected; "
        f"first missing {list(missing)[:3]}, first unexpected {list(extra)[:3]}"
    )
    by_key: dict[bytes, set[int]] = {}
    for g in got:
        if g.key is not None:
            by_key.setdefault(g.key, set()).add(g.partition)
    split = {k: p for k, p in by_key.items() if len(p) > 1}
    assert not one_partitioner or not split, f"{context}: keys spread over partitions {split}"
    # Within a partition, offsets increase and records of one key keep produce order.
    order = {r.value: i for i, r in enumerate(expected)}
    check_order = len(order) == len(expected)  # only when values identify records
    for partition in {g.partition for g in got}:
        in_part = sorted((g for g in got if g.partition == partition), key=lambda g: g.offset)
        offsets = [g.offset for g in in_part]
        assert len(set(offsets)) == len(offsets), f"{context}: duplicate offsets in partition {partition}"
        last_by_key: dict[bytes, int] = {}
        for g in in_part:
            if not check_order or g.key is None or g.value not in order:
                continue
            position = order[g.value]
            assert position > last_by_key.get(g.key, -1), f"{context}: key {g.key!r} out of order in p{partition}"
            last_by_key[g.key] = position


# --------------------------------------------------------------------------- admin and reference reader


def confluent_admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                 timeout: float = 30.0) -> str:
    """Create a topic (replication factor 1) and wait until every partition has a leader."""
    from confluent_kafka.admin import NewTopic

    admin = confluent_admin(bootstrap)
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=timeout)
    futures[name].result(timeout)
    wait_for_topic(bootstrap, name, partitions, timeout=timeout)
    return name


def wait_for_topic(bootstrap: str, name: str, partitions: int, timeout: float = 30.0) -> None:
    admin = confluent_admin(bootstrap)
    last = None

    def ready() -> bool:
        nonlocal last
        last = admin.list_topics(name, timeout=5).topics.get(name)
        return last is not None and last.error is None and len(last.partitions) == partitions and all(
            p.leader >= 0 for p in last.partitions.values()
        )

    wait_until(ready, timeout=timeout, interval=0.2, what=lambda: f"topic {name} ready with {partitions} partitions: {last}")


def watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (low, high) watermark."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-watermarks",
                         "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=10)
        parts = sorted(meta.topics[topic].partitions)
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in parts}
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, *, min_count: int = 0, timeout: float = 30.0,
             config: dict | None = None, quiet: float = 0.3) -> list[Got]:
    """Every record in `topic` (reference reader: librdkafka, manual assignment from the start).

    Reads until every partition reached its high watermark and at least
    `min_count` records arrived, then `quiet` seconds more so that extra
    records (duplicates) are seen too.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    deadline = time.monotonic() + timeout
    marks = watermarks(bootstrap, topic)
    target = max(min_count, sum(high - low for low, high in marks.values()))
    conf = {"bootstrap.servers": bootstrap, "group.id": "compat-reader", "enable.auto.commit": False,
            "enable.partition.eof": False, "fetch.message.max.bytes": 2_000_000, "fetch.wait.max.ms": 100}
    conf.update(config or {})
    consumer = Consumer(conf)
    out: list[Got] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in marks])
        quiet_until = None
        while True:
            now = time.monotonic()
            if len(out) >= target:
                quiet_until = quiet_until or now + quiet
                if now >= quiet_until:
                    break
            if now > deadline:
                raise AssertionError(f"read_all({topic}): timed out with {len(out)} of {target} records, "
                                     f"watermarks {marks}")
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                raise AssertionError(f"read_all({topic}): {msg.error()}")
            out.append(_got_from_confluent(msg))
            quiet_until = None
    finally:
        consumer.close()
    return out


def _got_from_confluent(msg) -> Got:
    headers = tuple((k, v if v is not None else b"") for k, v in (msg.headers() or []))
    return Got(partition=msg.partition(), offset=msg.offset(), key=msg.key(), value=msg.value(),
               headers=headers, timestamp_ms=msg.timestamp()[1])


# --------------------------------------------------------------------------- produce


def produce(client: str, bootstrap: str, topic: str, records: Sequence[Rec], *,
            compression: str | None = None, config: dict | None = None, timeout: float = 60.0) -> list[Rec]:
    """Produce `records` with `client`, acks=all, and wait until all are acknowledged.

    Returns the records in the order they were sent (kcat sends them in
    groups), which is the order `assert_records_match` checks per key.
    """
    fn = {
        "kafka-python": produce_kafka_python,
        "aiokafka": produce_aiokafka,
        "confluent": produce_confluent,
        "kcat": produce_kcat,
        "java": produce_java,
    }[client]
    sent = fn(bootstrap, topic, records, compression=compression, config=config or {}, timeout=timeout)
    return list(records) if sent is None else sent


def produce_kafka_python(bootstrap, topic, records, *, compression, config, timeout):
    from kafka import KafkaProducer

    conf = {"bootstrap_servers": bootstrap, "acks": "all", "compression_type": compression,
            "request_timeout_ms": 30000, "linger_ms": 5}
    conf.update(config)
    producer = KafkaProducer(**conf)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, headers=list(r.headers) or None,
                                 partition=r.partition, timestamp_ms=r.timestamp_ms) for r in records]
        producer.flush(timeout=timeout)
        for f in futures:
            f.get(timeout=timeout)
    finally:
        producer.close(timeout=10)


def produce_aiokafka(bootstrap, topic, records, *, compression, config, timeout):
    from aiokafka import AIOKafkaProducer

    async def run():
        conf = {"bootstrap_servers": bootstrap, "acks": "all", "compression_type": compression,
                "request_timeout_ms": 30000, "linger_ms": 5}
        conf.update(config)
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=r.value, key=r.key, headers=list(r.headers) or None,
                                           partition=r.partition, timestamp_ms=r.timestamp_ms) for r in records]
            await asyncio.wait_for(asyncio.gather(*futures), timeout)
        finally:
            await producer.stop()

    asyncio.run(run())


def produce_confluent(bootstrap, topic, records, *, compression, config, timeout):
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": int(timeout * 1000)}
    if compression:
        conf["compression.type"] = compression
    conf.update(config)
    producer = Producer(conf)
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))

    for r in records:
        kwargs = {"value": r.value, "key": r.key, "on_delivery": on_delivery}
        if r.headers:
            kwargs["headers"] = list(r.headers)
        if r.partition is not None:
            kwargs["partition"] = r.partition
        if r.timestamp_ms is not None:
            kwargs["timestamp"] = r.timestamp_ms
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(timeout)
    if remaining or errors:
        raise ClientError("confluent", f"{remaining} undelivered, errors: {errors[:5]}")


# kcat ------------------------------------------------------------------------


def kcat_binary() -> str | None:
    return shutil.which("kcat") or shutil.which("kafkacat")


def produce_kcat(bootstrap, topic, records, *, compression, config, timeout):
    """One kcat run per (keyed?, headers, partition) group: kcat's -H applies to a whole run."""
    groups: dict[tuple, list[Rec]] = {}
    for r in records:
        if r.timestamp_ms is not None:
            raise ValueError("kcat adapter does not set per-record timestamps")
        groups.setdefault((r.key is not None, r.headers, r.partition), []).append(r)
    sent: list[Rec] = []
    for (keyed, headers, partition), group in groups.items():
        sent += group
        argv = [kcat_binary(), "-P", "-b", bootstrap, "-t", topic, "-X", "acks=all"]
        if compression:
            argv += ["-z", compression]
        if partition is not None:
            argv += ["-p", str(partition)]
        for name, value in headers:
            argv += ["-H", f"{name}={value.decode()}"]
        for key, value in config.items():
            argv += ["-X", f"{key}={value}"]
        if keyed:
            argv += ["-K", "\t"]
            lines = b"".join(r.key + b"\t" + r.value + b"\n" for r in group)
        else:
            lines = b"".join(r.value + b"\n" for r in group)
        out = subprocess.run(argv, input=lines, capture_output=True, timeout=timeout)
        if out.returncode != 0 or b"ERROR" in out.stderr or b"% Failed" in out.stderr:
            raise ClientError("kcat", f"produce exited {out.returncode}", out.stderr.decode(errors="replace"))
    return sent


def consume_kcat(bootstrap, topic, count, *, timeout, group=None, config=None, offset="beginning",
                 partition: int | None = None) -> list[Got]:
    argv = [kcat_binary(), "-C", "-b", bootstrap, "-J", "-o", str(offset), "-c", str(count)]
    if group:
        argv = [kcat_binary(), "-b", bootstrap, "-G", group, "-J", "-c", str(count), "-X",
                "auto.offset.reset=earliest", topic]
    else:
        argv += ["-t", topic]
        if partition is not None:
            argv += ["-p", str(partition)]
        else:
            argv += ["-e"] if count == 0 else []
    for key, value in (config or {}).items():
        argv += ["-X", f"{key}={value}"]
    try:
        out = subprocess.run(argv, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ClientError("kcat", f"consume timed out after {timeout}s",
                          (exc.stderr or b"").decode(errors="replace")) from exc
    if out.returncode != 0:
        raise ClientError("kcat", f"consume exited {out.returncode}", out.stderr.decode(errors="replace"))
    got = []
    for line in out.stdout.decode().splitlines():
        if not line.startswith("{"):
            continue
        doc = json.loads(line)
        raw = doc.get("headers") or []
        headers = tuple((raw[i], (raw[i + 1] or "").encode()) for i in range(0, len(raw), 2))
        got.append(Got(partition=doc["partition"], offset=doc["offset"],
                       key=None if doc.get("key") is None else doc["key"].encode(),
                       value=None if doc.get("payload") is None else doc["payload"].encode(),
                       headers=headers, timestamp_ms=doc.get("ts", -1)))
    return got


# java ------------------------------------------------------------------------

JAVA_NULL = "<null>"


def produce_java(bootstrap, topic, records, *, compression, config, timeout):
    """ConsoleProducer, one line per record: `h1:v1,h2:v2<TAB>key<TAB>value`."""
    from tinystream.testing.peers.apache_kafka import CONSOLE_PRODUCER, run_java_tool

    groups: dict[int | None, list[Rec]] = {}
    for r in records:
        groups.setdefault(r.partition, []).append(r)
    sent: list[Rec] = []
    for partition, group in groups.items():
        sent += group
        args = ["--bootstrap-server", bootstrap, "--topic", topic,
                "--property", "parse.key=true", "--property", "key.separator=\t",
                "--property", "parse.headers=true", "--property", "headers.delimiter=\t",
                "--property", "headers.separator=,", "--property", "headers.key.separator=:",
                "--property", f"null.marker={JAVA_NULL}",
                "--producer-property", "acks=all", "--producer-property", "linger.ms=5"]
        if compression:
            args += ["--producer-property", f"compression.type={compression}"]
        if partition is not None:
            raise NotImplementedError("java adapter: ConsoleProducer cannot pick a partition")
        for key, value in config.items():
            args += ["--producer-property", f"{key}={value}"]
        lines = []
        for r in group:
            headers = ",".join(f"{k}:{v.decode()}" for k, v in r.headers) or JAVA_NULL
            key = r.key.decode() if r.key is not None else JAVA_NULL
            lines.append(f"{headers}\t{key}\t{r.value.decode()}\n")
        out = run_java_tool(CONSOLE_PRODUCER, args, input="".join(lines), timeout=timeout)
        if out.returncode != 0 or "ERROR" in out.stderr:
            raise ClientError("java", f"ConsoleProducer exited {out.returncode}", out.stdout + out.stderr)
    return sent


def consume_java(bootstrap, topic, count, *, timeout, group=None, config=None, offset="earliest",
                 partition: int | None = None) -> list[Got]:
    """ConsoleConsumer with partition, offset, headers, key and value on each line."""
    from tinystream.testing.peers.apache_kafka import CONSOLE_CONSUMER, run_java_tool

    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--max-messages", str(count),
            "--timeout-ms", str(int(timeout * 1000 * 0.8)),
            "--property", "print.partition=true", "--property", "print.offset=true",
            "--property", "print.headers=true", "--property", "print.key=true",
            "--property", "print.timestamp=true",
            "--property", "key.separator=\t", "--property", "headers.separator=,",
            "--property", f"null.literal={JAVA_NULL}"]
    if partition is not None:
        args += ["--partition", str(partition), "--offset", str(offset)]
    elif offset == "earliest":
        args += ["--from-beginning"]  # offset="group": start at the group's committed offsets
    if group:
        args += ["--group", group]
    for key, value in (config or {}).items():
        args += ["--consumer-property", f"{key}={value}"]
    out = run_java_tool(CONSOLE_CONSUMER, args, timeout=timeout + 30)
    got = []
    for line in out.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) < 6 or not parts[1].startswith("Partition:"):
            continue
        ts_field, part_field, offset_field, headers_field, key, value = parts[:6]
        headers: Headers = ()
        if headers_field != "NO_HEADERS":
            headers = tuple((h.split(":", 1)[0], h.split(":", 1)[1].encode()) for h in headers_field.split(","))
        got.append(Got(partition=int(part_field.split(":")[1]), offset=int(offset_field.split(":")[1]),
                       key=None if key == JAVA_NULL else key.encode(),
                       value=None if value == JAVA_NULL else value.encode(), headers=headers,
                       timestamp_ms=int(ts_field.split(":")[1])))
    if len(got) < count:
        raise ClientError("java", f"ConsoleConsumer got {len(got)} of {count} (exit {out.returncode})",
                          out.stderr)
    return got


# --------------------------------------------------------------------------- consume (no group)


def consume(client: str, bootstrap: str, topic: str, count: int, *, timeout: float = 60.0,
            config: dict | None = None) -> list[Got]:
    """Read `count` records from the start of every partition of `topic` with `client`."""
    if client == "kcat":
        return consume_kcat(bootstrap, topic, count, timeout=timeout, config=config)
    if client == "java":
        return consume_java(bootstrap, topic, count, timeout=timeout, config=config,
                            group=unique_name("compat-java"))
    fn = {"kafka-python": consume_kafka_python, "aiokafka": consume_aiokafka, "confluent": consume_confluent}[client]
    return fn(bootstrap, topic, count, timeout=timeout, config=config or {})


def _partitions(bootstrap: str, topic: str) -> list[int]:
    return sorted(watermarks(bootstrap, topic))


def consume_kafka_python(bootstrap, topic, count, *, timeout, config):
    from kafka import KafkaConsumer, TopicPartition

    conf = {"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False,
            "auto_offset_reset": "earliest", "fetch_max_wait_ms": 200, "consumer_timeout_ms": 1000}
    conf.update(config)
    consumer = KafkaConsumer(**conf)
    got: list[Got] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in _partitions(bootstrap, topic)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got.extend(_got_from_kafka_python(m) for m in msgs)
    finally:
        consumer.close()
    if len(got) < count:
        raise ClientError("kafka-python", f"consumed {len(got)} of {count} in {timeout}s")
    return got


def _got_from_kafka_python(m) -> Got:
    headers = tuple((k, v if v is not None else b"") for k, v in (m.headers or []))
    return Got(partition=m.partition, offset=m.offset, key=m.key, value=m.value, headers=headers,
               timestamp_ms=m.timestamp)


def consume_aiokafka(bootstrap, topic, count, *, timeout, config):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Got]:
        conf = {"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False,
                "auto_offset_reset": "earliest", "fetch_max_wait_ms": 200}
        conf.update(config)
        consumer = AIOKafkaConsumer(**conf)
        await consumer.start()
        got: list[Got] = []
        try:
            consumer.assign([TopicPartition(topic, p) for p in _partitions(bootstrap, topic)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for msgs in batches.values():
                    got.extend(_got_from_aiokafka(m) for m in msgs)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    if len(got) < count:
        raise ClientError("aiokafka", f"consumed {len(got)} of {count} in {timeout}s")
    return got


def _got_from_aiokafka(m) -> Got:
    headers = tuple((k, v if v is not None else b"") for k, v in (m.headers or ()))
    return Got(partition=m.partition, offset=m.offset, key=m.key, value=m.value, headers=headers,
               timestamp_ms=m.timestamp)


def consume_confluent(bootstrap, topic, count, *, timeout, config):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "group.id": unique_name("compat-assign"), "enable.auto.commit": False,
            "fetch.wait.max.ms": 200}
    conf.update(config)
    consumer = Consumer(conf)
    got: list[Got] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in _partitions(bootstrap, topic)])
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise ClientError("confluent", f"consume error {msg.error()}")
            got.append(_got_from_confluent(msg))
    finally:
        consumer.close()
    if len(got) < count:
        raise ClientError("confluent", f"consumed {len(got)} of {count} in {timeout}s")
    return got


# --------------------------------------------------------------------------- parametrization


def require_client(client: str) -> None:
    """Skip when a client's tool is not installed on this machine."""
    import pytest

    if client == "kcat" and kcat_binary() is None:
        pytest.skip("kcat not installed: run tools/install-clients.sh")
    if client == "java":
        from tinystream.testing.peers import PeerUnavailable
        from tinystream.testing.peers.apache_kafka import jars_dir, java_executable

        try:
            jars_dir()
            java_executable()
        except PeerUnavailable as exc:
            pytest.skip(str(exc))


def client_params(clients=ALL_CLIENTS):
    """pytest.param per client; the Java tools are slow to start, so they are also marked slow."""
    import pytest

    return [pytest.param(c, id=c, marks=[pytest.mark.slow] if c == "java" else []) for c in clients]


# --------------------------------------------------------------------------- misc


def run_async(coro):
    return asyncio.run(coro)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in {"1", "true", "yes"}


def chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
