"""request_percentage (KIP-124): the share of one request-handling thread a client's requests take, no I/O.

Kafka measures each request's time on a request handler thread and adds it to
the client's sampled rate as a percentage of one thread: t seconds add
100 * t, so the rate over quota.window.num windows of quota.window.size.seconds
(the byte rates' windows, rate.py) is "percent of one thread", and a quota of
200 allows two threads' worth (ClientRequestQuotaManager.nanosToPercentage).
Entity resolution is the byte rates' (book.py). Over the quota, the throttle is
Kafka's formula capped at ONE window (its maxThrottleTimeMs for this quota),
not the whole window as for bytes.

Two ways in, as Kafka: `record` for the time known when the answer is built
(returns the throttle for that answer), `record_only` for time found later
(Kafka's network-thread time, recordNoThrottle: the answer's encoding), which
counts against the next requests and throttles none now. Times are seconds,
`now_ms` any monotonic clock: the caller says what a request's time is
(server/request_quota.py: its steps on the event loop).
"""

from __future__ import annotations

from tinystream.broker.quotas.book import QuotaBook
from tinystream.broker.quotas.entities import REQUEST_PERCENTAGE
from tinystream.broker.quotas.manager import ClientQuotaManager
from tinystream.broker.quotas.rate import DEFAULT_SAMPLES, DEFAULT_WINDOW_MS


def percent_of_thread(seconds: float) -> float:
    """What `seconds` of one thread's time add to the rate (Kafka: nanos * 100 / 1e9)."""
    return seconds * 100.0


class RequestTimeQuota:
    """Per-entity request time against request_percentage; see the module docstring."""

    def __init__(self, *, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS) -> None:
        self.manager = ClientQuotaManager(REQUEST_PERCENTAGE, samples=samples, window_ms=window_ms,
                                          max_throttle_ms=window_ms)

    def use(self, book: QuotaBook) -> None:
        self.manager.use(book)

    def applies(self, user: str, client_id: str) -> bool:
        """Whether a request_percentage quota covers this client (when none does, nothing is measured)."""
        return self.manager.book.resolve(user, client_id, REQUEST_PERCENTAGE) is not None

    def record(self, user: str, client_id: str, busy_s: float, now_ms: int) -> int:
        """Add a request's time; the throttle (ms) its answer carries, 0 within the quota."""
        return self.manager.record(user, client_id, percent_of_thread(busy_s), now_ms)

    def record_only(self, user: str, client_id: str, busy_s: float, now_ms: int) -> None:
        """Add time found after the answer was built: it counts, but throttles no answer now."""
        self.manager.record(user, client_id, percent_of_thread(busy_s), now_ms)
