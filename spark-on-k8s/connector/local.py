"""A local SparkSession for the demo, the example pipelines and the tests.

Workers run the same Python as the driver (`spark.pyspark.python` =
sys.executable): the default is whatever `python3` is on PATH, which
usually lacks the connector. Shuffle partitions are few because the data
is small, and the UI is off so parallel runs do not fight over port 4040.
Session time zone UTC: windows and the printed tables do not depend on the
machine's zone.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from tinystream.spark import register


def local_session(
    app_name: str = "tinystream",
    *,
    cores: int = 2,
    shuffle_partitions: int = 2,
    log_level: str = "WARN",
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """local[cores] Spark with format("tinystream") registered."""

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.pyspark.python", sys.executable)
        # Few shuffle partitions: the data is small, and each stateful partition is a state store.
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark
