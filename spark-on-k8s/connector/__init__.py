"""PySpark data source for TinyStream topics (format "tinystream").

    from tinystream.spark import register
    register(spark)
    df = (spark.readStream.format("tinystream")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

A Python data source (PySpark >= 4.2): no JVM jar, so `pip install
tinystream[spark]` is enough, including for Spark Connect clients. Columns
and options mirror Spark's built-in Kafka source; see options.py for the
list and kafka_client.py for why the client is confluent-kafka.

Module map (bottom to top, checked by an import-linter contract in
pyproject.toml): errors -> offsets -> options -> planning (pure decisions) ->
kafka_client (the only I/O), schema -> partitions, planner -> batch_reader,
stream_reader, writer -> source. events, windows and local are the example
pipelines' building blocks; demo and bench run them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "tinystream"


def register(spark: SparkSession) -> None:
    """Make format("tinystream") available in this session (idempotent)."""
    from tinystream.spark.source import TinyStreamDataSource  # noqa: PLC0415 - pyspark only when used

    spark.dataSource.register(TinyStreamDataSource)


__all__ = ["FORMAT", "register"]
