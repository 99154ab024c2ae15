"""Tumbling windows: views and revenue per page every 10 seconds, watermark 5 seconds.

    python spark-on-k8s/pipelines/tumbling.py --bootstrap 127.0.0.1:9092 --generate 2000
"""

from common import run_pipeline

from tinystream.spark.windows import fixed_windows, tumbling_page_counts

if __name__ == "__main__":
    run_pipeline(
        description=__doc__,
        output_topic="page-views-10s",
        build=lambda spark, events: tumbling_page_counts(events, window="10 seconds", watermark="5 seconds"),
        assign=lambda events: fixed_windows(events, "10 seconds"),
        key_column="page",
        sort_by=("window_start", "page"),
    )
