"""One quota type's enforcement, as Kafka's ClientQuotaManager: record -> throttle time, no I/O.

`record(user, client_id, value, now_ms)` resolves the quota of this client
(book.py's order), adds `value` to the rate of the entity that quota belongs
to (its tags) and returns how long the client must be throttled (0 when within
quota or when no quota applies: then nothing is tracked at all).

Memory is bounded: rates are kept per tags in LRU order, at most
`max_entities`; one unused for `idle_expiry_ms` (Kafka expires an inactive
quota sensor after an hour) or pushed out by a newer one is dropped, which
forgets its history (that entity starts afresh, as after a broker restart).
The throttle is capped at the whole window (samples * window: Kafka's
maxThrottleTimeMs), so a misconfigured tiny quota cannot park a client forever;
request_percentage caps it at one window (Kafka's ClientRequestQuotaManager).
"""

from __future__ import annotations

from collections import OrderedDict

from tinystream.broker.quotas.book import QuotaBook, Tags
from tinystream.broker.quotas.rate import DEFAULT_SAMPLES, DEFAULT_WINDOW_MS, SampledRate

IDLE_EXPIRY_MS = 3_600_000  # Kafka's InactiveSensorExpirationTimeSeconds for quota sensors
MAX_ENTITIES = 10_000


class ClientQuotaManager:
    def __init__(self, key: str, *, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS,
                 max_entities: int = MAX_ENTITIES, idle_expiry_ms: int = IDLE_EXPIRY_MS,
                 max_throttle_ms: int | None = None) -> None:
        self.key = key  # producer_byte_rate, consumer_byte_rate, request_percentage
        self.samples, self.window_ms = samples, window_ms
        self._max_throttle_ms = samples * window_ms if max_throttle_ms is None else max_throttle_ms
        self.max_entities, self.idle_expiry_ms = max_entities, idle_expiry_ms
        self.book = QuotaBook()
        self._rates: OrderedDict[Tags, tuple[SampledRate, int]] = OrderedDict()  # tags -> (rate, last used ms)

    @property
    def max_throttle_ms(self) -> int:
        return self._max_throttle_ms

    @property
    def tracked(self) -> int:
        return len(self._rates)

    def use(self, book: QuotaBook) -> None:
        """New quotas (an alter, or the file read at start); rates of entities that keep a quota carry on."""
        self.book = book

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        resolved = self.book.resolve(user, client_id, self.key)
        if resolved is None:
            return 0
        self._expire(now_ms)
        entry = self._rates.pop(resolved.tags, None)
        rate = entry[0] if entry is not None else SampledRate(self.samples, self.window_ms)
        self._rates[resolved.tags] = (rate, now_ms)  # most recently used last
        while len(self._rates) > self.max_entities:
            self._rates.popitem(last=False)
        rate.record(value, now_ms)
        return rate.throttle_ms(resolved.limit, now_ms, self.max_throttle_ms)

    def _expire(self, now_ms: int) -> None:
        while self._rates:
            tags, (_, used) = next(iter(self._rates.items()))
            if now_ms - used < self.idle_expiry_ms:
                return
            del self._rates[tags]
