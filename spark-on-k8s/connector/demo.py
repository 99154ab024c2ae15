"""The demo's windowed pipeline: events in, tumbling windows out, read back and shown.

`run_windowed_demo(bootstrap)` is what `tinystream demo` (and `make demo`)
calls at its end. It

1. creates an input and an output topic (names carry a run id, so reruns never mix),
2. produces events in two rounds with `events.generate_rounds` (the second
   round replays some events late: inside and beyond the watermark),
3. after each round runs the tumbling-window pipeline on local Spark with
   Trigger.AvailableNow from the same checkpoint (so round two is read with
   the watermark round one left behind),
4. reads the output topic back with a batch read and prints a small table,

and returns the figures as a dict.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from tinystream.spark.events import (
    Lateness,
    create_topic,
    generate_rounds,
    produce_events,
)
from tinystream.spark.local import local_session
from tinystream.spark.windows import parse_events, to_records, tumbling_page_counts

WINDOW = "10 seconds"
WATERMARK = "5 seconds"


def _run_round(spark: Any, *, bootstrap: str, source: str, sink: str, checkpoint: str) -> dict[str, int]:
    raw = (spark.readStream.format("tinystream")
           .option("bootstrap.servers", bootstrap).option("subscribe", source)
           .option("startingOffsets", "earliest").load())
    result = tumbling_page_counts(parse_events(raw), window=WINDOW, watermark=WATERMARK)
    query = (to_records(result, "page").writeStream.format("tinystream")
             .option("bootstrap.servers", bootstrap).option("topic", sink)
             .option("checkpointLocation", checkpoint).outputMode("append")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows_in = sum(p["numInputRows"] for p in query.recentProgress)
    return {"rows_in": rows_in, "batches": len(query.recentProgress)}


def read_windows(spark: Any, *, bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """The pipeline's output topic, decoded and sorted by window then page."""
    rows = (spark.read.format("tinystream").option("bootstrap.servers", bootstrap)
            .option("subscribe", topic).load().selectExpr("cast(value as string) as v").collect())
    return sorted((json.loads(r.v) for r in rows), key=lambda w: (w["window_start"], w["page"]))


def format_table(windows: list[dict[str, Any]], limit: int = 12) -> list[str]:
    lines = [f"{'window (UTC)':<23} {'page':<10} {'views':>5} {'revenue':>9}"]
    for w in windows[:limit]:
        start = w["window_start"][11:19]
        end = w["window_end"][11:19]
        lines.append(f"{start}-{end}       {w['page']:<10} {w['views']:>5} {w['revenue_cents'] / 100:>9.2f}")
    if len(windows) > limit:
        lines.append(f"... {len(windows) - limit} more")
    return lines


def run_windowed_demo(
    bootstrap: str,
    *,
    records: int = 2000,
    out: Callable[[str], Any] = print,
    partitions: int = 3,
    seed: int = 7,
    spark: Any = None,
) -> dict[str, Any]:
    """Produce events, window them on local Spark (AvailableNow), write, read back, print, return figures."""
    started = time.monotonic()
    run_id = uuid.uuid4().hex[:8]
    source, sink = f"demo-events-{run_id}", f"demo-windows-{run_id}"
    for topic in (source, sink):
        create_topic(bootstrap, topic, partitions=partitions)
    rounds = generate_rounds(records, rounds=2, seed=seed)
    kinds = Counter(e.lateness for batch in rounds for e in batch)
    out(f"spark demo: {records} events -> {source} (2 rounds; {kinds[Lateness.LATE_INSIDE]} late inside "
        f"and {kinds[Lateness.LATE_BEYOND]} beyond the {WATERMARK} watermark)")
    own_session = spark is None
    spark = spark or local_session("tinystream-demo", log_level="ERROR")
    checkpoint = tempfile.mkdtemp(prefix="tinystream-demo-ckpt-")
    try:
        totals = Counter()
        for number, batch in enumerate(rounds, start=1):
            produce_events(bootstrap, source, batch)
            figures = _run_round(spark, bootstrap=bootstrap, source=source, sink=sink, checkpoint=checkpoint)
            totals.update(figures)
            out(f"  round {number}: read {figures['rows_in']} records in {figures['batches']} micro-batches")
        windows = read_windows(spark, bootstrap=bootstrap, topic=sink)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
        if own_session:
            spark.stop()
    real_events = sum(1 for b in rounds for e in b if e.lateness is not Lateness.TICK)
    views = sum(w["views"] for w in windows)
    out(f"tumbling {WINDOW} windows, watermark {WATERMARK}: {len(windows)} (window, page) rows in {sink}; "
        f"{views} of {real_events} events counted, {real_events - views} too late (dropped)")
    for line in format_table(windows):
        out("  " + line)
    seconds = round(time.monotonic() - started, 1)
    return {
        "input_topic": source,
        "output_topic": sink,
        "events": sum(len(b) for b in rounds),
        "rows_read": totals["rows_in"],
        "late_inside": kinds[Lateness.LATE_INSIDE],
        "late_beyond": kinds[Lateness.LATE_BEYOND],
        "late_dropped": real_events - views,
        "windows": len(windows),
        "views": views,
        "seconds": seconds,
    }
