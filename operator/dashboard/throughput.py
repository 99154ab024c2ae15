"""Throughput over time: cluster-wide counter totals sampled periodically into a ring buffer.

Each sample is the sum over brokers of the bytes-in, bytes-out and records-in
counters (broker/metrics/broker_metrics.py). A rate is the difference of two consecutive
samples over their time apart; a counter that went down (a broker restarted
and its counters began at zero again) counts from zero, as Prometheus'
`rate()` treats a counter reset. Pure: samples come in with their time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

SERIES = ("bytes_in", "bytes_out", "records_in")
DEFAULT_CAPACITY = 300  # 10 minutes at the default 2 s interval


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # seconds (wall clock)
    totals: Mapping[int, Mapping[str, float]]  # broker id -> counter totals


class ThroughputRecorder:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._samples: deque[Sample] = deque(maxlen=capacity + 1)

    def add(self, sample: Sample) -> None:
        if self._samples and sample.at <= self._samples[-1].at:
            return
        self._samples.append(sample)

    def rates(self) -> list[dict[str, float]]:
        """Per interval: {"at", "bytes_in", "bytes_out", "records_in"} per second, oldest first."""
        out = []
        samples = list(self._samples)
        for before, after in zip(samples, samples[1:]):
            dt = after.at - before.at
            point = {"at": after.at}
            for key in SERIES:
                delta = 0.0
                for broker_id, totals in after.totals.items():
                    now = totals.get(key, 0.0)
                    then = before.totals.get(broker_id, {}).get(key, 0.0)
                    delta += now - then if now >= then else now  # a reset counts from zero
                point[key] = delta / dt
            out.append(point)
        return out

    def totals(self) -> dict[str, float]:
        if not self._samples:
            return {key: 0.0 for key in SERIES}
        last = self._samples[-1].totals
        return {key: sum(t.get(key, 0.0) for t in last.values()) for key in SERIES}
