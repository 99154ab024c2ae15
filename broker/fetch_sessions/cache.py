"""The fetch sessions one broker keeps (Kafka's FetchSessionCache, KIP-227).

A session is a client's set of partitions with the fetch parameters it last
sent and the answer fields it last saw (high watermark, last stable offset,
log start offset); the broker compares new reads against those to decide
what an incremental answer must carry.

Room is bounded by `max.incremental.fetch.session.cache.slots` (Kafka's
default, 1000; 0 turns sessions off: every fetch is a full fetch). When the
cache is full a new session takes a slot only by Kafka's rules
(FetchSessionCache.tryEvict):

1. a session unused for `eviction_ms` (Kafka's 120 s) goes first, least
   recently used first;
2. otherwise the least valuable *evictable* session goes if the newcomer is
   worth at least as much. Value is (privileged, partitions, id): follower
   sessions beat consumer sessions, more partitions beat fewer. A session is
   evictable by anyone once it is older than `eviction_ms`; a follower's
   newcomer may also evict any consumer session, however young.

Kafka keeps three sorted maps for this; with at most a few thousand slots a
scan at session creation (the only time eviction runs) is simpler and costs
microseconds, so the cache is a dict.

Time is passed in (`now_ms`), session ids come from an injected source, and
the module does no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from uuid import UUID

from tinystream.broker.storage.topic_partition import TopicPartition

#: Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS.
EVICTION_MS = 120_000
DEFAULT_SLOTS = 1000
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_HIGH_WATERMARK = -1  # a cached value no real answer has: the next answer must carry the partition
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: 0 -> 1 -> ... -> 2^31-1 -> 1 (never back to 0 or -1)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    """One partition's fetch parameters as the client sent them (kio's field names)."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start (Fetch v5+)
    topic_id: UUID | None = None  # Fetch v13+ names topics by id (KIP-516)


@dataclass(slots=True)
class CachedPartition:
    """A session's partition: the last request parameters and the last answer fields sent."""

    request: PartitionRequest
    high_watermark: int = INVALID_HIGH_WATERMARK
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True, eq=False)
class FetchSession:
    """One client's session. `epoch` is the epoch its next incremental request must carry."""

    id: int
    privileged: bool  # a follower broker's session (Kafka: "privileged")
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    owner: str = ""  # the principal that opened it: another may not use it
    epoch: int = 1
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)  # in fetch order

    def value(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: what losing this session costs, for the eviction order."""
        return (self.privileged, len(self.partitions), self.id)


def random_session_id() -> int:
    return random.randint(1, 2**31 - 1)


class FetchSessionCache:
    def __init__(
        self,
        *,
        max_slots: int = DEFAULT_SLOTS,
        eviction_ms: int = EVICTION_MS,
        new_id: Callable[[], int] = random_session_id,
    ) -> None:
        if max_slots < 0:
            raise ValueError(f"max.incremental.fetch.session.cache.slots must be >= 0, not {max_slots}")
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._new_id = new_id
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def partitions(self) -> int:
        """Partitions held across all sessions (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(s.partitions) for s in self._sessions.values())

    def sessions(self) -> list[FetchSession]:
        return list(self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms

    def maybe_create(
        self,
        *,
        now_ms: int,
        privileged: bool,
        partitions: Iterable[tuple[TopicPartition, CachedPartition]],
        uses_topic_ids: bool = False,
        owner: str = "",
    ) -> int:
        """A new session's id, or INVALID_SESSION_ID (0) when there is no room and nothing to evict."""
        parts = dict(partitions)
        if len(self._sessions) >= self.max_slots and not self._evict_for(privileged, len(parts), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = self._new_id()
        self._sessions[session_id] = FetchSession(
            id=session_id, privileged=privileged, uses_topic_ids=uses_topic_ids, created_ms=now_ms,
            last_used_ms=now_ms, owner=owner, epoch=next_epoch(INITIAL_EPOCH), partitions=parts,
        )
        return session_id

    def _evict_for(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self._sessions:
            return False  # no slots at all (max_slots 0)
        stale = min(self._sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - stale.last_used_ms > self.eviction_ms:
            return self._evict(stale)
        evictable = [s for s in self._sessions.values()
                     if now_ms - s.created_ms > self.eviction_ms or (privileged and not s.privileged)]
        if not evictable:
            return False
        cheapest = min(evictable, key=FetchSession.value)
        # The newcomer's id is 0, so it must be worth strictly more on (privileged, size), as in Kafka.
        if (privileged, size, 0) < cheapest.value():
            return False
        return self._evict(cheapest)

    def _evict(self, session: FetchSession) -> bool:
        del self._sessions[session.id]
        self.evictions += 1
        return True
