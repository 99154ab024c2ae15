"""controller_mutation_rate (KIP-599): partitions created, added or deleted per second, no I/O.

CreateTopics counts each topic's partitions, CreatePartitions the partitions
it adds, DeleteTopics each deleted topic's partitions, against a token bucket
per quota entity (token_bucket.py; entity resolution as the byte rates',
book.py). Kafka's two modes, by request version:

- strict (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+):
  `exceeded_ms` is asked before each topic; while the bucket is below zero that
  topic is refused (THROTTLING_QUOTA_EXCEEDED) with that throttle; otherwise it
  is done and `spend` takes its partitions, which may cross the quota (that
  request is not throttled; the next one is refused);
- permissive (older versions, whose clients do not know the error): every
  topic is done, and `spend`'s answer, the throttle once the bucket is below
  zero, goes into the answer and mutes the connection.
"""

from __future__ import annotations

from tinystream.broker.quotas.book import QuotaBook
from tinystream.broker.quotas.entities import CONTROLLER_MUTATION_RATE
from tinystream.broker.quotas.manager import ClientQuotaManager
from tinystream.broker.quotas.rate import DEFAULT_SAMPLES, DEFAULT_WINDOW_MS
from tinystream.broker.quotas.token_bucket import TokenBucket

#: The first version of each API whose answer may carry THROTTLING_QUOTA_EXCEEDED (Kafka's strictSinceVersion).
STRICT_SINCE = {19: 6, 20: 5, 37: 3}  # CreateTopics, DeleteTopics, CreatePartitions


class ControllerMutationQuota:
    def __init__(self, *, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS) -> None:
        self.manager = ClientQuotaManager(CONTROLLER_MUTATION_RATE, samples=samples, window_ms=window_ms,
                                          new_stat=lambda: TokenBucket(samples, window_ms))

    def use(self, book: QuotaBook) -> None:
        self.manager.use(book)

    def exceeded_ms(self, user: str, client_id: str, now_ms: int) -> int:
        """0 when a mutation may go ahead; else how long until the bucket is back at zero."""
        found = self.manager.tracking(user, client_id, now_ms)
        if found is None:
            return 0
        bucket, quota = found
        return int(bucket.throttle_ms(quota, now_ms))

    def spend(self, user: str, client_id: str, partitions: int, now_ms: int) -> int:
        """Take `partitions` tokens; the throttle the bucket is left at (0: still within the quota)."""
        found = self.manager.tracking(user, client_id, now_ms)
        if found is None or partitions <= 0:
            return 0
        bucket, quota = found
        bucket.record(partitions, quota, now_ms)
        return int(bucket.throttle_ms(quota, now_ms))
