"""Produce example events to a topic (the pipelines' input), without Spark.

    python spark-on-k8s/pipelines/generate_events.py --bootstrap 127.0.0.1:9092 --count 5000

Events come in rounds (see tinystream.spark.events.generate_rounds); later
rounds include late events. `--rounds 1` gives a single in-order stream.
"""

import argparse
import os

from tinystream.spark.events import Lateness, create_topic, generate_rounds, produce_events

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("TINYSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--topic", default="events")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    create_topic(args.bootstrap, args.topic, partitions=args.partitions)
    rounds = generate_rounds(args.count, rounds=args.rounds, seed=args.seed)
    for number, batch in enumerate(rounds, start=1):
        produce_events(args.bootstrap, args.topic, batch)
        late = sum(1 for e in batch if e.lateness in (Lateness.LATE_INSIDE, Lateness.LATE_BEYOND))
        print(f"round {number}: {len(batch)} events ({late} late) -> {args.topic}")
