"""Consume workloads: a raw Fetch loop, librdkafka, and Kafka's ConsumerPerformance.

The topic is filled first (raw producer, acks=1, not measured) unless it
already holds enough records. Then:

* raw: each of `connections` connections owns some partitions and keeps
  one Fetch (v4) in flight; records are counted from the batch headers
  (recordCount at byte 57), never decoded, and the next offset is the last
  batch's baseOffset + lastOffsetDelta + 1. A batch cut at the end of a
  response (allowed by the protocol) is fetched again next time. Latency is
  per fetch round trip.
* confluent: confluent-kafka's Consumer, assigned every partition from the
  beginning, consume() in batches of 10,000.
* java: org.apache.kafka.tools.ConsumerPerformance (kafka-consumer-perf-test),
  which joins a group: its fetch time excludes the join.
* franz: franzbench, franz-go's kgo client (franz_client.py), consuming every
  partition from the start without a group; its time is from the first poll.
"""

from __future__ import annotations

import asyncio
import csv
import datetime
import io
import struct
import time
from dataclasses import dataclass

from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v4.response import FetchResponse
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i8, i32, i32Timedelta, i64

from tinystream.bench import franz_client
from tinystream.bench.control import end_offsets, ensure_topic
from tinystream.bench.cpu import CpuMeter
from tinystream.bench.produce_workloads import ProduceSpec, _raw_produce
from tinystream.bench.stats import Latencies, Progress, RunResult
from tinystream.bench.targets import Target
from tinystream.bench.tls_cells import java_client_config
from tinystream.bench.wire_client import PreparedRequest, WireConnection
from tinystream.testing.peers.apache_kafka import CONSUMER_PERFORMANCE, run_java_tool

read_fetch_response = entity_reader(FetchResponse)  # the reference decoder (tests compare against it)
_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_I32 = struct.Struct(">i")
BATCH_HEADER = 61
OFFSET_OUT_OF_RANGE = 1


@dataclass(frozen=True)
class ConsumeSpec:
    topic: str
    partitions: int
    records: int
    record_size: int
    batch_bytes: int
    compression: str
    fetch_bytes: int = 8 << 20  # per partition (Kafka's max.partition.fetch.bytes is 1 MiB; a bench wants more)
    max_bytes: int = 64 << 20  # per response (Kafka's fetch.max.bytes: 50 MiB)
    connections: int = 2
    progress: bool = True


class ConsumeError(RuntimeError):
    pass


_FETCH_PARTITION = struct.Struct(">ihqq")  # partition, error_code, high_watermark, last_stable_offset


def fetch_v4_partitions(payload: memoryview):
    """Yield (partition, error_code, records memoryview) from a Fetch v4 response payload, without copying.

    kio decodes the same response (the smoke test checks the two agree), but
    its reader copies every partition's records into a new bytes object; at
    a few hundred MB/s that copy, not the broker, would be what is measured.
    Layout (FetchResponse v4, response header v0): correlation_id i32 |
    throttle_time_ms i32 | [topic string | [partition i32 | error i16 |
    high_watermark i64 | last_stable_offset i64 | aborted [producer_id i64 |
    first_offset i64] | records bytes]].
    """
    pos = 8
    (topics,) = _I32.unpack_from(payload, pos)
    pos += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", payload, pos)
        pos += 2 + max(0, name_len)
        (parts,) = _I32.unpack_from(payload, pos)
        pos += 4
        for _ in range(parts):
            partition, error_code, _, _ = _FETCH_PARTITION.unpack_from(payload, pos)
            pos += _FETCH_PARTITION.size
            (aborted,) = _I32.unpack_from(payload, pos)
            pos += 4 + 16 * max(0, aborted)
            (size,) = _I32.unpack_from(payload, pos)
            pos += 4
            records = payload[pos:pos + size] if size > 0 else payload[0:0]
            pos += max(0, size)
            yield partition, error_code, records


def count_records(buf: bytes | memoryview, fetch_offset: int) -> tuple[int, int]:
    """(records at or after fetch_offset, next offset) from whole batches in `buf`."""
    pos, end, records, next_offset = 0, len(buf), 0, fetch_offset
    while pos + BATCH_HEADER <= end:
        base, length = _BATCH_HEAD.unpack_from(buf, pos)
        size = 12 + length
        if pos + size > end:
            break  # a cut last batch: fetched again from its start
        last = base + _I32.unpack_from(buf, pos + 23)[0]
        if last >= fetch_offset:
            count = _I32.unpack_from(buf, pos + 57)[0]
            records += count if base >= fetch_offset else last + 1 - fetch_offset
            next_offset = last + 1
        pos += size
    return records, next_offset


async def fill_topic(target: Target, spec: ConsumeSpec, *, show: bool) -> dict[int, int]:
    """Make sure the topic holds at least spec.records records; returns its end offsets."""
    target = target.for_setup()
    host, port = target.host_port
    conn = await WireConnection.open(host, port)
    try:
        await ensure_topic(conn, spec.topic, spec.partitions)
        ends = await end_offsets(conn, spec.topic, spec.partitions)
    finally:
        await conn.close()
    missing = spec.records - sum(ends.values())
    if missing > 0:
        produce = ProduceSpec(topic=spec.topic, partitions=spec.partitions, records=missing,
                              record_size=spec.record_size, batch_bytes=spec.batch_bytes, acks="1",
                              compression=spec.compression, progress=show)
        await _raw_produce(target, produce, missing, label=f"{target.name} filling")
        conn = await WireConnection.open(host, port)
        try:
            ends = await end_offsets(conn, spec.topic, spec.partitions)
        finally:
            await conn.close()
    return ends


# --------------------------------------------------------------------------- raw


def _fetch_request(topic: str, offsets: dict[int, int], spec: ConsumeSpec) -> PreparedRequest:
    return PreparedRequest.from_request(FetchRequest(
        replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
        min_bytes=i32(1), max_bytes=i32(spec.max_bytes), isolation_level=i8(0),
        topics=(FetchTopic(topic=TopicName(topic), partitions=tuple(
            FetchPartition(partition=i32(p), fetch_offset=i64(o), partition_max_bytes=i32(spec.fetch_bytes))
            for p, o in sorted(offsets.items()))),),
    ))


async def _raw_consume(target: Target, spec: ConsumeSpec, ends: dict[int, int]) -> RunResult:
    host, port = target.host_port
    goal = min(spec.records, sum(ends.values()))
    connections = max(1, min(spec.connections, spec.partitions))
    owned = [[p for p in range(spec.partitions) if p % connections == c] for c in range(connections)]
    conns = [await WireConnection.open(host, port, buffer_bytes=16 << 20) for _ in range(connections)]
    latencies = Latencies()
    progress = Progress(target.name, goal, enabled=spec.progress)
    state = {"records": 0, "bytes": 0, "fetches": 0}

    async def fetcher(index: int) -> None:
        conn = conns[index]
        offsets = {p: 0 for p in owned[index]}
        while state["records"] < goal:
            todo = {p: o for p, o in offsets.items() if o < ends[p]}
            if not todo:
                return
            started = time.perf_counter()
            payload = await conn.send(_fetch_request(spec.topic, todo, spec))
            latencies.add(time.perf_counter() - started)
            state["fetches"] += 1
            for partition, error_code, data in fetch_v4_partitions(payload):
                if error_code != 0:
                    raise ConsumeError(f"fetch {spec.topic}-{partition}: error {error_code}")
                count, next_offset = count_records(data, offsets[partition])
                offsets[partition] = next_offset
                state["records"] += count
                state["bytes"] += len(data)
            progress.update(state["records"], state["records"] * spec.record_size)

    start = time.perf_counter()
    try:
        await asyncio.gather(*(fetcher(c) for c in range(connections)))
    finally:
        elapsed = time.perf_counter() - start
        for conn in conns:
            await conn.close()
    records = state["records"]
    return RunResult(
        target=target.name, bootstrap=target.bootstrap, client="raw", operation="consume", records=records,
        bytes=records * spec.record_size, seconds=elapsed, latency_ms=latencies.summary(), latency_unit="fetch",
        requests=state["fetches"], version=target.version,
        extra={"connections": connections, "fetch_bytes_per_partition": spec.fetch_bytes,
               "wire_bytes": state["bytes"], "compression": spec.compression},
    )


def run_raw(target: Target, spec: ConsumeSpec) -> RunResult:
    async def run():
        ends = await fill_topic(target, spec, show=spec.progress)
        with CpuMeter(target.pgid).measure() as cpu:
            result = await _raw_consume(target, spec, ends)
        result.broker_cpu_s = cpu.seconds
        return result

    return asyncio.run(run())


# --------------------------------------------------------------------------- confluent


def run_confluent(target: Target, spec: ConsumeSpec) -> RunResult:
    ends = asyncio.run(fill_topic(target, spec, show=spec.progress))
    goal = min(spec.records, sum(ends.values()))
    # Optional: the [test] and [spark] extras install confluent-kafka; the base install (the image) has none.
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "tinystream-bench",
                         "enable.auto.commit": False, "fetch.max.bytes": spec.max_bytes,
                         "max.partition.fetch.bytes": spec.fetch_bytes, "fetch.wait.max.ms": 100,
                         "queued.max.messages.kbytes": 262144, **target.client_config})
    progress = Progress(target.name, goal, enabled=spec.progress)
    count = 0
    latencies = Latencies()
    try:
        with CpuMeter(target.pgid).measure() as cpu:
            consumer.assign([TopicPartition(spec.topic, p, OFFSET_BEGINNING) for p in range(spec.partitions)])
            start = time.perf_counter()
            deadline = start + max(60.0, goal / 50_000)
            while count < goal:
                if time.perf_counter() > deadline:
                    raise ConsumeError(f"confluent: {count} of {goal} records before the deadline")
                t0 = time.perf_counter()
                msgs = consumer.consume(num_messages=10_000, timeout=1.0)
                if msgs:
                    latencies.add(time.perf_counter() - t0)
                for m in msgs:
                    if m.error():
                        raise ConsumeError(str(m.error()))
                count += len(msgs)
                progress.update(count, count * spec.record_size)
            elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return RunResult(
        target=target.name, bootstrap=target.bootstrap, client="confluent", operation="consume", records=count,
        bytes=count * spec.record_size, seconds=elapsed, latency_ms=latencies.summary(),
        latency_unit="consume() call of up to 10,000", version=target.version, broker_cpu_s=cpu.seconds,
        extra={"compression": spec.compression},
    )


# --------------------------------------------------------------------------- java


def parse_consumer_performance(stdout: str) -> dict[str, str] | None:
    """ConsumerPerformance's CSV result (the header line from `start.time` and the line after), or None."""
    rows = [line for line in stdout.splitlines() if line.strip()]
    header_index = next((i for i, line in enumerate(rows) if line.startswith("start.time")), None)
    if header_index is None or header_index + 1 >= len(rows):
        return None
    reader = csv.reader(io.StringIO(rows[header_index] + "\n" + rows[header_index + 1]), skipinitialspace=True)
    header, values = list(reader)
    return dict(zip(header, values))


def run_java(target: Target, spec: ConsumeSpec) -> RunResult:
    ends = asyncio.run(fill_topic(target, spec, show=spec.progress))
    goal = min(spec.records, sum(ends.values()))
    with java_client_config(target.client_config) as config, CpuMeter(target.pgid).measure() as cpu:
        # the whole tool run: the broker idles while the JVM starts
        args = ["--bootstrap-server", target.bootstrap, "--topic", spec.topic, "--messages", str(goal),
                "--timeout", "60000", "--consumer.config", config, "--fetch-size", str(spec.fetch_bytes)]
        out = run_java_tool(CONSUMER_PERFORMANCE, args, timeout=max(120.0, goal / 50_000),
                            jvm_opts=("-Xms512m", "-Xmx2g", "-XX:+UseG1GC"))
    row = parse_consumer_performance(out.stdout)
    if out.returncode != 0 or row is None:
        raise ConsumeError(f"ConsumerPerformance exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    records = int(row["data.consumed.in.nMsg"])
    fetch_ms = float(row.get("fetch.time.ms") or 0)
    seconds = fetch_ms / 1000 if fetch_ms > 0 else records / float(row["nMsg.sec"])
    return RunResult(
        target=target.name, bootstrap=target.bootstrap, client="java", operation="consume", records=records,
        bytes=records * spec.record_size, seconds=seconds, latency_ms={}, latency_unit="n/a",
        version=target.version, broker_cpu_s=cpu.seconds, extra={"rebalance.time.ms": row.get("rebalance.time.ms"), "raw": row},
    )


# --------------------------------------------------------------------------- franz


def run_franz(target: Target, spec: ConsumeSpec) -> RunResult:
    ends = asyncio.run(fill_topic(target, spec, show=spec.progress))
    goal = min(spec.records, sum(ends.values()))
    timeout_s = max(120.0, goal / 50_000)
    command = franz_client.consume_command(
        franz_client.franz_binary(), target.bootstrap, target.client_config, topic=spec.topic, records=goal,
        fetch_bytes=spec.fetch_bytes, max_bytes=spec.max_bytes, timeout_s=timeout_s)
    got, cpu_s = franz_client.run_metered(command, timeout_s=timeout_s, pgid=target.pgid, error=ConsumeError)
    return RunResult(
        target=target.name, bootstrap=target.bootstrap, client="franz", operation="consume", records=got.records,
        bytes=got.bytes, seconds=got.seconds, latency_ms={}, latency_unit="n/a", requests=got.polls,
        version=target.version, broker_cpu_s=cpu_s, client_cpu_s=got.cpu_seconds,
        extra={"compression": spec.compression, "franz-go": franz_client.FRANZ_GO_VERSION, "raw": got.raw},
    )


RUNNERS = {"raw": run_raw, "confluent": run_confluent, "java": run_java, "franz": run_franz}
