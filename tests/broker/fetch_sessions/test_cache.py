"""FetchSessionCache: room, ids, and Kafka's eviction order (KIP-227), with time passed in."""

from __future__ import annotations

import itertools

import pytest

from tinystream.broker.fetch_sessions.cache import (
    INVALID_SESSION_ID,
    MAX_EPOCH,
    CachedPartition,
    FetchSessionCache,
    PartitionRequest,
    next_epoch,
)
from tinystream.broker.storage.topic_partition import TopicPartition

EVICT = 1000  # eviction_ms in these tests


def parts(n: int, topic: str = "t") -> list[tuple[TopicPartition, CachedPartition]]:
    return [(TopicPartition(topic, i), CachedPartition(PartitionRequest(0, 1024))) for i in range(n)]


def cache(slots: int) -> FetchSessionCache:
    ids = itertools.count(1)
    return FetchSessionCache(max_slots=slots, eviction_ms=EVICT, new_id=lambda: next(ids))


def test_epochs_wrap_to_one_and_never_reach_zero():
    assert [next_epoch(0), next_epoch(1), next_epoch(MAX_EPOCH), next_epoch(-1)] == [1, 2, 1, -1]


def test_a_new_session_expects_epoch_one():
    c = cache(2)
    sid = c.maybe_create(now_ms=0, privileged=False, partitions=parts(3))
    session = c.get(sid)
    assert sid != INVALID_SESSION_ID and session is not None
    assert session.epoch == 1 and len(session.partitions) == 3 and c.partitions == 3


def test_zero_slots_never_create_a_session():
    c = cache(0)
    assert c.maybe_create(now_ms=0, privileged=True, partitions=parts(1000)) == INVALID_SESSION_ID
    assert len(c) == 0


def test_negative_slots_are_refused():
    with pytest.raises(ValueError, match="cache.slots"):
        FetchSessionCache(max_slots=-1)


def test_ids_skip_zero_and_ids_in_use():
    ids = iter([0, 7, 7, 9])
    c = FetchSessionCache(max_slots=3, new_id=lambda: next(ids))
    assert c.maybe_create(now_ms=0, privileged=False, partitions=parts(1)) == 7
    assert c.maybe_create(now_ms=0, privileged=False, partitions=parts(1)) == 9


def test_full_cache_with_young_sessions_refuses_a_consumer():
    c = cache(1)
    c.maybe_create(now_ms=0, privileged=False, partitions=parts(1))
    # Younger than eviction_ms: not evictable, even by a bigger consumer session.
    assert c.maybe_create(now_ms=10, privileged=False, partitions=parts(50)) == INVALID_SESSION_ID


def test_stale_least_recently_used_session_goes_first():
    c = cache(2)
    a = c.maybe_create(now_ms=0, privileged=True, partitions=parts(100))
    b = c.maybe_create(now_ms=100, privileged=False, partitions=parts(5))
    session_b = c.get(b)
    assert session_b is not None
    c.touch(session_b, 900)
    # At 1500 `a` is unused for 1500 ms > eviction_ms: it goes although it is privileged and bigger.
    new = c.maybe_create(now_ms=1500, privileged=False, partitions=parts(1))
    assert new != INVALID_SESSION_ID and c.get(a) is None and c.get(b) is not None
    assert c.evictions == 1


def test_old_but_used_sessions_go_by_value_smaller_first():
    c = cache(2)
    small = c.maybe_create(now_ms=0, privileged=False, partitions=parts(2))
    big = c.maybe_create(now_ms=0, privileged=False, partitions=parts(20))
    for sid in (small, big):
        s = c.get(sid)
        assert s is not None
        c.touch(s, 1500)  # used recently, but created more than eviction_ms ago: evictable
    # A newcomer must be worth more than the cheapest evictable session (2 partitions).
    assert c.maybe_create(now_ms=1600, privileged=False, partitions=parts(2)) == INVALID_SESSION_ID
    new = c.maybe_create(now_ms=1600, privileged=False, partitions=parts(3))
    assert new != INVALID_SESSION_ID and c.get(small) is None and c.get(big) is not None


def test_a_follower_evicts_a_young_consumer_session():
    c = cache(1)
    consumer = c.maybe_create(now_ms=0, privileged=False, partitions=parts(500))
    follower = c.maybe_create(now_ms=10, privileged=True, partitions=parts(1))
    assert follower != INVALID_SESSION_ID and c.get(consumer) is None


def test_a_consumer_never_evicts_a_follower_session():
    c = cache(1)
    follower = c.maybe_create(now_ms=0, privileged=True, partitions=parts(1))
    s = c.get(follower)
    assert s is not None
    c.touch(s, 1900)
    assert c.maybe_create(now_ms=2000, privileged=False, partitions=parts(900)) == INVALID_SESSION_ID


def test_a_young_follower_session_is_safe_from_another_follower():
    c = cache(1)
    c.maybe_create(now_ms=0, privileged=True, partitions=parts(1))
    assert c.maybe_create(now_ms=10, privileged=True, partitions=parts(99)) == INVALID_SESSION_ID
