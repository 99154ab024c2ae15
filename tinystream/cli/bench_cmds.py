"""`tinystream bench ...`: benchmarks that print their figures (and --json)."""

from __future__ import annotations

import importlib
import importlib.util

import click


@click.group()
def bench() -> None:
    """Benchmarks: storage log, produce, consume, the matrix against a peer (compare), replicated (acks=all), fetch
    sessions, schema registry, client quotas over time, scale (partitions, connections, a big log), Spark connector."""


for _module, _attribute, _name in [
    ("tinystream.bench.log_bench", "log_bench_command", "log"),
    ("tinystream.bench.produce_bench", "produce_bench_command", "produce"),
    ("tinystream.bench.consume_bench", "consume_bench_command", "consume"),
    ("tinystream.bench.replicated_bench", "replicated_bench_command", "replicated"),
    ("tinystream.bench.fetch_session_bench", "fetch_session_bench_command", "fetch-sessions"),
    ("tinystream.bench.registry_bench", "registry_bench_command", "registry"),
    ("tinystream.bench.quota_bench", "quota_bench_command", "quota"),
    ("tinystream.bench.compare", "compare_bench_command", "compare"),
    ("tinystream.bench.scale_bench", "scale_bench_command", "scale"),
]:
    try:
        bench.add_command(getattr(importlib.import_module(_module), _attribute), _name)
    except ModuleNotFoundError as exc:  # not built yet: keep --help honest
        if not (exc.name or "").startswith("tinystream"):
            raise


@click.command("spark")
@click.option("--bootstrap", "-b", required=True, help="A running cluster, e.g. from `tinystream dev`.")
@click.option("--records", type=click.IntRange(1000), default=500_000, show_default=True)
def spark_bench(bootstrap: str, records: int) -> None:
    """Connector read rate vs a raw confluent-kafka consumer on the same topic (needs pyspark)."""
    from tinystream.spark.bench import (
        run_spark_bench,  # optional: needs the [spark] extra
    )

    run_spark_bench(bootstrap, records=records, out=click.echo)


if importlib.util.find_spec("pyspark") is not None:
    bench.add_command(spark_bench)
