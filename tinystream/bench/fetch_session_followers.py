"""The follower side of `tinystream bench fetch-sessions --followers`: replica fetchers on 1000 partitions.

Two local clusters (controller + 2 brokers, `tinystream.dev.cluster`) run
side by side, identical but for `max.incremental.fetch.session.cache.slots`
(1000: followers fetch in sessions; 0: every follower fetch is full). One
topic of `partitions` partitions with RF 2 makes each broker lead half and
follow the other half, so each broker's replica fetcher long-polls the
other (Kafka's replica.fetch.wait.max.ms, here 500 ms) with all its
followed partitions.

A window of `seconds` is measured on one cluster, then the other, and so
on in alternating order: the brokers' own counters (`/metrics`:
tinystream_requests, tinystream_request_bytes and tinystream_response_bytes
for Fetch, the session context counters) give fetches and bytes; the two
broker processes' CPU time (/proc) over the window, divided by the fetches,
gives CPU per fetch. That CPU includes the follower's side (building
requests, applying answers) and the brokers' idle background work, the
same for both clusters. `light` load produces one record to
`light_partitions` random partitions every 100 ms during the window.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tinystream.bench.fetch_session_workload import RoundResult, process_cpu_seconds
from tinystream.dev.cluster import LocalCluster

FETCH = "Fetch"


def _scrape(admin_url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{admin_url}/metrics", timeout=10) as r:  # noqa: S310 - our loopback broker
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("api") == FETCH and s.name in (
                    "tinystream_requests_total", "tinystream_request_bytes_total", "tinystream_response_bytes_total"):
                out[s.name] = s.value
            elif s.name == "tinystream_fetch_session_requests_total":
                out[f"kind {s.labels['kind']}"] = s.value
    return out


class FollowerCluster:
    """A 2-broker cluster with the topic created; `measure` runs one window."""

    def __init__(self, mode: str, slots: int, *, partitions: int, workdir: Path, quiet: bool) -> None:
        self.mode = mode
        self.partitions = partitions
        self.topic = f"bench-followers-{uuid.uuid4().hex[:8]}"
        self.cluster = LocalCluster(
            brokers=2, data_dir=workdir / f"cluster-{mode}", first_port=0,
            overrides=[f"max.incremental.fetch.session.cache.slots={slots}"],
            echo=(lambda _: None) if quiet else (lambda line: print(f"  [{mode}] {line}", flush=True)),
        )

    def open(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # optional: the [test] and [spark] extras

        bootstrap = self.cluster.open()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(self.topic, self.partitions, 2)], request_timeout=120)[self.topic].result(180)
        self.bootstrap = bootstrap
        time.sleep(5)  # followers have truncated and opened their sessions

    def close(self) -> None:
        self.cluster.close()

    def measure(self, *, load: str, seconds: float, light_partitions: int, seed: int) -> RoundResult:
        brokers = [(b.pid, b.admin_url) for b in self.cluster.brokers]
        assert all(pid and url for pid, url in brokers)
        stop = threading.Event()
        producer = threading.Thread(target=self._produce, args=(stop, light_partitions, seed), daemon=True)
        if load == "light":
            producer.start()
            time.sleep(1)  # in the steady state before the window opens
        before = [_scrape(str(url)) for _, url in brokers]
        cpu_before = sum(process_cpu_seconds(int(pid)) for pid, _ in brokers)
        started = time.perf_counter()
        time.sleep(seconds)
        cpu = sum(process_cpu_seconds(int(pid)) for pid, _ in brokers) - cpu_before
        elapsed = time.perf_counter() - started
        after = [_scrape(str(url)) for _, url in brokers]
        stop.set()
        if producer.is_alive():
            producer.join(10)

        def delta(key: str) -> float:
            return sum(a.get(key, 0.0) - b.get(key, 0.0) for a, b in zip(after, before, strict=True))

        # Every Fetch here is a follower's: the benchmark runs no consumer.
        fetches = int(delta("tinystream_requests_total"))
        return RoundResult(mode=self.mode, load=load, fetches=max(fetches, 1),
                           request_bytes=int(delta("tinystream_request_bytes_total")),
                           response_bytes=int(delta("tinystream_response_bytes_total")), partitions_answered=None,
                           broker_cpu_s=cpu, seconds=elapsed, incremental=int(delta("kind incremental")))

    def _produce(self, stop: threading.Event, light_partitions: int, seed: int) -> None:
        from confluent_kafka import Producer

        rng = random.Random(seed)
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "acks": 1})
        while not stop.is_set():
            for p in rng.sample(range(self.partitions), light_partitions):
                producer.produce(self.topic, value=b"x" * 100, partition=p)
            producer.poll(0)
            stop.wait(0.1)
        producer.flush(10)


def run_follower_rounds(*, partitions: int, rounds: int, seconds: float, loads: tuple[str, ...],
                        light_partitions: int, slots: dict[str, int], say, quiet: bool) -> list[RoundResult]:
    results: list[RoundResult] = []
    with tempfile.TemporaryDirectory(prefix="tinystream-bench-followers-") as workdir:
        clusters = {mode: FollowerCluster(mode, n, partitions=partitions, workdir=Path(workdir), quiet=quiet)
                    for mode, n in slots.items()}
        try:
            for mode, cluster in clusters.items():
                say(f"  followers, sessions {mode}: starting 2 brokers, topic of {partitions} partitions, RF 2")
                cluster.open()
            for index in range(rounds):
                order = ("on", "off") if index % 2 == 0 else ("off", "on")
                say(f"round {index + 1}/{rounds} ({' then '.join(order)})")
                for load in loads:
                    for mode in order:
                        r = clusters[mode].measure(load=load, seconds=seconds, light_partitions=light_partitions,
                                                   seed=index)
                        results.append(r)
                        say(f"  followers {r.load:<5} sessions {r.mode:<3}: {r.fetches} fetches, request "
                            f"{r.request_bytes_per_fetch:>9,.0f} B  response {r.response_bytes_per_fetch:>9,.0f} B  "
                            f"broker CPU {r.cpu_ms_per_fetch:7.3f} ms per fetch ({r.incremental} incremental)")
        finally:
            for cluster in clusters.values():
                cluster.close()
    return results
