"""Stream-static join: events joined with a users table (CSV), revenue per country per 10 s window.

    python spark-on-k8s/pipelines/stream_static_join.py --bootstrap 127.0.0.1:9092 --generate 2000

The static side is read once per micro-batch plan from data/users.csv (set
TINYSTREAM_USERS_CSV to use another file); users missing from it count as
"unknown".
"""

import os
from pathlib import Path

from common import run_pipeline

from tinystream.spark.windows import fixed_windows, revenue_by_country

USERS_CSV = os.environ.get("TINYSTREAM_USERS_CSV", str(Path(__file__).with_name("data") / "users.csv"))


def build(spark, events):
    users = spark.read.option("header", "true").schema("user string, country string, tier string").csv(USERS_CSV)
    return revenue_by_country(events, users.select("user", "country"), window="10 seconds", watermark="5 seconds")


if __name__ == "__main__":
    run_pipeline(
        description=__doc__,
        output_topic="revenue-by-country-10s",
        build=build,
        assign=lambda events: fixed_windows(events, "10 seconds"),
        key_column="country",
        sort_by=("window_start", "country"),
    )
