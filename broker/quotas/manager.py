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
from collections.abc import Callable
from typing import Any

from tinystream.broker.quotas.book import QuotaBook, Tags
from tinystream.broker.quotas.rate import DEFAULT_SAMPLES, DEFAULT_WINDOW_MS, SampledRate

IDLE_EXPIRY_MS = 3_600_000  # Kafka's InactiveSensorExpirationTimeSeconds for quota sensors
MAX_ENTITIES = 10_000


class ClientQuotaManager:
    def __init__(self, key: str, *, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS,
                 max_entities: int = MAX_ENTITIES, idle_expiry_ms: int = IDLE_EXPIRY_MS,
                 max_throttle_ms: int | None = None, new_stat: Callable[[], Any] | None = None) -> None:
        self.key = key  # producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate
        self.samples, self.window_ms = samples, window_ms
        self._max_throttle_ms = samples * window_ms if max_throttle_ms is None else max_throttle_ms
        self.max_entities, self.idle_expiry_ms = max_entities, idle_expiry_ms
        # What is measured per entity: a SampledRate, or another stat (token_bucket.py) read through `tracking`.
        self._new_stat = new_stat or (lambda: SampledRate(self.samples, self.window_ms))
        self.book = QuotaBook()
        self._rates: OrderedDict[Tags, tuple[Any, int]] = OrderedDict()  # tags -> (stat, last used ms)

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
        found = self.tracking(user, client_id, now_ms)
        if found is None:
            return 0
        rate, limit = found
        rate.record(value, now_ms)
        return int(rate.throttle_ms(limit, now_ms, self.max_throttle_ms))

    def tracking(self, user: str, client_id: str, now_ms: int) -> tuple[Any, float] | None:
        """The stat measuring this client's quota entity (made on first use) and its limit; None: no quota."""
        resolved = self.book.resolve(user, client_id, self.key)
        if resolved is None:
            return None
        self._expire(now_ms)
        entry = self._rates.pop(resolved.tags, None)
        stat = entry[0] if entry is not None else self._new_stat()
        self._rates[resolved.tags] = (stat, now_ms)  # most recently used last
        while len(self._rates) > self.max_entities:
            self._rates.popitem(last=False)
        return stat, resolved.limit

    def _expire(self, now_ms: int) -> None:
        while self._rates:
            tags, (_, used) = next(iter(self._rates.items()))
            if now_ms - used < self.idle_expiry_ms:
                return
            del self._rates[tags]
