"""A sampled rate and its throttle time, as Kafka's metrics `Rate` over a `SampledStat` (ClientQuotaManager).

Samples: at most `samples` (quota.window.num, 11), each covering `window_ms`
(quota.window.size.seconds, 1 s) from its start. A record goes into the newest
sample, or starts a new one (dropping the oldest) once the newest is a window
old. Samples that started before now - samples * window_ms count nothing.

rate = total / window, where window = now - oldest sample's start, but never
fewer than (samples - 1) full windows (so one burst on a fresh sensor is
averaged over 10 s, not over the 1 ms since it began: Kafka's Rate.windowSize).

Throttle (Kafka's QuotaUtils.throttleTime): once rate > quota,
    throttle_ms = (rate - quota) / quota * window_ms_total
the time after which, with nothing more recorded, the rate is back at the quota.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SAMPLES = 11  # quota.window.num
DEFAULT_WINDOW_MS = 1000  # quota.window.size.seconds * 1000


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float


class SampledRate:
    """Bytes (or anything) per second over the last `samples` windows; every method takes the time."""

    __slots__ = ("samples", "window_ms", "_samples")

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS) -> None:
        if samples < 2 or window_ms <= 0:
            raise ValueError("a sampled rate needs at least 2 samples and a positive window")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []

    def record(self, value: float, now_ms: int) -> None:
        current = self._samples[-1] if self._samples else None
        if current is None or now_ms >= current.start_ms + self.window_ms:
            self._samples.append(_Sample(now_ms, 0.0))
            if len(self._samples) > self.samples:
                del self._samples[0]
            current = self._samples[-1]
        current.value += value

    def _purge(self, now_ms: int) -> None:
        expire_before = now_ms - self.samples * self.window_ms
        self._samples = [s for s in self._samples if s.start_ms + self.window_ms > expire_before]

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's Rate.windowSize: elapsed since the oldest sample, at least (samples - 1) full windows."""
        self._purge(now_ms)
        oldest = self._samples[0].start_ms if self._samples else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def rate(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)
        total = sum(s.value for s in self._samples)
        return total * 1000.0 / window

    def throttle_ms(self, quota: float, now_ms: int, max_ms: int) -> int:
        """How long the client must wait for its rate to drop to `quota` (0: within it), at most `max_ms`."""
        rate = self.rate(now_ms)
        if rate <= quota:
            return 0
        window = self.window_size_ms(now_ms)
        return min(max_ms, int((rate - quota) / quota * window))

    def last_recorded_ms(self) -> int | None:
        return self._samples[-1].start_ms if self._samples else None
