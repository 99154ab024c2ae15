"""`tinystream demo` (what `make demo` runs): the main job on the embedded default.

1. the storage engine: a log in a temporary directory, appended and read back
   by the storage benchmark, against plain file writes of the same bytes;
2. a local cluster (`tinystream dev`'s LocalCluster) on free ports in a
   temporary directory: a topic is created, records produced with keys and
   headers, consumed by a group, and the group's lag shown;
3. when PySpark is installed (`pip install tinystream[spark]`), a windowed
   pipeline on local Spark over events it produced.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tempfile
import time
from pathlib import Path

import click
from kafka.admin import NewTopic

from tinystream.bench.log_bench import run_log_bench
from tinystream.cli.kafka_client import admin, consumer, group_lag, producer
from tinystream.dev.cluster import LocalCluster

DEMO_TOPIC = "demo-events"


@click.command()
@click.option("--records", type=click.IntRange(1), default=10_000, show_default=True)
@click.option("--skip-spark", is_flag=True, help="Stop after the cluster step.")
def demo(records: int, skip_spark: bool) -> None:
    """Storage benchmark, a local cluster round trip, and a Spark pipeline."""
    with tempfile.TemporaryDirectory(prefix="tinystream-demo-") as workdir:
        click.secho("== 1. storage engine: append and read back ==", bold=True)
        run_log_bench(sizes=(1024, 16384, 1048576), total_bytes=64 * 1024 * 1024, directory=workdir,
                      progress=True)
        click.secho("\n== 2. local cluster: produce, consume with a group ==", bold=True)
        asyncio.run(_cluster_round_trip(Path(workdir) / "cluster", records, skip_spark))


async def _cluster_round_trip(data_dir: Path, records: int, skip_spark: bool) -> None:
    cluster = LocalCluster(brokers=1, data_dir=data_dir, first_port=0, overrides=[
        "group.initial.rebalance.delay.ms=0"], echo=click.echo)
    bootstrap = await cluster.start()
    try:
        await asyncio.to_thread(_produce_and_consume, bootstrap, records)
        if not skip_spark and importlib.util.find_spec("pyspark") is not None:
            click.secho("\n== 3. Spark: a windowed pipeline on local Spark ==", bold=True)
            from tinystream.spark.demo import (
                run_windowed_demo,  # optional: needs the [spark] extra
            )

            await asyncio.to_thread(run_windowed_demo, bootstrap, out=click.echo)
        elif not skip_spark:
            click.echo("\n(PySpark not installed: `pip install tinystream[spark]` adds the Spark pipeline step)")
    finally:
        await cluster.stop()


def _produce_and_consume(bootstrap: str, records: int) -> None:
    with admin(bootstrap) as client:
        client.create_topics([NewTopic(DEMO_TOPIC, 3, 1)])
    started = time.perf_counter()
    sender = producer(bootstrap, acks="all", linger_ms=5, compression_type="lz4")
    for i in range(records):
        sender.send(DEMO_TOPIC, key=f"user-{i % 50}".encode(), value=f'{{"n": {i}}}'.encode(),
                    headers=[("source", b"demo")])
    sender.flush()
    sender.close()
    produced_s = time.perf_counter() - started
    click.echo(f"produced {records} records to {DEMO_TOPIC} in {produced_s:.2f} s "
               f"({records / produced_s:,.0f} records/s with kafka-python, acks=all, lz4)")

    reader = consumer(bootstrap, group_id="demo-group", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=10_000)
    reader.subscribe([DEMO_TOPIC])
    seen = 0
    for _ in reader:
        seen += 1
        if seen == records - records // 10:  # leave some lag to show
            break
    reader.commit()
    reader.close()
    click.echo(f"group demo-group consumed {seen} records and committed")
    click.echo(f"{'PARTITION':>9} {'COMMITTED':>10} {'END':>8} {'LAG':>6}")
    for row in group_lag(bootstrap, "demo-group"):
        click.echo(f"{row.partition:>9} {row.committed:>10} {row.end_offset:>8} {row.lag:>6}")
