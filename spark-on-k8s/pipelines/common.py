"""Shared command line and run loop of the example pipelines.

Every pipeline is `python <pipeline>.py [--bootstrap HOST:PORT] [--generate N]`:

* local (no spark-submit): a local[2] SparkSession with the connector registered;
  under spark-submit (local or Kubernetes) the session spark-submit made is used.
* `--generate N` produces N events first with the event generator, in two rounds:
  the pipeline runs after each round from the same checkpoint, so the second
  round's late events meet a real watermark (some are counted, some dropped).
* `--trigger available-now` (the default) processes what is there and stops, then
  prints the output topic; `--trigger continuous` keeps running (a streaming job
  on Kubernetes), one micro-batch every `--interval`.
* `--late-policy drop|update|side-output` says what happens to events behind the
  watermark (tinystream.spark.late_events): dropped (append mode), windows
  re-written as late events update them (update mode), or dropped events written
  to `--late-topic` (default `<output topic>-late`) with their lateness, and counted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

DEFAULT_BOOTSTRAP = os.environ.get("TINYSTREAM_BOOTSTRAP", "127.0.0.1:9092")


def parse_args(description: str, *, output_topic: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", default=DEFAULT_BOOTSTRAP,
                        help="broker bootstrap address (env TINYSTREAM_BOOTSTRAP; default %(default)s)")
    parser.add_argument("--input-topic", default="events")
    parser.add_argument("--output-topic", default=output_topic)
    parser.add_argument("--checkpoint", default=None,
                        help="checkpoint folder (default: a new temporary folder, so each run starts fresh)")
    parser.add_argument("--trigger", choices=("available-now", "continuous"), default="available-now")
    parser.add_argument("--interval", default="5 seconds", help="micro-batch interval with --trigger continuous")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--generate", type=int, default=0, metavar="N", help="produce N events first (2 rounds)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--partitions", type=int, default=3, help="partitions of topics this run creates")
    parser.add_argument("--show", type=int, default=15, help="rows of the result to print")
    parser.add_argument("--late-policy", choices=("drop", "update", "side-output"), default="drop",
                        help="events behind the watermark: drop them, update written windows, or write them "
                             "to --late-topic (default %(default)s)")
    parser.add_argument("--late-topic", default=None, help="late events with --late-policy side-output "
                                                           "(default: <output topic>-late)")
    return parser.parse_args()


def session(app_name: str) -> Any:
    """spark-submit's session when there is one (PYSPARK_GATEWAY_PORT), else local[2]."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        from pyspark.sql import SparkSession

        from tinystream.spark import register

        spark = SparkSession.builder.appName(app_name).getOrCreate()
        register(spark)
        return spark
    from tinystream.spark.local import local_session

    return local_session(app_name, log_level="ERROR")


def run_pipeline(
    *,
    description: str,
    output_topic: str,
    build: Callable[[Any, Any], Any],
    assign: Callable[[Any], Any],
    key_column: str,
    sort_by: tuple[str, ...],
) -> list[dict[str, Any]]:
    """Parse args, (generate,) run `build(spark, events)` into the output topic, print the result.

    `assign(events)` gives each event the windows `build` puts it in (for the late-events side output).
    """
    from tinystream.spark.events import create_topic, generate_rounds, produce_events
    from tinystream.spark.late_events import LatePolicy, SideOutput, TopicOutput, windowed_writer
    from tinystream.spark.windows import parse_events

    args = parse_args(description, output_topic=output_topic)
    spark = session(os.path.basename(sys.argv[0]).removesuffix(".py"))
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="tinystream-pipeline-")
    policy = LatePolicy(args.late_policy)
    output = TopicOutput(args.bootstrap, args.output_topic)
    late_topic = args.late_topic or f"{args.output_topic}-late"
    side_output = SideOutput(spark, args.input_topic, TopicOutput(args.bootstrap, late_topic), checkpoint,
                             assign) if policy is LatePolicy.SIDE_OUTPUT else None
    topics = [args.input_topic, args.output_topic] + ([late_topic] if side_output else [])
    for topic in topics:
        create_topic(args.bootstrap, topic, partitions=args.partitions)
    rounds = generate_rounds(args.generate, rounds=2, seed=args.seed) if args.generate else [[]]
    for number, batch in enumerate(rounds, start=1):
        if batch:
            produce_events(args.bootstrap, args.input_topic, batch)
            print(f"round {number}: produced {len(batch)} events to {args.input_topic}")
        reader = (spark.readStream.format("tinystream").option("bootstrap.servers", args.bootstrap)
                  .option("subscribe", args.input_topic).option("startingOffsets", "earliest"))
        if args.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
        result = build(spark, parse_events(reader.load()))
        writer = windowed_writer(result, policy=policy, key_column=key_column, output=output,
                                 checkpoint=checkpoint, side_output=side_output)
        if args.trigger == "continuous":
            query = writer.trigger(processingTime=args.interval).start()
            print(f"streaming {args.input_topic} -> {args.output_topic} every {args.interval}; Ctrl-C stops")
            query.awaitTermination()
            return []
        started = time.monotonic()
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        read = sum(p["numInputRows"] for p in query.recentProgress)
        print(f"round {number}: read {read} records in {time.monotonic() - started:.1f} s")
        if side_output:
            print(f"round {number}: {side_output.late_count} late events so far in {late_topic}")
    rows = [json.loads(r.value) for r in (
        spark.read.format("tinystream").option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.output_topic).load().selectExpr("cast(value as string) as value").collect()
    )]
    rows.sort(key=lambda r: tuple(r[c] for c in sort_by))
    written = "rows (a window once per update)" if policy is LatePolicy.UPDATE else "rows"
    print_table(rows, args.show, title=f"{len(rows)} {written} in {args.output_topic}")
    return rows


def print_table(rows: list[dict[str, Any]], limit: int, *, title: str) -> None:
    print(title)
    if not rows:
        return
    columns = list(rows[0])
    shown = [[_cell(r[c]) for c in columns] for r in rows[:limit]]
    widths = [max(len(c), *(len(row[i]) for row in shown)) for i, c in enumerate(columns)]
    print("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in shown:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
    if len(rows) > limit:
        print(f"  ... {len(rows) - limit} more")


def _cell(value: Any) -> str:
    if isinstance(value, str) and len(value) >= 19 and value[10:11] == "T":
        return value[11:19]  # an ISO timestamp: the time of day is what differs
    return str(value)
