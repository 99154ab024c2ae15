"""Produce workloads: the raw pipelined producer, librdkafka, and Kafka's ProducerPerformance.

All three take the same `ProduceSpec` and return a `RunResult`, so the
command can run one workload against several brokers and compare.

* raw: pre-built batches (one per partition per request), `in_flight`
  requests pipelined on each of `connections` connections; latency is per
  request. acks=0 has no responses: the run ends when the broker's end
  offsets show every record.
* confluent: confluent-kafka's Producer, one produce() call per record (the
  Python loop is the limit; it is a real client's figure); latency per
  record, sampled. `idempotent` turns on enable.idempotence (acks=all);
  `txn_records` > 0 makes it a transactional producer that commits every
  that many records (KIP-98), so the cost of transactions shows against
  idempotent produce on the same broker.
* java: org.apache.kafka.tools.ProducerPerformance from the Kafka jars
  (kafka-producer-perf-test), its own figures parsed from its last line.
"""

from __future__ import annotations

import asyncio
import datetime
import re
import sys
import time
from dataclasses import dataclass

from kio.schema.produce.v7.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.produce.v7.response import ProduceResponse
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.primitive import i16, i32, i32Timedelta

from tinystream.bench import franz_client
from tinystream.bench.batches import make_batch, payloads, records_per_batch
from tinystream.bench.control import end_offsets, ensure_topic
from tinystream.bench.cpu import CpuMeter
from tinystream.bench.stats import Latencies, Progress, RunResult
from tinystream.bench.targets import Target
from tinystream.bench.tls_cells import java_client_props
from tinystream.bench.wire_client import PreparedRequest, WireConnection
from tinystream.testing.peers.apache_kafka import PRODUCER_PERFORMANCE, run_java_tool

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
_read_produce_response = entity_reader(ProduceResponse)


@dataclass(frozen=True)
class ProduceSpec:
    topic: str
    partitions: int
    records: int
    record_size: int
    batch_bytes: int
    acks: str
    compression: str
    connections: int = 2
    in_flight: int = 4
    warmup_records: int = 0
    progress: bool = True
    schema: str | None = None  # raw client: JSON values, measured on a topic without then with this schema
    values: tuple[bytes, ...] = ()  # raw client: these values, cycled, instead of generated ones
    idempotent: bool = False  # confluent client: enable.idempotence (acks=all)
    txn_records: int = 0  # confluent client: > 0 is a transactional producer committing every that many records


class ProduceError(RuntimeError):
    pass


# --------------------------------------------------------------------------- raw


async def _raw_produce(target: Target, spec: ProduceSpec, records: int, *, label: str,
                       topic_config: dict[str, str] | None = None) -> RunResult:
    host, port = target.host_port
    before = await _prepare_topic(host, port, spec, topic_config)
    per_batch = records_per_batch(spec.batch_bytes, spec.record_size)
    batch = make_batch(per_batch, spec.record_size, compression=spec.compression, json_values=spec.schema is not None,
                       values=spec.values)
    connections = max(1, min(spec.connections, spec.partitions))
    owned = [[p for p in range(spec.partitions) if p % connections == c] for c in range(connections)]
    acks = ACKS[spec.acks]
    prepared = [_produce_request(spec.topic, parts, batch, acks) for parts in owned]
    per_request = [per_batch * len(parts) for parts in owned]
    quotas, total_requests, covered = _deal(per_request, records)

    conns = [await WireConnection.open(host, port) for _ in range(connections)]
    latencies = Latencies()
    progress = Progress(label, covered, enabled=spec.progress)
    errors: list = []
    start = time.perf_counter()
    try:
        await _send_shares(conns, prepared, per_request, quotas, acks=acks, spec=spec, progress=progress,
                           latencies=latencies, errors=errors)
        if acks == 0:
            await _wait_for_offsets(conns[0], spec, before, covered)
        elapsed = time.perf_counter() - start
        # Trust, but verify: the end offsets must have moved by exactly what was acknowledged.
        after = await end_offsets(conns[0], spec.topic, spec.partitions)
    finally:
        for conn in conns:
            await conn.close()
    if errors:
        raise ProduceError(f"{len(errors)} partition errors, first: {errors[:3]}")
    stored = sum(after[p] - before.get(p, 0) for p in after)
    verified = stored == covered
    return RunResult(
        target=target.name, bootstrap=target.bootstrap, client="raw", operation="produce",
        records=covered, bytes=covered * spec.record_size, seconds=elapsed, latency_ms=latencies.summary(),
        latency_unit="request", requests=total_requests, version=target.version,
        verified=verified,
        problem="" if verified else f"{covered} records acknowledged but the end offsets moved by {stored}",
        extra={"records_per_batch": per_batch, "batch_bytes": len(batch), "connections": connections,
               "in_flight_per_connection": spec.in_flight, "acks": spec.acks, "compression": spec.compression},
    )


async def _prepare_topic(host: str, port: int, spec: ProduceSpec, topic_config: dict[str, str] | None) -> dict[int, int]:
    """The topic exists (with `topic_config`); returns its end offsets before the run, to verify against."""
    control = await WireConnection.open(host, port)
    try:
        await ensure_topic(control, spec.topic, spec.partitions, config=topic_config)
        return await end_offsets(control, spec.topic, spec.partitions)
    finally:
        await control.close()


def _produce_request(topic: str, partitions: list[int], batch: bytes, acks: int) -> PreparedRequest:
    """One connection's request, encoded once and sent again and again: the same batch to each partition it owns."""
    return PreparedRequest.from_request(ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=tuple(
            PartitionProduceData(index=i32(p), records=batch) for p in partitions)),),
    ))


def _deal(per_request: list[int], records: int) -> tuple[list[int], int, int]:
    """(requests per connection, requests, records covered): requests are dealt round-robin over the
    connections until the records are covered, so the last request may overshoot `records`."""
    connections = len(per_request)
    quotas = [0] * connections
    total_requests = 0
    covered = 0
    while covered < records:
        quotas[total_requests % connections] += 1
        covered += per_request[total_requests % connections]
        total_requests += 1
    return quotas, total_requests, covered


async def _send_shares(
    conns: list[WireConnection], prepared: list[PreparedRequest], per_request: list[int], quotas: list[int], *,
    acks: int, spec: ProduceSpec, progress: Progress, latencies: Latencies, errors: list,
) -> None:
    """Each connection sends its share with `spec.in_flight` senders, so that many requests are outstanding
    on it; latency is per request. acks=0 has no answers to time: only the records sent are counted."""
    state = {"acked": 0, "sent": 0}
    remaining = list(quotas)

    async def sender(index: int) -> None:
        conn, req, n = conns[index], prepared[index], per_request[index]
        while True:
            if remaining[index] <= 0:
                return
            remaining[index] -= 1
            if acks == 0:
                await conn.send_no_response(req)
                state["sent"] += n
                progress.update(state["sent"], state["sent"] * spec.record_size)
                continue
            started = time.perf_counter()
            payload = await conn.send(req)
            latencies.add(time.perf_counter() - started)
            _check_produce(payload, errors)
            state["acked"] += n
            progress.update(state["acked"], state["acked"] * spec.record_size)

    await asyncio.gather(*(sender(c) for c in range(len(conns)) for _ in range(spec.in_flight)))


def _check_produce(payload, errors: list) -> None:
    response, _ = _read_produce_response(payload, 4)  # after the correlation id (response header v0)
    for topic in response.responses:
        for part in topic.partition_responses:
            if part.error_code != 0:
                errors.append((topic.name, int(part.index), int(part.error_code)))


async def _wait_for_offsets(conn: WireConnection, spec: ProduceSpec, before: dict[int, int], expected: int,
                            timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        after = await end_offsets(conn, spec.topic, spec.partitions)
        stored = sum(after[p] - before.get(p, 0) for p in after)
        if stored >= expected:
            return
        if time.monotonic() > deadline:
            raise ProduceError(f"acks=0: only {stored} of {expected} records stored after {timeout}s")
        await asyncio.sleep(0.02)


def run_raw(target: Target, spec: ProduceSpec) -> RunResult:
    if spec.schema is not None:
        return run_raw_with_schema(target, spec)
    return run_raw_once(target, spec, label=target.name)


def run_raw_once(target: Target, spec: ProduceSpec, *, label: str,
                 topic_config: dict[str, str] | None = None) -> RunResult:
    """One measured raw run after its unmeasured warm-up, into `spec.topic` (created with `topic_config` if
    missing); the broker's CPU is measured over the run."""

    async def run():
        if spec.warmup_records:
            await _raw_produce(target, _quiet(spec), spec.warmup_records, label=f"{label} warm-up",
                               topic_config=topic_config)
        with CpuMeter(target.pgid).measure() as cpu:
            result = await _raw_produce(target, spec, spec.records, label=label, topic_config=topic_config)
        result.broker_cpu_s = cpu.seconds
        return result

    return asyncio.run(run())


async def produce_once(target: Target, topic: str, partition: int, batch: bytes) -> int:
    """Send one batch (acks=1) through the raw client's request path; the partition's error code (0: stored)."""
    conn = await WireConnection.open(*target.host_port)
    try:
        errors: list = []
        _check_produce(await conn.send(_produce_request(topic, [partition], batch, 1)), errors)
    finally:
        await conn.close()
    return errors[0][2] if errors else 0


SCHEMA_CONFIG = "tinystream.value.schema"


def run_raw_with_schema(target: Target, spec: ProduceSpec) -> RunResult:
    """The same JSON batches into a topic without a schema, then into one with it; the cost is the difference.

    Both runs are on the same broker, one after the other, each after its own
    warm-up. The returned result is the schema run, with the baseline's
    figures and the relative cost in `extra`.
    """
    assert spec.schema is not None
    plain = ProduceSpec(**{**spec.__dict__, "topic": f"{spec.topic}-noschema"})
    checked = ProduceSpec(**{**spec.__dict__, "topic": f"{spec.topic}-schema"})
    config = {SCHEMA_CONFIG: spec.schema}

    async def run():
        results = []
        for one, topic_config in ((plain, None), (checked, config)):
            label = f"{target.name} {'schema' if topic_config else 'no schema'}"
            if spec.warmup_records:
                await _raw_produce(target, _quiet(one), spec.warmup_records, label=f"{label} warm-up",
                                   topic_config=topic_config)
            results.append(await _raw_produce(target, one, spec.records, label=label, topic_config=topic_config))
        return results

    baseline, result = asyncio.run(run())
    cost = 1 - result.records_per_s / baseline.records_per_s if baseline.records_per_s else 0.0
    result.extra.update({
        "schema": "validated", "without_schema_records_per_s": round(baseline.records_per_s, 1),
        "without_schema_latency_ms": baseline.latency_ms, "schema_cost_pct": round(100 * cost, 1),
    })
    print(f"{target.name}: without schema {baseline.line()}", file=sys.stderr, flush=True)
    print(f"{target.name}: schema validation costs {100 * cost:.1f}% of records/s "
          f"({baseline.records_per_s:,.0f} -> {result.records_per_s:,.0f}), "
          f"p99 {baseline.latency_ms.get('p99', 0):.2f} -> {result.latency_ms.get('p99', 0):.2f} ms",
          file=sys.stderr, flush=True)
    return result


async def _ensure_topic_at(target: Target, spec: ProduceSpec) -> None:
    """The topic exists with its partitions led, before a third-party client starts producing."""
    conn = await WireConnection.open(*target.for_setup().host_port)
    try:
        await ensure_topic(conn, spec.topic, spec.partitions)
    finally:
        await conn.close()


def _quiet(spec: ProduceSpec) -> ProduceSpec:
    return ProduceSpec(**{**spec.__dict__, "progress": False})


# --------------------------------------------------------------------------- confluent


def run_confluent(target: Target, spec: ProduceSpec) -> RunResult:
    from confluent_kafka import (
        Producer,  # optional: the [test] and [spark] extras install it
    )

    asyncio.run(_ensure_topic_at(target, spec))
    conf = _confluent_config(target, spec)
    values = payloads(1024, spec.record_size)
    latencies = Latencies()
    errors: list[str] = []
    run = _ConfluentRun(Producer, conf, spec, values, latencies, errors)
    if spec.warmup_records:
        run.produce(spec.warmup_records, f"{target.name} warm-up", False)
        latencies.samples_ms.clear()
    with CpuMeter(target.pgid).measure() as cpu:
        elapsed, transactions = run.produce(spec.records, target.name, spec.progress)
    return RunResult(
        target=target.name, bootstrap=target.bootstrap, client="confluent", operation="produce",
        records=spec.records, bytes=spec.records * spec.record_size, seconds=elapsed,
        latency_ms=latencies.summary(), latency_unit="record (1 in 100 sampled)", version=target.version,
        broker_cpu_s=cpu.seconds,
        extra={"acks": "all" if conf["acks"] == -1 else spec.acks, "compression": spec.compression,
               "batch.size": spec.batch_bytes, "linger.ms": 5, "idempotent": conf["enable.idempotence"],
               **({"records_per_transaction": spec.txn_records, "transactions": transactions}
                  if spec.txn_records else {})},
    )


def _confluent_config(target: Target, spec: ProduceSpec) -> dict:
    """librdkafka's settings for the run: large local queues, so the Python loop, not the queue, is the limit."""
    conf = {
        "bootstrap.servers": target.bootstrap, "acks": ACKS[spec.acks], "linger.ms": 5,
        "batch.size": spec.batch_bytes, "compression.type": spec.compression,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_097_151,
        "enable.idempotence": spec.idempotent or spec.txn_records > 0,
        **target.client_config,  # a secured listener's security.protocol, CA, SASL login
    }
    if spec.idempotent or spec.txn_records:
        conf["acks"] = -1  # idempotence and transactions need acks=all
    return conf


class _ConfluentRun:
    """One producer per `produce` call (warm-up, then the measured run), sharing latencies and errors."""

    def __init__(self, producer_class, conf: dict, spec: ProduceSpec, values: list[bytes], latencies: Latencies,
                 errors: list[str]) -> None:
        self.producer_class = producer_class
        self.conf = conf
        self.spec = spec
        self.values = values
        self.latencies = latencies
        self.errors = errors

    def sampled(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        elif msg.latency() is not None:
            self.latencies.add(msg.latency())

    def failed_only(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def start(self, label: str):
        """A producer ready to send: its producer id fetched before the clock starts."""
        conf, spec = self.conf, self.spec
        producer = self.producer_class(
            {**conf, "transactional.id": f"bench-{spec.topic}-{label}"} if spec.txn_records else conf)
        if spec.txn_records:
            producer.init_transactions(60)  # the producer id and epoch, before the clock starts
        elif conf["enable.idempotence"]:
            # The idempotent producer gets its id asynchronously (InitProducerId, ~0.5 s in librdkafka): one
            # unmeasured record waits for it, as init_transactions does for the transactional one.
            producer.produce(spec.topic, value=self.values[0], partition=0, on_delivery=self.failed_only)
            producer.flush(60)
        return producer

    def produce(self, count: int, label: str, show: bool) -> tuple[float, int]:
        """(seconds, transactions committed) for `count` records, one produce() call each; 1 in 100 timed."""
        spec, values = self.spec, self.values
        txn = spec.txn_records
        producer = self.start(label)
        sampled, failed_only = self.sampled, self.failed_only
        progress = Progress(label, count, enabled=show)
        start = time.perf_counter()
        transactions = 0
        for i in range(count):
            if txn and i % txn == 0:
                if i:
                    producer.commit_transaction(120)
                    transactions += 1
                producer.begin_transaction()
            callback = sampled if i % 100 == 0 else failed_only
            while True:
                try:
                    producer.produce(spec.topic, value=values[i & 1023], partition=i % spec.partitions,
                                     on_delivery=callback)
                    break
                except BufferError:
                    producer.poll(0.01)
            if i & 0x3FF == 0:
                producer.poll(0)
                progress.update(i, i * spec.record_size)
        if txn:
            producer.commit_transaction(120)
            transactions += 1
        remaining = producer.flush(120)
        elapsed = time.perf_counter() - start
        if remaining or self.errors:
            raise ProduceError(f"confluent: {remaining} undelivered, errors {self.errors[:3]}")
        return elapsed, transactions


# --------------------------------------------------------------------------- java


PERF_LINE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def run_java(target: Target, spec: ProduceSpec) -> RunResult:

    asyncio.run(_ensure_topic_at(target, spec))
    props = [f"bootstrap.servers={target.bootstrap}", f"acks={spec.acks}", f"batch.size={spec.batch_bytes}",
             "linger.ms=5", f"compression.type={spec.compression}", "enable.idempotence=false",
             "buffer.memory=268435456", f"max.request.size={max(1048576, spec.batch_bytes * 2)}",
             *java_client_props(target.client_config)]
    records = spec.records + spec.warmup_records
    args = ["--topic", spec.topic, "--num-records", str(records), "--record-size", str(spec.record_size),
            "--throughput", "-1", "--producer-props", *props]
    jvm = ("-Xms512m", "-Xmx2g", "-XX:+UseG1GC")
    with CpuMeter(target.pgid).measure() as cpu:  # the whole tool run, its warm-up records included
        out = run_java_tool(PRODUCER_PERFORMANCE, args, timeout=max(120.0, records / 50_000), jvm_opts=jvm)
    match = None
    for match in PERF_LINE.finditer(out.stdout):  # noqa: B007 - the last line holds the totals
        pass
    if out.returncode != 0 or match is None:
        raise ProduceError(f"ProducerPerformance exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    sent, rate = int(match.group(1)), float(match.group(2))
    return RunResult(
        target=target.name, bootstrap=target.bootstrap, client="java", operation="produce",
        records=sent, bytes=sent * spec.record_size, seconds=sent / rate if rate else 0.0,
        latency_ms={"avg": float(match.group(4)), "p50": float(match.group(6)), "p95": float(match.group(7)),
                    "p99": float(match.group(8)), "p99.9": float(match.group(9)), "max": float(match.group(5))},
        latency_unit="record", version=target.version, broker_cpu_s=cpu.seconds,
        extra={"acks": spec.acks, "compression": spec.compression, "batch.size": spec.batch_bytes, "linger.ms": 5,
               "note": "includes the warm-up records; ProducerPerformance has no warm-up"},
    )


# --------------------------------------------------------------------------- franz


def run_franz(target: Target, spec: ProduceSpec) -> RunResult:
    if spec.acks != "1":
        raise ProduceError(f"franzbench produces with acks=1 only, not acks={spec.acks}")
    asyncio.run(_ensure_topic_at(target, spec))
    records = spec.records + spec.warmup_records
    timeout_s = max(120.0, records / 50_000)
    command = franz_client.produce_command(
        franz_client.franz_binary(), target.bootstrap, target.client_config, topic=spec.topic, records=records,
        record_size=spec.record_size, compression=spec.compression, batch_bytes=spec.batch_bytes, timeout_s=timeout_s)
    # The CPU of the whole tool run, its warm-up records included.
    got, cpu_s = franz_client.run_metered(command, timeout_s=timeout_s, pgid=target.pgid, error=ProduceError)
    return RunResult(
        target=target.name, bootstrap=target.bootstrap, client="franz", operation="produce", records=got.records,
        bytes=got.bytes, seconds=got.seconds, latency_ms={}, latency_unit="n/a", version=target.version,
        broker_cpu_s=cpu_s, client_cpu_s=got.cpu_seconds,
        extra={"acks": spec.acks, "compression": spec.compression, "batch.max.bytes": spec.batch_bytes,
               "franz-go": franz_client.FRANZ_GO_VERSION,
               "note": "includes the warm-up records; franzbench has no warm-up"},
    )


RUNNERS = {"raw": run_raw, "confluent": run_confluent, "java": run_java, "franz": run_franz}
