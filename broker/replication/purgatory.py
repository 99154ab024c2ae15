"""Where requests wait for a partition to change (Kafka's DelayedOperationPurgatory).

A long-polling Fetch waits for new data on any of its partitions, an acks=all
Produce for the high watermark to pass its batch. Both park here on their
partitions' keys with a deadline; `notify(key)` (called after an append or a
high-watermark move) wakes everyone parked on that key, and each waiter checks
again whether it is satisfied. A wake-up is a hint, never a result, so a
spurious one costs one re-check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


def _wake(fut: asyncio.Future, value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


class Purgatory:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future]] = {}

    @property
    def waiting(self) -> int:
        return len({id(f) for fs in self._waiters.values() for f in fs})

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Until one of `keys` is notified (True) or `timeout_s` passes (False)."""
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        timer = loop.call_later(timeout_s, _wake, fut, False)
        try:
            return await fut
        finally:
            timer.cancel()
            for key in keys:
                parked = self._waiters.get(key)
                if parked is not None:
                    parked.discard(fut)
                    if not parked:
                        del self._waiters[key]

    def notify(self, key: Hashable) -> None:
        parked = self._waiters.pop(key, None)
        if parked:
            for fut in parked:
                _wake(fut, True)

    def notify_all(self) -> None:
        """Wake every waiter (shutdown, metadata changes)."""
        for key in list(self._waiters):
            self.notify(key)
