"""`bench compare`'s 3-broker cells: `replicated` (throughput) and `latency` (end to end at a fixed rate).

Both sides are 3-broker clusters started once for these cells: ours is `LocalCluster` (a controller and
three brokers, tinystream/dev/cluster.py), Apache Kafka's three combined KRaft nodes with a 3-voter quorum
(testing/peers/apache_kafka_cluster.py). Every topic: 6 partitions, RF 3, min.insync.replicas 2; the
producer uses acks=all, 100-byte records. Broker CPU covers every process group of the cluster (our
controller included, as Kafka's quorum runs inside its nodes).

* replicated: Kafka's ProducerPerformance (as fast as it can) and ConsumerPerformance (reading the same
  topic from the start) run AT THE SAME TIME, each to N records; each tool's own records/s is reported,
  and the cluster's CPU over both tool runs per GB produced.
* latency: ProducerPerformance at a fixed `--throughput` for a fixed time, and a confluent-kafka consumer
  (librdkafka, assigned to every partition before the producer starts) that takes receive time minus
  the record's CreateTime (stamped by the Java producer at send(), same machine clock) for every record.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tinystream.bench import e2e_latency
from tinystream.bench.consume_workloads import ConsumeError, parse_consumer_performance
from tinystream.bench.cpu import CpuMeter
from tinystream.bench.produce_workloads import PERF_LINE, ProduceError
from tinystream.bench.stats import RunResult
from tinystream.testing.peers.apache_kafka import (
    CONSUMER_PERFORMANCE,
    PRODUCER_PERFORMANCE,
    java_tool_argv,
)
from tinystream.testing.peers.errors import PeerUnavailable

CLUSTER_PEERS = ("kafka", "tinystream")
RECORD_SIZE = 100
TOOL_JVM = ("-Xms256m", "-Xmx1g", "-XX:+UseG1GC")


@dataclass(frozen=True)
class ClusterTarget:
    name: str
    bootstrap: str  # every broker, comma-separated
    version: str
    pgids: tuple[int, ...]  # each process of the cluster runs in its own session

    def cpu_meter(self) -> CpuMeter:
        return CpuMeter(self.pgids[0], more=self.pgids[1:]) if self.pgids else CpuMeter(None)


@contextlib.contextmanager
def open_cluster(spec: str, *, quiet: bool = False) -> Iterator[ClusterTarget]:
    """A 3-broker cluster of `spec` ("tinystream": ours, "kafka": Apache Kafka), stopped on exit."""
    if spec not in CLUSTER_PEERS:
        raise PeerUnavailable(f"the replicated and latency cells need a 3-node peer: one of {CLUSTER_PEERS}, "
                              f"not {spec!r}")
    if not quiet:
        print(f"starting a 3-broker {spec} cluster ...", file=sys.stderr, flush=True)
    if spec == "kafka":
        from tinystream.testing.peers.apache_kafka_cluster import start_kafka_cluster

        kafka = start_kafka_cluster()
        try:
            yield ClusterTarget("kafka", kafka.bootstrap, kafka.version, kafka.pgids)
        finally:
            kafka.stop()
        return
    from tinystream.dev.cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="tinystream-bench-cluster-") as workdir:
        cluster = LocalCluster(brokers=3, data_dir=Path(workdir), first_port=0, echo=lambda _: None)
        try:
            bootstrap = cluster.open()
            pgids = tuple(pid for child in cluster.children if (pid := child.pid) is not None)
            yield ClusterTarget("tinystream", bootstrap, "", pgids)
        finally:
            cluster.close()


def create_topic(target: ClusterTarget, topic: str, partitions: int) -> None:
    """RF 3, min.insync.replicas 2, through librdkafka's admin client (a client nobody here wrote)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # optional: the [test] extra

    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                            config={"min.insync.replicas": "2"})], request_timeout=30)
    futures[topic].result(60)


def _producer_args(target: ClusterTarget, topic: str, records: int, throughput: int) -> list[str]:
    props = [f"bootstrap.servers={target.bootstrap}", "acks=all", "linger.ms=5", "batch.size=65536",
             "enable.idempotence=false", "buffer.memory=67108864"]
    return ["--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_SIZE),
            "--throughput", str(throughput), "--producer-props", *props]


def _spawn(main_class: str, args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(java_tool_argv(main_class, args, jvm_opts=TOOL_JVM), stdout=subprocess.PIPE,  # noqa: S603
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def _finish(process: subprocess.Popen[str], timeout: float, what: str) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        return -9, out, f"{what} timed out after {timeout:.0f}s\n{err}"
    return process.returncode, out, err


def run_replicated(target: ClusterTarget, *, records: int, partitions: int, topic: str) -> tuple[RunResult, RunResult]:
    """(producer, consumer) results of one run; the cluster's CPU is on the producer's result."""
    create_topic(target, topic, partitions)
    timeout = max(180.0, records / 10_000)
    with target.cpu_meter().measure() as cpu:
        consumer = _spawn(CONSUMER_PERFORMANCE, [
            "--bootstrap-server", target.bootstrap, "--topic", topic, "--messages", str(records),
            "--timeout", "60000", "--consumer.config", "/dev/null"])
        producer = _spawn(PRODUCER_PERFORMANCE, _producer_args(target, topic, records, -1))
        p_code, p_out, p_err = _finish(producer, timeout, "ProducerPerformance")
        c_code, c_out, c_err = _finish(consumer, timeout, "ConsumerPerformance")
    match = None
    for match in PERF_LINE.finditer(p_out):  # noqa: B007 - the last line holds the totals
        pass
    if p_code != 0 or match is None:
        raise ProduceError(f"{target.name}: ProducerPerformance exited {p_code}:\n{p_out[-2000:]}\n{p_err[-2000:]}")
    row = parse_consumer_performance(c_out)
    if c_code != 0 or row is None:
        raise ConsumeError(f"{target.name}: ConsumerPerformance exited {c_code}:\n{c_out[-2000:]}\n{c_err[-2000:]}")
    sent, rate = int(match.group(1)), float(match.group(2))
    produced = RunResult(
        target=target.name, bootstrap=target.bootstrap, client="java", operation="produce", records=sent,
        bytes=sent * RECORD_SIZE, seconds=sent / rate if rate else 0.0,
        latency_ms={"avg": float(match.group(4)), "p50": float(match.group(6)), "p99": float(match.group(8)),
                    "p99.9": float(match.group(9)), "max": float(match.group(5))},
        latency_unit="record", version=target.version, broker_cpu_s=cpu.seconds,
        extra={"acks": "all", "replication.factor": 3, "min.insync.replicas": 2,
               "note": "CPU of every cluster process over both tool runs, per GB produced"})
    consumed = int(row["data.consumed.in.nMsg"])
    fetch_ms = float(row.get("fetch.time.ms") or 0)
    seconds = fetch_ms / 1000 if fetch_ms > 0 else consumed / max(float(row["nMsg.sec"]), 1e-9)
    received = RunResult(
        target=target.name, bootstrap=target.bootstrap, client="java", operation="consume", records=consumed,
        bytes=consumed * RECORD_SIZE, seconds=seconds, latency_ms={}, latency_unit="n/a", version=target.version,
        verified=consumed >= records, problem="" if consumed >= records else f"{consumed} of {records} consumed",
        extra={"concurrent_with": "producer"})
    return produced, received


class _Receiver(threading.Thread):
    """librdkafka consumer assigned to every partition from the start: (receive time - CreateTime) per record."""

    def __init__(self, target: ClusterTarget, topic: str, partitions: int, expected: int) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # optional: the [test] extra

        self.consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": f"bench-{topic}",
                                  "enable.auto.commit": False, "enable.partition.eof": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.expected = expected
        self.samples: list[e2e_latency.Sample] = []
        self.errors: list[str] = []
        self.started = time.time()
        self.stop_at: float | None = None  # set when the producer is done: stop after a quiet while
        self.ready = threading.Event()

    def run(self) -> None:
        try:
            while len(self.samples) < self.expected:
                # consume() waits for num_messages OR the timeout: a short timeout returns what has arrived
                # (a long one would hold records back and add up to its length to every latency).
                messages = self.consumer.consume(num_messages=1_000, timeout=0.002)
                now = time.time()
                self.ready.set()  # the first poll has joined the brokers; the producer may start
                for message in messages:
                    if message.error():
                        self.errors.append(str(message.error()))
                        continue
                    _kind, created_ms = message.timestamp()
                    self.samples.append((now - self.started, now * 1000.0 - created_ms))
                if self.stop_at is not None and now > self.stop_at:
                    return
        finally:
            self.ready.set()
            self.consumer.close()


def run_latency(target: ClusterTarget, *, rate: int, seconds: int, partitions: int, topic: str,
                skip_s: float = 5.0) -> e2e_latency.LatencyRun:
    """ProducerPerformance at `rate` records/s for `seconds`, the receiver timing every record."""
    create_topic(target, topic, partitions)
    expected = rate * seconds
    receiver = _Receiver(target, topic, partitions, expected)
    receiver.start()
    receiver.ready.wait(30)
    with target.cpu_meter().measure() as cpu:
        producer = _spawn(PRODUCER_PERFORMANCE, _producer_args(target, topic, expected, rate))
        receiver.started = time.time()  # the series' second 0: the producer's start (JVM start-up included)
        code, out, err = _finish(producer, seconds + 180.0, "ProducerPerformance")
        receiver.stop_at = time.time() + 15.0
        receiver.join(30)
    if code != 0:
        raise ProduceError(f"{target.name}: ProducerPerformance exited {code}:\n{out[-2000:]}\n{err[-2000:]}")
    if receiver.errors:
        raise ConsumeError(f"{target.name}: consumer errors {receiver.errors[:3]}")
    samples = list(receiver.samples)
    elapsed = max((at for at, _ in samples), default=0.0)
    skip = skip_s if elapsed > 2 * skip_s else 0.0
    return e2e_latency.LatencyRun(
        target=target.name, rate=rate, records=len(samples), expected=expected, seconds=elapsed,
        latency_ms=e2e_latency.summary(samples, skip_s=skip), series=e2e_latency.per_second(samples),
        broker_cpu_s=cpu.seconds, skip_s=skip)
