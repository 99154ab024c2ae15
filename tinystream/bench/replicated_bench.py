"""`tinystream bench replicated`: what replication costs a producer, measured in one run.

Two local clusters, one after the other (never sharing the machine), the
same workload through librdkafka (produce_workloads.run_confluent):

1. 1 broker, a topic with RF 1, acks=1          -- the baseline
2. 3 brokers, a topic with RF 3 and min.insync.replicas=2, acks=all

Prints records/s and per-record latency percentiles for each, and the ratio
of (2) to (1). The lead attaches `replicated_bench_command` as
`tinystream bench replicated`.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

import click

from tinystream.bench.produce_workloads import ProduceSpec, run_confluent
from tinystream.bench.stats import RunResult
from tinystream.bench.targets import Target
from tinystream.dev.cluster import LocalCluster


def _create_topic(bootstrap: str, topic: str, *, partitions: int, replication_factor: int,
                  config: dict[str, str]) -> None:
    from confluent_kafka.admin import (  # optional: the [test] and [spark] extras
        AdminClient,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                                            config=config)], request_timeout=30)
    futures[topic].result(60)


def measure(*, brokers: int, acks: str, records: int, record_size: int, partitions: int, batch_size: int,
            warmup: int, workdir: Path, quiet: bool) -> RunResult:
    """Start a local cluster of `brokers`, produce with `acks` to an RF-`brokers` topic, stop it."""
    rf = min(brokers, 3)
    cluster = LocalCluster(brokers=brokers, data_dir=workdir / f"cluster-{brokers}", first_port=0,
                           echo=(lambda _: None) if quiet else (lambda line: click.echo(line, err=True)))
    bootstrap = cluster.open()
    try:
        topic = f"bench-replicated-{uuid.uuid4().hex[:8]}"
        _create_topic(bootstrap, topic, partitions=partitions, replication_factor=rf,
                      config={"min.insync.replicas": str(min(rf, 2))})
        spec = ProduceSpec(topic=topic, partitions=partitions, records=records, record_size=record_size,
                           batch_bytes=batch_size, acks=acks, compression="none", warmup_records=warmup,
                           progress=not quiet)
        name = f"{brokers} broker{'s' if brokers > 1 else ''} RF{rf} acks={acks}"
        # One address: run_confluent prepares over a single connection; librdkafka finds the others.
        return run_confluent(Target(name=name, bootstrap=cluster.brokers[0].bootstrap or bootstrap), spec)
    finally:
        cluster.close()


@click.command("replicated")
@click.option("--records", default=200_000, show_default=True, type=click.IntRange(1))
@click.option("--record-size", default=100, show_default=True, type=click.IntRange(0))
@click.option("--partitions", default=6, show_default=True, type=click.IntRange(1))
@click.option("--batch-size", default=65_536, show_default=True, type=click.IntRange(128))
@click.option("--warmup", default=None, type=click.IntRange(0), help="Default: 10%% of --records.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def replicated_bench_command(records: int, record_size: int, partitions: int, batch_size: int, warmup: int | None,
                             as_json: bool, quiet: bool) -> None:
    """acks=all on 3 brokers (RF 3) against acks=1 on 1 broker: records/s, p99, ratio."""
    warmup = records // 10 if warmup is None else warmup
    common = dict(records=records, record_size=record_size, partitions=partitions, batch_size=batch_size,
                  warmup=warmup, quiet=quiet)
    with tempfile.TemporaryDirectory(prefix="tinystream-bench-replicated-") as workdir:
        baseline = measure(brokers=1, acks="1", workdir=Path(workdir), **common)
        replicated = measure(brokers=3, acks="all", workdir=Path(workdir), **common)
    ratio = replicated.records_per_s / baseline.records_per_s if baseline.records_per_s else float("nan")
    p99 = (replicated.latency_ms.get("p99", float("nan")), baseline.latency_ms.get("p99", float("nan")))
    if as_json:
        click.echo(json.dumps({"baseline": baseline.as_dict(), "replicated": replicated.as_dict(),
                               "throughput_ratio": round(ratio, 3)}, indent=2))
        return
    click.echo(baseline.line())
    click.echo(replicated.line())
    click.echo(f"acks=all RF3 / acks=1 RF1: {ratio:.2f}x records/s; p99 {p99[0]:.1f} ms vs {p99[1]:.1f} ms")
