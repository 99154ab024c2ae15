"""The controller_mutation_rate gate (KIP-599) of CreateTopics, CreatePartitions and DeleteTopics.

One `MutationGate` per request: `refused()` before each topic's change (true:
answer that topic THROTTLING_QUOTA_EXCEEDED), `spent(n)` after a change of n
partitions, `throttle_time()` for the answer: the throttle is also handed to
the connection, which mutes the channel as for the other quotas. Strict or
permissive by the request's version: quotas/mutation.py.
"""

from __future__ import annotations

import datetime

from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.quotas.mutation import STRICT_SINCE

MESSAGE = "The throttling quota has been exceeded."  # Kafka's Errors.THROTTLING_QUOTA_EXCEEDED message
QUOTA = "controller_mutation"  # the metrics' quota label


class MutationGate:
    def __init__(self, ctx: BrokerContext, call: Call) -> None:
        self._ctx, self._call = ctx, call
        self.strict = call.version >= STRICT_SINCE[call.header.api_key]
        self.throttle_ms = 0

    def refused(self) -> bool:
        """Strict: whether the client's bucket is below zero, so this topic must not change."""
        if not self.strict:
            return False
        ms = self._ctx.quotas.mutation_exceeded_ms(self._call.client.auth.principal, self._call.header.client_id)
        self.throttle_ms = max(self.throttle_ms, ms)
        return ms > 0

    def spent(self, partitions: int) -> None:
        """A change of `partitions` was made; permissive: its throttle goes into the answer."""
        ms = self._ctx.quotas.spend_mutations(self._call.client.auth.principal, self._call.header.client_id,
                                              partitions)
        if not self.strict:
            self.throttle_ms = max(self.throttle_ms, ms)

    def throttle_time(self) -> datetime.timedelta:
        if self.throttle_ms:
            self._call.client.throttle.throttle(self.throttle_ms)
            self._ctx.metrics.observe_throttle(QUOTA, self.throttle_ms)
        return millis(self.throttle_ms)
