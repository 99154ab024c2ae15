"""A Fetch request's session fields -> what to read and what to answer (Kafka's FetchManager).

    manager = FetchSessionManager(FetchSessionCache(max_slots=1000))
    context = manager.new_context(session_id=0, epoch=0, partitions=[(tp, req), ...], forgotten=[],
                                  privileged=False, now_ms=now)
    if context.error: answer the error at the top level, session_id 0
    results = read(context.partitions)             # every partition of the session, in order
    answer = manager.answer(context, results, now_ms=now)
    respond(session_id=answer.session_id, partitions=answer.results)

The request's (session_id, epoch) pick one of four contexts (KIP-227):

| session_id | epoch | context |
|---|---|---|
| 0 | -1 | sessionless: a full fetch, no session (what clients sent before KIP-227) |
| 0 | 0 | full: read everything; the answer opens a session if the cache has room |
| n | 0 | full: close session n, then as above (a client restarting its session) |
| n | -1 | close session n; the fetch itself is sessionless |
| n | k>0 | incremental: session n must exist and expect epoch k (see below) |

An incremental request on an unknown session is FETCH_SESSION_ID_NOT_FOUND;
on a known one expecting another epoch, INVALID_FETCH_SESSION_EPOCH. Its
partitions are added to the session or update it; `forgotten` ones leave.

An incremental answer carries only partitions with news: records, an error,
a diverging epoch (`must_include`), or a high watermark, last stable offset
or log start offset different from the last one sent. Partitions that
returned records move to the back of the session's order, so the next read
serves the others first (Kafka does the same for fairness under max_bytes).

A session's epoch advances when its request is accepted; if another request
moved it while this one waited in a long poll, the answer is
INVALID_FETCH_SESSION_EPOCH (Kafka checks the same under the session's lock).
Sessions belong to the principal that opened them: another principal naming
the id is answered FETCH_SESSION_ID_NOT_FOUND, as if it did not exist.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_HIGH_WATERMARK,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    PartitionRequest,
    next_epoch,
)
from tinystream.broker.storage.topic_partition import TopicPartition


class ContextKind(enum.Enum):
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"
    ERROR = "error"


class FetchOutcome(Protocol):
    """What the read returned for one partition (replica_manager.FetchedPartition fits)."""

    @property
    def tp(self) -> TopicPartition: ...
    @property
    def error(self) -> ErrorCode: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def size(self) -> int: ...


Outcome = TypeVar("Outcome", bound=FetchOutcome)


Pair = tuple[TopicPartition, PartitionRequest]


class SessionPairs(Collection[Pair]):
    """A session's partitions as (tp, request) pairs, read when iterated: an incremental fetch that reads
    only its partitions with news (handlers/fetch_idle.py) never builds 10,000 pairs."""

    __slots__ = ("_cached",)

    def __init__(self, cached: Mapping[TopicPartition, CachedPartition]) -> None:
        self._cached = cached

    def __iter__(self) -> Iterator[Pair]:
        return ((tp, c.request) for tp, c in self._cached.items())

    def __len__(self) -> int:
        return len(self._cached)

    def __contains__(self, pair: object) -> bool:
        if not isinstance(pair, tuple) or len(pair) != 2:
            return False
        found = self._cached.get(pair[0])
        return found is not None and found.request == pair[1]


@dataclass(frozen=True, slots=True)
class FetchContext:
    kind: ContextKind
    partitions: Collection[Pair] = ()  # what to read, in order
    error: ErrorCode = ErrorCode.none
    session: FetchSession | None = None  # INCREMENTAL: the session served
    epoch: int = INITIAL_EPOCH  # INCREMENTAL: the session's epoch after this request
    privileged: bool = False
    uses_topic_ids: bool = False
    owner: str = ""


@dataclass(frozen=True, slots=True)
class FetchAnswer(Generic[Outcome]):
    session_id: int
    results: list[Outcome]  # the partitions the answer carries, in order
    error: ErrorCode = ErrorCode.none  # a top-level error found at answer time (the epoch moved)


class FetchSessionManager:
    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache
        self.requests: collections.Counter[ContextKind] = collections.Counter()  # Fetch requests by context (metrics)
        self.by_topic_id = 0  # of them, requests naming topics by id (Fetch v13+, KIP-516)

    def new_context(
        self,
        *,
        session_id: int,
        epoch: int,
        partitions: Iterable[tuple[TopicPartition, PartitionRequest]],
        forgotten: Iterable[TopicPartition] = (),
        privileged: bool = False,
        uses_topic_ids: bool = False,
        owner: str = "",
        now_ms: int,
    ) -> FetchContext:
        """Decide the request's context; an incremental one updates its session here (Kafka's newContext)."""
        context = self._context(session_id=session_id, epoch=epoch, partitions=partitions, forgotten=forgotten,
                                privileged=privileged, uses_topic_ids=uses_topic_ids, owner=owner, now_ms=now_ms)
        self.requests[context.kind] += 1
        self.by_topic_id += uses_topic_ids
        return context

    def _context(
        self,
        *,
        session_id: int,
        epoch: int,
        partitions: Iterable[tuple[TopicPartition, PartitionRequest]],
        forgotten: Iterable[TopicPartition],
        privileged: bool,
        uses_topic_ids: bool,
        owner: str,
        now_ms: int,
    ) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                existing = self.cache.get(session_id)
                if existing is not None and existing.owner == owner:
                    self.cache.remove(session_id)
            kind = ContextKind.SESSIONLESS if epoch == FINAL_EPOCH else ContextKind.FULL
            return FetchContext(kind, _unique(partitions), privileged=privileged, uses_topic_ids=uses_topic_ids,
                                owner=owner)
        if epoch < FINAL_EPOCH or session_id == INVALID_SESSION_ID:
            # An epoch below -1, or an incremental epoch with no session to apply it to.
            return FetchContext(ContextKind.ERROR, error=ErrorCode.invalid_fetch_session_epoch)
        session = self.cache.get(session_id)
        if session is None or session.owner != owner:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.fetch_session_topic_id_error)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp, request in partitions:
            cached = session.partitions.get(tp)
            if cached is None:
                session.partitions[tp] = CachedPartition(request)
            else:
                cached.request = request
        if not session.partitions:
            # Nothing left to fetch: the session closes and this fetch is sessionless (Kafka does the same).
            self.cache.remove(session.id)
            return FetchContext(ContextKind.SESSIONLESS, privileged=privileged, owner=owner)
        self.cache.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(ContextKind.INCREMENTAL, SessionPairs(session.partitions),
                            session=session, epoch=session.epoch, privileged=privileged,
                            uses_topic_ids=uses_topic_ids, owner=owner)

    def answer(
        self,
        context: FetchContext,
        results: Sequence[Outcome],
        *,
        must_include: Collection[TopicPartition] = (),
        now_ms: int,
    ) -> FetchAnswer[Outcome]:
        """The session id to answer and the partitions the answer carries; opens or updates the session."""
        if context.kind is ContextKind.ERROR:
            return FetchAnswer(INVALID_SESSION_ID, [], context.error)
        if context.kind is ContextKind.SESSIONLESS:
            return FetchAnswer(INVALID_SESSION_ID, list(results))
        if context.kind is ContextKind.FULL:
            requests = dict(context.partitions)
            cached = [(r.tp, _cached(requests[r.tp], r)) for r in results if r.tp in requests]
            session_id = self.cache.maybe_create(now_ms=now_ms, privileged=context.privileged, partitions=cached,
                                                 uses_topic_ids=context.uses_topic_ids, owner=context.owner)
            return FetchAnswer(session_id, list(results))
        session = context.session
        assert session is not None
        if session.epoch != context.epoch or self.cache.get(session.id) is not session:
            return FetchAnswer(INVALID_SESSION_ID, [], ErrorCode.invalid_fetch_session_epoch)
        carried: list[Outcome] = []
        for r in results:
            part = session.partitions.get(r.tp)
            if part is None:
                continue  # forgotten by a later request while this one waited
            if _must_answer(part, r) or r.tp in must_include:
                carried.append(r)
                if r.size:  # rotate: partitions that just got data go to the back
                    del session.partitions[r.tp]
                    session.partitions[r.tp] = part
        return FetchAnswer(session.id, carried)


def _unique(
    partitions: Iterable[tuple[TopicPartition, PartitionRequest]],
) -> tuple[tuple[TopicPartition, PartitionRequest], ...]:
    """A partition named twice is read once, with its last parameters (a session keys by partition)."""
    return tuple(dict(partitions).items())


def _cached(request: PartitionRequest, r: FetchOutcome) -> CachedPartition:
    if r.error != ErrorCode.none:
        return CachedPartition(request)  # an error clears what was sent: the next answer carries the partition
    return CachedPartition(request, r.high_watermark, r.last_stable_offset, r.log_start_offset)


def _must_answer(part: CachedPartition, r: FetchOutcome) -> bool:
    """Kafka's CachedPartition.maybeUpdateResponseData, updating what the session last sent."""
    must = r.size > 0
    if r.error != ErrorCode.none:
        part.high_watermark = INVALID_HIGH_WATERMARK  # once the error clears, the partition is sent again
        return True
    if part.high_watermark != r.high_watermark:
        part.high_watermark = r.high_watermark
        must = True
    if part.last_stable_offset != r.last_stable_offset:
        part.last_stable_offset = r.last_stable_offset
        must = True
    if part.log_start_offset != r.log_start_offset:
        part.log_start_offset = r.log_start_offset
        must = True
    return must
