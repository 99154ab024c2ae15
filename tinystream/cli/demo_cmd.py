"""`tinystream demo` (what `make demo` runs): the main job on the embedded default.

1. the storage engine: a log in a temporary directory, appended and read back
   by the storage benchmark, against plain file writes of the same bytes;
2. a local cluster (`tinystream dev`'s LocalCluster) on free ports in a
   temporary directory: a topic is created, records produced with keys and
   headers, consumed by a group, and the group's lag shown;
3. when PySpark is installed (`pip install tinystream[spark]`), a windowed
   pipeline on local Spark over events it produced.

It ends by saying what ran and what to try next (a cluster that stays up,
its dashboard, the CLI): it speaks to a new user, not to TinyStream's
developers (no development aims; `tinystream bench log` shows those).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
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
        click.secho("== 1. storage engine: a partition log appended and read back, beside plain file I/O ==",
                    bold=True)
        run_log_bench(sizes=(1024, 16384, 1048576), total_bytes=64 * 1024 * 1024, directory=workdir,
                      progress=True, show_aims=False)
        click.secho("\n== 2. local cluster: produce, consume with a group ==", bold=True)
        spark_ran = asyncio.run(_cluster_round_trip(Path(workdir) / "cluster", records, skip_spark))
    _what_next(records, spark_ran)


def _what_next(records: int, spark_ran: bool) -> None:
    """What ran, and where to look next: a cluster that stays up, its dashboard, the CLI."""
    cli = _cli_path()
    click.secho("\n== done ==", bold=True)
    click.echo(f"Ran: the storage engine on 64 MiB per batch size; a 1-broker cluster where {records:,} records "
               f"were produced (acks=all) and read by a consumer group"
               + ("; a windowed Spark pipeline over the same cluster." if spark_ran else "."))
    click.echo("Its clients used PLAINTEXT without logins on 127.0.0.1, as a local cluster does; on Kubernetes a "
               "cluster is secured by default (TLS, SCRAM, ACLs).")
    click.echo("Everything it made lived in a temporary directory, now removed.\n")
    click.echo("Next, a cluster that stays up (Ctrl-C stops it; data in ./data):")
    click.echo(f"  {cli} dev --brokers 3            # prints its bootstrap list and the dashboard URL "
               f"(http://127.0.0.1:3200)")
    click.echo(f"  {cli} topics create events -p 6 -r 3")
    click.echo(f"  printf 'k1:hello\\n' | {cli} produce events -K :")
    click.echo(f"  {cli} consume events -g readers --from-beginning -n 1")
    click.echo(f"  {cli} groups describe readers    # committed offsets and lag")
    click.echo("Any Kafka client works against it (kcat -b 127.0.0.1:9092 -L). README.md has the rest.")


def _cli_path() -> str:
    """How to call `tinystream` from here: the venv's script, relative when it is below the current dir."""
    script = Path(sys.executable).with_name("tinystream")
    if not script.exists():
        return "tinystream"
    try:
        return os.path.relpath(script) if not os.path.relpath(script).startswith("..") else str(script)
    except ValueError:
        return str(script)


async def _cluster_round_trip(data_dir: Path, records: int, skip_spark: bool) -> bool:
    """The cluster step; returns whether the Spark step ran."""
    cluster = LocalCluster(brokers=1, data_dir=data_dir, first_port=0, overrides=[
        "group.initial.rebalance.delay.ms=0"], echo=click.echo)
    bootstrap = await cluster.start()
    try:
        await asyncio.to_thread(_produce_and_consume, bootstrap, records)
        if not skip_spark and importlib.util.find_spec("pyspark") is not None:
            click.secho("\n== 3. Spark: a windowed pipeline on local Spark ==", bold=True)
            # Imported only here: the [spark] extra is optional.
            from tinystream.spark.demo import run_windowed_demo

            await asyncio.to_thread(run_windowed_demo, bootstrap, out=click.echo)
            return True
        if not skip_spark:
            click.echo("\n(PySpark not installed: `pip install tinystream[spark]` adds the Spark pipeline step)")
        return False
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
