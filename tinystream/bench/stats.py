"""Measurements and their presentation: latency percentiles, progress lines, results.

A `RunResult` is what one workload against one broker produced; the
commands print it as a table line and, with --json, as a dict. Latency is
per request (raw client: one produce request carries one batch per
partition; one fetch round trip) or per record (confluent), as `latency_unit`
says.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

MB = 1_000_000  # MB/s as kafka-producer-perf-test prints it (10^6 bytes)


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * (len(sorted_values) - 1)))))
    return sorted_values[index]


@dataclass
class Latencies:
    samples_ms: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.samples_ms.append(seconds * 1000.0)

    def summary(self) -> dict[str, float]:
        values = sorted(self.samples_ms)
        if not values:
            return {}
        return {
            "count": len(values),
            "avg": round(sum(values) / len(values), 3),
            "p50": round(percentile(values, 0.50), 3),
            "p99": round(percentile(values, 0.99), 3),
            "p99.9": round(percentile(values, 0.999), 3),
            "max": round(values[-1], 3),
        }


@dataclass
class RunResult:
    target: str
    bootstrap: str
    client: str
    operation: str  # produce | consume
    records: int
    bytes: int
    seconds: float
    latency_ms: dict[str, float]
    latency_unit: str  # request | record | batch
    requests: int = 0
    extra: dict[str, object] = field(default_factory=dict)
    version: str = ""
    verified: bool = True  # the broker's end offsets agree with what was acknowledged / read
    problem: str = ""
    broker_cpu_s: float | None = None  # the broker's user + system seconds over the measured part (bench/cpu.py)
    client_cpu_s: float | None = None  # the load generator's own, over its timed part (franzbench only)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_s_per_gb(self) -> float | None:
        """Broker CPU seconds per GB (10^9 bytes) of record values moved: the cost of the work."""
        if self.broker_cpu_s is None or self.bytes <= 0:
            return None
        return self.broker_cpu_s / (self.bytes / 1e9)

    @property
    def client_cores(self) -> float | None:
        """Cores the load generator kept busy over the run: near its own ceiling, the broker cannot set the pace."""
        if self.client_cpu_s is None or self.seconds <= 0:
            return None
        return self.client_cpu_s / self.seconds

    def as_dict(self) -> dict:
        d = asdict(self)
        d["cpu_s_per_gb"] = None if self.cpu_s_per_gb is None else round(self.cpu_s_per_gb, 2)
        d["client_cores"] = None if self.client_cores is None else round(self.client_cores, 2)
        d["records_per_s"] = round(self.records_per_s, 1)
        d["mb_per_s"] = round(self.mb_per_s, 3)
        d["seconds"] = round(self.seconds, 3)
        return d

    def line(self) -> str:
        lat = self.latency_ms
        lat_text = (f"latency per {self.latency_unit} ms p50 {lat['p50']:.2f}  p99 {lat['p99']:.2f}  "
                    f"p99.9 {lat['p99.9']:.2f}  max {lat['max']:.2f}") if lat else "latency n/a"
        name = f"{self.target}{' ' + self.version if self.version else ''}"
        return (f"{name:<22} {self.client:<10} {self.records:>11,} records in {self.seconds:7.2f} s: "
                f"{self.records_per_s:>12,.0f} records/s {self.mb_per_s:9.1f} MB/s   {lat_text}"
                + ("" if self.cpu_s_per_gb is None else f"   broker CPU {self.cpu_s_per_gb:.1f} s/GB")
                + ("" if self.client_cores is None else f"   client busy {self.client_cores:.2f} cores")
                + ("" if self.verified else f"   UNVERIFIED: {self.problem}"))


class Progress:
    """A progress line on stderr about once a second."""

    def __init__(self, label: str, total: int, *, enabled: bool = True, interval: float = 1.0):
        self.label = label
        self.total = total
        self.enabled = enabled
        self.interval = interval
        self.start = time.perf_counter()
        self.last_time = self.start
        self.last_count = 0

    def update(self, count: int, nbytes: int = 0) -> None:
        now = time.perf_counter()
        if not self.enabled or now - self.last_time < self.interval:
            return
        rate = (count - self.last_count) / (now - self.last_time)
        elapsed = now - self.start
        share = f"{100.0 * count / self.total:5.1f}%" if self.total else ""
        mb = f"  {nbytes / MB / elapsed:8.1f} MB/s avg" if nbytes else ""
        print(f"  [{self.label}] {share} {count:>12,} records  {rate:>12,.0f} records/s now{mb}",
              file=sys.stderr, flush=True)
        self.last_time = now
        self.last_count = count


def ratio_lines(results: list[RunResult]) -> list[str]:
    """Ours against each peer: records/s ratio (>1: ours is faster) and p99 latency."""
    if not results:
        return []
    ours = results[0]
    lines = []
    for peer in results[1:]:
        if peer.records_per_s <= 0:
            continue
        ratio = ours.records_per_s / peer.records_per_s
        verdict = ("faster" if ratio >= 1.0 else f"slower, within 2x of {peer.target}" if ratio >= 0.5
                   else f"slower, NOT within 2x of {peer.target}")
        lines.append(f"{ours.target} / {peer.target}: {ratio:.2f}x records/s ({verdict})")
        if ours.cpu_s_per_gb and peer.cpu_s_per_gb:
            lines.append(f"{ours.target} / {peer.target}: {ours.cpu_s_per_gb / peer.cpu_s_per_gb:.2f}x broker CPU "
                         f"per GB ({ours.cpu_s_per_gb:.1f} vs {peer.cpu_s_per_gb:.1f} s/GB; lower is cheaper)")
    return lines


def ratios(results: list[RunResult]) -> dict[str, float]:
    if len(results) < 2:
        return {}
    ours = results[0]
    return {peer.target: round(ours.records_per_s / peer.records_per_s, 3)
            for peer in results[1:] if peer.records_per_s > 0}


@dataclass(frozen=True)
class Spread:
    """Several rounds of one figure: the median and the range around it."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            return cls(float("nan"), float("nan"), float("nan"), 0)
        return cls(statistics.median(values), min(values), max(values), len(values))

    @property
    def relative(self) -> float:
        """(high - low) / median: how much the rounds disagree."""
        return (self.high - self.low) / self.median if self.median else float("nan")

    def as_dict(self, digits: int = 3) -> dict[str, float]:
        return {"median": round(self.median, digits), "min": round(self.low, digits), "max": round(self.high, digits),
                "rounds": self.count}
