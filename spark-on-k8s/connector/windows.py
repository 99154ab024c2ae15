"""Event-time windows over the event stream: the example pipelines' queries.

Each function takes the raw source DataFrame (key, value, ...) and returns
the aggregate the pipeline writes; `to_records` turns any result into the
(key, value) columns the sink takes, value as JSON.

Lateness follows Spark's rules for a stateful aggregation with a watermark
(Structured Streaming guide, "Handling Late Data and Watermarking"): the
watermark is max(event time seen in earlier micro-batches) - delay; a row
whose window already ended at or before the watermark is dropped; in append
mode a window is written once, when the watermark passes its end.
`fixed_windows` and `session_starts` assign each event the windows the
aggregations put it in, for the late-events side output (late_events.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

EVENT_SCHEMA = "seq long, user string, page string, amount_cents long, ts long"


def parse_events(raw: DataFrame) -> DataFrame:
    """JSON values -> seq, user, page, amount_cents, event_time (timestamp)."""
    parsed = raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select("e.*")
    return parsed.withColumn("event_time", F.timestamp_millis("ts")).drop("ts")


def _watermarked(events: DataFrame, watermark: str) -> DataFrame:
    # The generator's last event (user TICK_USER) moves the watermark past every real
    # window; it sits alone in a window that never closes, so it is never written.
    # (Filtering it out here would not work: Catalyst pushes a filter below the
    # watermark node, and the tick would no longer move the watermark.)
    return events.withWatermark("event_time", watermark)


def tumbling_page_counts(events: DataFrame, *, window: str = "10 seconds", watermark: str = "5 seconds") -> DataFrame:
    """Views and revenue per page per fixed window."""
    return (
        _watermarked(events, watermark)
        .groupBy(F.window("event_time", window).alias("window"), "page")
        .agg(F.count("*").alias("views"), F.sum("amount_cents").alias("revenue_cents"))
        .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                "page", "views", "revenue_cents")
    )


def sliding_user_counts(
    events: DataFrame, *, window: str = "20 seconds", slide: str = "10 seconds", watermark: str = "5 seconds"
) -> DataFrame:
    """Events per user over overlapping windows (each event counts in window/slide windows)."""
    return (
        _watermarked(events, watermark)
        .groupBy(F.window("event_time", window, slide).alias("window"), "user")
        .agg(F.count("*").alias("events"), F.sum("amount_cents").alias("amount_cents"))
        .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                "user", "events", "amount_cents")
    )


def user_sessions(events: DataFrame, *, gap: str = "5 seconds", watermark: str = "5 seconds") -> DataFrame:
    """Sessions per user: activity separated by more than `gap` starts a new session."""
    return (
        _watermarked(events, watermark)
        .groupBy(F.session_window("event_time", gap).alias("session"), "user")
        .agg(F.count("*").alias("events"), F.sum("amount_cents").alias("amount_cents"))
        .select(F.col("session.start").alias("session_start"), F.col("session.end").alias("session_end"),
                "user", "events", "amount_cents")
    )


def revenue_by_country(events: DataFrame, users: DataFrame, *, window: str = "10 seconds",
                       watermark: str = "5 seconds") -> DataFrame:
    """Stream-static join: events enriched with a user table, then revenue per country per window."""
    joined = _watermarked(events, watermark).join(F.broadcast(users), on="user", how="left")
    return (
        joined.withColumn("country", F.coalesce(F.col("country"), F.lit("unknown")))
        .groupBy(F.window("event_time", window).alias("window"), "country")
        .agg(F.count("*").alias("orders"), F.sum("amount_cents").alias("revenue_cents"))
        .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                "country", "orders", "revenue_cents")
    )


def fixed_windows(events: DataFrame, window: str, slide: str | None = None) -> DataFrame:
    """Each event once per tumbling (or sliding) window it falls in, as window_start / window_end columns."""
    assigned = events.select("*", F.window("event_time", window, slide or window).alias("window"))
    return assigned.select(*events.columns, F.col("window.start").alias("window_start"),
                           F.col("window.end").alias("window_end"))


def session_starts(events: DataFrame, gap: str) -> DataFrame:
    """Each event with the session it opens, [event_time, event_time + gap): Spark's lateness test for sessions."""
    return events.select("*", F.col("event_time").alias("window_start"),
                         (F.col("event_time") + F.expr(f"INTERVAL {gap}")).alias("window_end"))


def to_records(result: DataFrame, key_column: str) -> DataFrame:
    """(key, value) for the sink: the key column as text, the whole row as JSON."""
    return result.select(
        F.col(key_column).cast("string").alias("key"),
        F.to_json(F.struct(*[F.col(c) for c in result.columns])).alias("value"),
    )
