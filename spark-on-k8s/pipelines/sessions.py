"""Session windows: a user's session ends after 5 seconds without events; watermark 5 seconds.

    python spark-on-k8s/pipelines/sessions.py --bootstrap 127.0.0.1:9092 --generate 2000
"""

from common import run_pipeline

from tinystream.spark.windows import session_starts, user_sessions

if __name__ == "__main__":
    run_pipeline(
        description=__doc__,
        output_topic="user-sessions",
        build=lambda spark, events: user_sessions(events, gap="5 seconds", watermark="5 seconds"),
        assign=lambda events: session_starts(events, "5 seconds"),
        key_column="user",
        sort_by=("session_start", "user"),
    )
