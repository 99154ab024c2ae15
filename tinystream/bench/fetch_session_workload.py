"""One measured round of the fetch-session benchmark: a consumer fetching every partition of a topic.

The consumer speaks Fetch v12 over a raw connection (`wire_client`) and
keeps its session with the broker's own fetcher-side logic
(`fetch_sessions.client.FetchSessionHandler`, the replica fetcher's): the
first request is full; once the broker answers a session id, requests carry
only partitions whose position moved. Against a broker with
`max.incremental.fetch.session.cache.slots=0` the broker never answers a
session id, so every request stays full: that is the "sessions off" side.

Per fetch it counts the request frame's bytes, the response frame's bytes
and the partitions the response names; per round it reads the broker
process's CPU time (utime + stime from /proc/<pid>/stat, Linux) before and
after, so CPU per fetch = broker CPU seconds / fetches.

Load: `idle` fetches a topic nobody writes to; `light` first produces one
small batch to `light_partitions` random partitions (one Produce request,
acks=1) before each fetch, so each fetch has a little news. The produce
costs broker CPU too, the same with sessions on and off.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass

from kio.schema.fetch.v12.response import FetchResponse

from tinystream.bench.batches import make_batch
from tinystream.bench.consume_workloads import count_records
from tinystream.bench.wire_client import PreparedRequest, WireConnection
from tinystream.broker.fetch_sessions.cache import PartitionRequest
from tinystream.broker.fetch_sessions.client import FetchPlan, FetchSessionHandler
from tinystream.broker.protocol.codec import millis
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import entity, request
from tinystream.testing.peers.wire import decode_response

FETCH_VERSION = 12  # the newest this broker serves; flexible (compact) encodings like a current client's
PARTITION_MAX_BYTES = 1 << 20  # Kafka's max.partition.fetch.bytes


@dataclass(frozen=True)
class RoundResult:
    mode: str  # "on" | "off"
    load: str  # "idle" | "light"
    fetches: int
    request_bytes: int
    response_bytes: int
    partitions_answered: int | None  # None: not counted (the follower variant reads broker counters)
    broker_cpu_s: float
    seconds: float
    incremental: int  # fetches sent as incremental requests

    @property
    def request_bytes_per_fetch(self) -> float:
        return self.request_bytes / self.fetches

    @property
    def response_bytes_per_fetch(self) -> float:
        return self.response_bytes / self.fetches

    @property
    def cpu_ms_per_fetch(self) -> float:
        return 1000.0 * self.broker_cpu_s / self.fetches

    @property
    def partitions_per_response(self) -> float | None:
        return None if self.partitions_answered is None else self.partitions_answered / self.fetches

    @property
    def ms_per_fetch(self) -> float:
        return 1000.0 * self.seconds / self.fetches


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc (Linux only)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class SessionConsumer:
    """Fetches every partition of `topic` from `positions`, in a fetch session when the broker gives one."""

    def __init__(self, topic: str, positions: dict[int, int], *, max_wait_ms: int) -> None:
        self.topic = topic
        self.positions = dict(positions)
        self.max_wait_ms = max_wait_ms
        self.session = FetchSessionHandler()

    def next_request(self) -> tuple[FetchPlan, PreparedRequest]:
        wanted = {TopicPartition(self.topic, p): PartitionRequest(fetch_offset=offset,
                                                                  partition_max_bytes=PARTITION_MAX_BYTES)
                  for p, offset in self.positions.items()}
        plan = self.session.build(wanted)
        parts = tuple(entity(1, FETCH_VERSION, "FetchPartition", partition=tp.partition, fetch_offset=r.fetch_offset,
                             partition_max_bytes=r.partition_max_bytes, log_start_offset=-1,
                             current_leader_epoch=-1, last_fetched_epoch=-1)
                      for tp, r in plan.to_send.items())
        forgotten = tuple(tp.partition for tp in plan.forgotten)
        body = request(
            1, FETCH_VERSION, replica_id=-1, max_wait=millis(self.max_wait_ms), min_bytes=1, max_bytes=50 << 20,
            isolation_level=0, session_id=plan.session_id, session_epoch=plan.epoch,
            topics=(entity(1, FETCH_VERSION, "FetchTopic", topic=self.topic, partitions=parts),) if parts else (),
            forgotten_topics_data=(entity(1, FETCH_VERSION, "ForgottenTopic", topic=self.topic, partitions=forgotten),)
            if forgotten else (),
            rack_id="",
        )
        return plan, PreparedRequest.from_request(body, client_id="bench-fetch-sessions")

    def take(self, payload: memoryview) -> int:
        """Apply a response: move positions past returned batches; the partitions it named."""
        _, response = decode_response(FetchResponse, payload)
        if not self.session.handle_response(response.error_code, response.session_id):
            raise RuntimeError(f"fetch answered {response.error_code!r}")
        named = 0
        for topic in response.responses:
            for p in topic.partitions:
                named += 1
                if p.error_code != 0:
                    raise RuntimeError(f"partition {p.partition_index}: error {p.error_code!r}")
                if p.records:
                    _, self.positions[p.partition_index] = count_records(p.records, self.positions[p.partition_index])
        return named


async def run_round(
    *,
    conn: WireConnection,
    broker_pid: int,
    consumer: SessionConsumer,
    mode: str,
    load: str,
    fetches: int,
    warmup: int,
    light_partitions: int,
    partitions: int,
    rng: random.Random,
) -> RoundResult:
    """`warmup` unmeasured fetches (the session opens), then `fetches` measured ones."""
    batch = make_batch(1, 100)
    totals = {"request": 0, "response": 0, "named": 0, "incremental": 0}
    cpu_start = wall_start = 0.0
    for i in range(warmup + fetches):
        if i == warmup:
            for key in totals:
                totals[key] = 0
            cpu_start, wall_start = process_cpu_seconds(broker_pid), time.perf_counter()
        if load == "light":
            await _produce_some(conn, consumer.topic, batch, rng.sample(range(partitions), light_partitions))
        plan, prepared = consumer.next_request()
        payload = await conn.send(prepared)
        totals["request"] += prepared.size
        totals["response"] += len(payload) + 4
        totals["named"] += consumer.take(payload)
        totals["incremental"] += not plan.full
    seconds = time.perf_counter() - wall_start
    cpu = process_cpu_seconds(broker_pid) - cpu_start
    return RoundResult(mode=mode, load=load, fetches=fetches, request_bytes=totals["request"],
                       response_bytes=totals["response"], partitions_answered=totals["named"], broker_cpu_s=cpu,
                       seconds=seconds, incremental=totals["incremental"])


async def _produce_some(conn: WireConnection, topic: str, batch: bytes, targets: list[int]) -> None:
    body = request(
        0, 9, transactional_id=None, acks=1, timeout=millis(5000),
        topic_data=(entity(0, 9, "TopicProduceData", name=topic, partition_data=tuple(
            entity(0, 9, "PartitionProduceData", index=p, records=batch) for p in targets)),),
    )
    await conn.send(PreparedRequest.from_request(body))
