"""Bytes held against a bound, and who waits for them to drop below it (Kafka's MemoryPool, non-strict): pure.

Whoever finds the budget not spent may take any amount, so a request larger
than what is left is never starved; the bound may be overshot by one request
per taker. A waiter is told once (`budget_freed`) when the budget drops below
the bound, and registers again if it must wait on.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar


class Waiter(Protocol):
    def budget_freed(self) -> None:
        """The budget dropped below its bound: try again."""


W = TypeVar("W", bound=Waiter)


class ByteBudget(Generic[W]):
    """`limit` None: no bound (never spent)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: set[W] = set()

    def spent(self) -> bool:
        return self.limit is not None and self.used >= self.limit

    def take(self, size: int) -> None:
        self.used += size

    def must_wait(self, waiter: W) -> bool:
        """True (and `waiter` is told later) when the budget is spent now."""
        if not self.spent():
            return False
        self._waiting.add(waiter)
        return True

    def give_back(self, size: int) -> None:
        self.used -= size
        if self._waiting and not self.spent():
            waiting, self._waiting = self._waiting, set()
            for waiter in waiting:
                waiter.budget_freed()

    def forget(self, waiter: W) -> None:
        self._waiting.discard(waiter)
