"""End-to-end latency figures (produce -> a consumer receives): percentiles and a per-second series.

Pure. A sample is (seconds since the run started, latency in ms), the latency being the consumer's
receive time minus the record's CreateTime timestamp, which the producer stamped at send() on the same
machine clock (millisecond resolution, so figures under a millisecond read as 0 or 1 ms).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tinystream.bench.stats import percentile

Sample = tuple[float, float]  # (seconds since start, latency ms)


def summary(samples: Iterable[Sample], *, skip_s: float = 0.0) -> dict[str, float]:
    """p50 / p99 / p99.9 / max over the samples received after `skip_s` (the JVMs' warm-up); {} if none."""
    values = sorted(latency for at, latency in samples if at >= skip_s)
    if not values:
        return {}
    return {"count": len(values), "p50": percentile(values, 0.50), "p99": percentile(values, 0.99),
            "p99.9": percentile(values, 0.999), "max": values[-1]}


def per_second(samples: Iterable[Sample], fraction: float = 0.99) -> list[tuple[int, float]]:
    """(second, the `fraction` percentile of the latencies received in that second), seconds in order;
    a second with nothing received is absent (a gap in the picture, not a zero)."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for at, latency in samples:
        buckets[int(at)].append(latency)
    return [(second, percentile(sorted(buckets[second]), fraction)) for second in sorted(buckets)]


@dataclass
class LatencyRun:
    """One side's run of the latency cell."""

    target: str
    rate: int  # records/s asked of ProducerPerformance
    records: int  # records received
    expected: int
    seconds: float
    latency_ms: dict[str, float]
    series: list[tuple[int, float]] = field(default_factory=list)  # per-second p99
    broker_cpu_s: float | None = None
    skip_s: float = 0.0

    @property
    def received_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        return {"target": self.target, "rate": self.rate, "records": self.records, "expected": self.expected,
                "seconds": round(self.seconds, 3), "latency_ms": self.latency_ms, "skip_s": self.skip_s,
                "per_second_p99_ms": self.series, "broker_cpu_s": self.broker_cpu_s}

    def line(self) -> str:
        lat = self.latency_ms
        return (f"{self.target}: {self.records:,}/{self.expected:,} records at {self.rate:,}/s, end-to-end p50 "
                f"{lat.get('p50', float('nan')):.0f} ms, p99 {lat.get('p99', float('nan')):.0f} ms, p99.9 "
                f"{lat.get('p99.9', float('nan')):.0f} ms")
