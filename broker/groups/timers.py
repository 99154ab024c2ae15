"""Timers for the coordinator: the real asyncio one and a manual one for tests.

The group state machine only keeps deadlines (ms); the coordinator arms one
timer per group at the earliest of them. A `Scheduler` runs a callback after
a delay and hands back something with `cancel()`. `LoopScheduler` uses the
running asyncio loop; `ManualScheduler` is also a clock (`now()`) that only
moves when a test calls `advance(ms)`, firing due callbacks in deadline order,
so tests cover 45 s session timeouts without sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol

__all__ = ["LoopScheduler", "ManualScheduler", "Scheduler", "TimerHandle"]


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class LoopScheduler:
    """Callbacks on the running asyncio loop (call it from inside the loop)."""

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, callback)


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """A fake clock and scheduler: time moves only through `advance`."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._queue: list[tuple[int, int, _ManualHandle, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        handle = _ManualHandle()
        heapq.heappush(self._queue, (self._now + max(delay_ms, 0), next(self._seq), handle, callback))
        return handle

    def advance(self, ms: int) -> None:
        """Move the clock by `ms`, running every callback due by then, earliest first."""
        target = self._now + ms
        while self._queue and self._queue[0][0] <= target:
            due, _, handle, callback = heapq.heappop(self._queue)
            if handle.cancelled:
                continue
            self._now = max(self._now, due)
            callback()
        self._now = target

    def pending(self) -> int:
        """How many live timers are armed."""
        return sum(1 for *_, h, _cb in self._queue if not h.cancelled)
