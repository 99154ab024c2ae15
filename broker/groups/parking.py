"""Parked JoinGroup and SyncGroup requests: a future per (group id, member id) that a later effect resolves.

A classic group answers a JoinGroup when the last member rejoins or a timer fires, and a SyncGroup
when the leader's assignment is durable; until then the request waits here. One request per
member: a newer one of the same member answers the older with a "superseded" result (its client
retried). A future is removed when it is resolved or when its request goes away.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

__all__ = ["ParkedRequests"]

#: A parked request's answer type (JoinGroupResult or SyncGroupResult).
R = TypeVar("R")

Key = tuple[str, str]  # (group id, member id)


class ParkedRequests(Generic[R]):
    """Futures of parked requests of one API, keyed by (group id, member id)."""

    def __init__(self) -> None:
        self._waiters: dict[Key, asyncio.Future[R]] = {}

    def park(self, key: Key, superseded: R) -> asyncio.Future[R]:
        """A future for the caller; an older request of the same member parked
        under the same key is answered with `superseded` (its client retried)."""
        old = self._waiters.get(key)
        if old is not None and not old.done():
            old.set_result(superseded)
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiters[key] = future
        return future

    async def wait(self, key: Key, future: asyncio.Future[R]) -> R:
        try:
            return await future
        finally:
            if self._waiters.get(key) is future:
                del self._waiters[key]

    def resolve(self, key: Key, result: R) -> None:
        future = self._waiters.pop(key, None)
        if future is not None and not future.done():
            future.set_result(result)

    def keys_of(self, group_id: str) -> list[Key]:
        """Everything still parked under `group_id` (superseded or orphaned requests included)."""
        return [k for k in self._waiters if k[0] == group_id]
