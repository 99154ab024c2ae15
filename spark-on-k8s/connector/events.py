"""A small, deterministic event generator for the example pipelines and the demo.

Events are page views with an amount, keyed by user, as JSON values:
    {"seq": 17, "user": "u3", "page": "/cart", "amount_cents": 1250, "ts": 1700000004250}

`ts` is the event time in epoch milliseconds; the record's Kafka timestamp
(CreateTime) is set to the same value. Event time starts an hour ago (on a
whole minute), so retention never takes the records away mid-run. `generate_rounds` produces rounds of
events: round one moves event time forward; each later round continues it
and also replays some events *late*, some still inside the watermark (their
window is open: counted) and some beyond it (their window was already
emitted: dropped). Everything comes from one `random.Random(seed)`, so a run
is reproducible and a test can compute the expected windows in plain Python.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

USERS = ("u0", "u1", "u2", "u3", "u4", "u5")
PAGES = ("/", "/search", "/product", "/cart", "/checkout")
RECENT_MS = 3_600_000  # rounds start an hour ago by default
TICK_USER = "_tick"  # the marker event that moves the watermark past the last real window


class Lateness(Enum):
    ON_TIME = "on time"
    LATE_INSIDE = "late, inside the watermark"
    LATE_BEYOND = "late, beyond the watermark"
    TICK = "watermark tick"


@dataclass(frozen=True)
class Event:
    seq: int
    user: str
    page: str
    amount_cents: int
    ts: int  # event time, epoch ms
    lateness: Lateness = Lateness.ON_TIME

    def to_json(self) -> bytes:
        body = asdict(self)
        del body["lateness"]
        return json.dumps(body, separators=(",", ":")).encode()

    @property
    def key(self) -> bytes:
        return self.user.encode()


def generate_rounds(
    total: int,
    *,
    rounds: int = 2,
    seed: int = 7,
    start_ms: int | None = None,
    mean_gap_ms: int = 250,
    late_fraction: float = 0.1,
    window_ms: int = 10_000,
    watermark_ms: int = 5_000,
    tick: bool = True,
) -> list[list[Event]]:
    """`total` events split over `rounds`; rounds after the first include late events.

    A late event inside the watermark has an event time in the window that is still
    open when its round is read (after max(previous) - watermark); one beyond it lies
    in a window that ended before that watermark. The last round ends with a tick
    event far enough ahead that every real window is closed and emitted.
    """
    if start_ms is None:
        start_ms = recent_start_ms()
    rng = random.Random(seed)
    per_round = [total // rounds + (1 if i < total % rounds else 0) for i in range(rounds)]
    out: list[list[Event]] = []
    now = start_ms
    seq = 0
    max_seen = None
    for r, count in enumerate(per_round):
        batch: list[Event] = []
        late_budget = int(count * late_fraction) if r > 0 and max_seen is not None else 0
        for i in range(count):
            if i < late_budget and max_seen is not None:
                watermark = max_seen - watermark_ms
                if i % 2 == 0:
                    # Inside: in the window holding the watermark or later, so its window's end
                    # is after the watermark even when the event itself is behind it.
                    open_from = watermark - watermark % window_ms
                    ts = rng.randint(open_from, max_seen)
                    kind = Lateness.LATE_INSIDE
                else:
                    # Beyond: a window that ended at or before the watermark.
                    closed_until = watermark - watermark % window_ms  # end of the last closed window
                    ts = rng.randint(max(start_ms, closed_until - 3 * window_ms), closed_until - 1)
                    kind = Lateness.LATE_BEYOND
            else:
                now += rng.randint(1, 2 * mean_gap_ms)
                ts = now
                kind = Lateness.ON_TIME
            batch.append(Event(seq, rng.choice(USERS), rng.choice(PAGES), rng.randint(100, 5000), ts, kind))
            seq += 1
        if tick and r == rounds - 1:
            batch.append(Event(seq, TICK_USER, "/", 0, now + 3 * window_ms + watermark_ms, Lateness.TICK))
            seq += 1
        max_seen = max([e.ts for e in batch] + ([max_seen] if max_seen is not None else []))
        out.append(batch)
    return out


def recent_start_ms(now_s: float | None = None) -> int:
    """A start an hour back, on a whole minute: windows line up the same way on every run.

    Recent on purpose: a broker's time-based retention (7 days by default) deletes
    records by their timestamp, and event time is the record timestamp here.
    """
    now_ms = int((time.time() if now_s is None else now_s) * 1000)
    return (now_ms - RECENT_MS) // 60_000 * 60_000


def producer_config(bootstrap: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "partitioner": "murmur2_random", "log_level": 3, **(extra or {})}


def produce_events(
    bootstrap: str, topic: str, events: Iterable[Event], *, producer_conf: Mapping[str, Any] | None = None
) -> int:
    """Produce events keyed by user with CreateTime = event time; returns how many were acknowledged."""
    producer = Producer(producer_config(bootstrap, producer_conf))
    errors: list[str] = []
    count = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(f"{err.name()}: {err.str()}")

    for event in events:
        while True:
            try:
                producer.produce(topic, key=event.key, value=event.to_json(), timestamp=event.ts,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
    left = producer.flush(60)
    if errors or left:
        raise RuntimeError(f"producing to {topic!r}: {len(errors)} failed, {left} unacknowledged; {errors[:1]}")
    return count


def create_topic(bootstrap: str, topic: str, *, partitions: int = 3, timeout_s: float = 30.0,
                 replication_factor: int = -1) -> None:
    """Create a topic; an existing one is fine.

    The replication factor defaults to the cluster's own (`default.replication.factor`: -1 in
    CreateTopics, KIP-464). It was 1: on a real cluster with min.insync.replicas=2 (e2e/kind) every
    acks=all write to the pipeline's topics then failed with NOT_ENOUGH_REPLICAS."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor)], request_timeout=timeout_s)
    for future in futures.values():
        try:
            future.result(timeout_s)
        except Exception as exc:  # KafkaException(TOPIC_ALREADY_EXISTS) is fine
            err = exc.args[0] if exc.args else None
            if getattr(err, "name", lambda: "")() != "TOPIC_ALREADY_EXISTS":
                raise
