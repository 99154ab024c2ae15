"""Where requests wait for a partition to change (Kafka's DelayedOperationPurgatory).

- `Purgatory`: a long-polling Fetch waits for new data on any of its
  partitions, parked on their keys with a deadline; `notify(key)` wakes
  everyone parked on that key (the replica manager keeps one for followers,
  woken by appends, and one for consumers, woken by high-watermark moves).
- `OffsetWaiters`: an acks=all Produce waits for one partition's high
  watermark to pass its batch; a move wakes only the produces it passes.

Each waiter checks again whether it is satisfied: a wake-up is a hint, never a
result, so a spurious one costs one re-check.
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


class OffsetWaiters:
    """acks=all produces waiting for a partition's high watermark to pass their batch (Kafka's DelayedProduce).

    A produce parks with the offset its batch ends at; `advanced(key, hw)` wakes only those whose offset the
    new high watermark passed. With several requests in flight on one partition (a producer's
    max.in.flight), a HW move that passes the first batch no longer wakes the others for a re-check that
    finds them still waiting. `notify(key)` wakes every one (leadership or state changed, partition gone).
    """

    def __init__(self) -> None:
        self._waiters: dict[Hashable, list[tuple[int, asyncio.Future]]] = {}

    @property
    def waiting(self) -> int:
        """Waiters not yet woken."""
        return sum(1 for parked in self._waiters.values() for _, fut in parked if not fut.done())

    async def wait(self, key: Hashable, offset: int, timeout_s: float) -> bool:
        """Until the HW of `key` passes `offset` or it is notified (True), or `timeout_s` passes (False)."""
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        entry = (offset, fut)
        self._waiters.setdefault(key, []).append(entry)
        timer = loop.call_later(timeout_s, _wake, fut, False)
        try:
            return await fut
        finally:
            timer.cancel()
            parked = self._waiters[key]  # only the waiter itself takes its entry out
            parked.remove(entry)
            if not parked:
                del self._waiters[key]

    def advanced(self, key: Hashable, high_watermark: int) -> None:
        parked = self._waiters.get(key)
        if not parked:
            return
        for offset, fut in parked:
            if offset < high_watermark:
                _wake(fut, True)

    def notify(self, key: Hashable) -> None:
        for _, fut in self._waiters.get(key, ()):
            _wake(fut, True)

    def notify_all(self) -> None:
        for key in list(self._waiters):
            self.notify(key)
