"""Sliding windows: events per user over 20 seconds, every 10 seconds, watermark 5 seconds.

    python spark-on-k8s/pipelines/sliding.py --bootstrap 127.0.0.1:9092 --generate 2000
"""

from common import run_pipeline

from tinystream.spark.windows import fixed_windows, sliding_user_counts

if __name__ == "__main__":
    run_pipeline(
        description=__doc__,
        output_topic="user-activity-20s",
        build=lambda spark, events: sliding_user_counts(
            events, window="20 seconds", slide="10 seconds", watermark="5 seconds"),
        assign=lambda events: fixed_windows(events, "20 seconds", "10 seconds"),
        key_column="user",
        sort_by=("window_start", "user"),
    )
