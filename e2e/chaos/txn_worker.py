"""A consume-transform-produce worker for the transactional chaos test (run as a process).

    python txn_worker.py BOOTSTRAP SRC DST GROUP TXN_ID STOP_FILE

Reads SRC (read_committed), writes each value upper-cased to the same
partition of DST inside a transaction with the consumed offsets
(send_offsets_to_transaction), one transaction per poll of up to 20 records.
Any error ends the process with status 1 (the test starts a new one with the
same transactional.id, which fences this one and aborts its transaction, as
a crashed service's restart would); it exits 0 once STOP_FILE exists (JSON:
partition -> end offset of SRC) and its committed positions reached those ends.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys

from confluent_kafka import Consumer, Producer


def main() -> int:
    faulthandler.dump_traceback_later(60, repeat=True)  # a worker stuck in a call says where
    bootstrap, src, dst, group, txn_id, stop_file = sys.argv[1:7]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                         "log_level": 3})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 20000,
                         "linger.ms": 5, "log_level": 3})
    producer.init_transactions(60)
    consumer.subscribe([src])
    while not _reached_the_end(consumer, src, stop_file):
        batch = [m for m in consumer.consume(20, 0.5) if not m.error()]
        if not batch:
            continue
        producer.begin_transaction()
        for m in batch:
            producer.produce(dst, key=m.key(), value=m.value().upper(), partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        print(f"committed {len(batch)}", flush=True)
    consumer.close()
    print("done", flush=True)
    return 0


def _reached_the_end(consumer: Consumer, src: str, stop_file: str) -> bool:
    if not os.path.exists(stop_file):
        return False
    ends = {int(p): end for p, end in json.loads(open(stop_file).read()).items()}
    assignment = consumer.assignment()
    if {tp.partition for tp in assignment} != set(ends):
        return False
    return all(tp.offset >= ends[tp.partition] for tp in consumer.position(assignment))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # noqa: BLE001 - reported, and the test restarts the worker
        print(f"worker failed: {exc!r}", flush=True)
        sys.exit(1)
