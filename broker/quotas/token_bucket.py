"""Kafka's TokenBucket (KIP-599): what controller_mutation_rate is measured with, time passed in.

A bucket holds up to burst = quota x samples x window seconds of tokens
(Kafka's TokenBucket.burst: quota.window.num x quota.window.size.seconds) and
starts full. It refills at `quota` tokens a second; a mutation of n
partitions takes n tokens, and may take the bucket below zero: the request
that crosses the quota is still done, as KIP-599 wants (a request is never
split). While tokens < 0 the quota is exceeded, and the throttle is the time
to refill to zero: -tokens / quota seconds (ControllerMutationQuotaManager
.throttleTimeMs), not capped. The quota is passed to every call, so a changed
quota applies at once, as Kafka's MetricConfig does.
"""

from __future__ import annotations


class TokenBucket:
    __slots__ = ("burst_s", "tokens", "last_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.burst_s = samples * window_ms / 1000
        self.tokens: float | None = None  # None: never used (full)
        self.last_ms = 0

    def _refill(self, quota: float, now_ms: int) -> float:
        burst = quota * self.burst_s
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * max(0, now_ms - self.last_ms) / 1000)
        self.last_ms = max(self.last_ms, now_ms)
        return burst

    def record(self, value: float, quota: float, now_ms: int) -> None:
        burst = self._refill(quota, now_ms)
        assert self.tokens is not None
        self.tokens = min(burst, self.tokens - value)

    def available(self, quota: float, now_ms: int) -> float:
        self._refill(quota, now_ms)
        assert self.tokens is not None
        return self.tokens

    def throttle_ms(self, quota: float, now_ms: int) -> int:
        """0 while tokens >= 0; else the time until they are back at zero."""
        tokens = self.available(quota, now_ms)
        return round(-tokens / quota * 1000) if tokens < 0 else 0
