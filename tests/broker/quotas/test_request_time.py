"""request_percentage accounting (KIP-124), pure: times are numbers passed in, no sockets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinystream.broker.quotas.book import QuotaBook
from tinystream.broker.quotas.entities import CLIENT_ID, REQUEST_PERCENTAGE, USER, Entity
from tinystream.broker.quotas.request_time import RequestTimeQuota, percent_of_thread


def quota(entity: Entity, percent: float, *, samples: int = 11, window_ms: int = 1000) -> RequestTimeQuota:
    q = RequestTimeQuota(samples=samples, window_ms=window_ms)
    q.use(QuotaBook().alter([(entity, [(REQUEST_PERCENTAGE, percent, False)])]))
    return q


def test_a_second_of_thread_time_is_one_hundred_percent():
    assert percent_of_thread(1.0) == 100.0
    assert percent_of_thread(0.002) == pytest.approx(0.2)


def test_within_the_quota_nothing_is_throttled():
    q = quota(Entity.of([(CLIENT_ID, "c")]), 10.0)  # 10 % of one thread: 100 ms per second
    for t in range(0, 20_000, 100):  # 5 ms every 100 ms = 5 %
        assert q.record("u", "c", 0.005, t) == 0


def test_over_the_quota_throttle_is_kafkas_formula_capped_at_one_window():
    q = quota(Entity.of([(CLIENT_ID, "c")]), 10.0)
    # 1.5 s of handler time on a fresh rate: 150 percent-seconds over the 10 s minimum window = 15 %;
    # (15 - 10) / 10 * 10 s = 5 s, capped at one window (Kafka's ClientRequestQuotaManager.maxThrottleTimeMs).
    assert q.record("u", "c", 1.5, 0) == 1000
    q2 = quota(Entity.of([(CLIENT_ID, "c")]), 10.0)
    assert q2.record("u", "c", 1.05, 0) == 500  # 10.5 %: (10.5 - 10) / 10 * 10 s


def test_two_hundred_percent_is_two_threads():
    q = quota(Entity.of([(USER, "alice")]), 200.0)
    for t in range(0, 12_000, 10):  # busy the whole time on ~1.9 threads
        throttled = q.record("alice", "any", 0.019, t)
    assert throttled == 0
    assert q.record("alice", "any", 2.0, 12_000) > 0


def test_record_only_counts_for_the_next_requests_but_throttles_none_now():
    q = quota(Entity.of([(CLIENT_ID, "c")]), 1.0)
    q.record_only("u", "c", 0.5, 0)  # 50 percent-seconds: 5 % over 10 s, already over
    assert q.record("u", "c", 0.0, 1) > 0


def test_the_byte_rates_entity_resolution_a_user_quota_is_shared_by_its_clients():
    q = quota(Entity.of([(USER, "alice")]), 10.0)
    assert q.applies("alice", "one") and q.applies("alice", "two")
    assert not q.applies("bob", "one")
    assert q.record("alice", "one", 0.9, 0) == 0  # 9 %
    assert q.record("alice", "two", 0.2, 1) > 0  # 11 %: the user's, across both client ids
    assert q.record("bob", "one", 5.0, 2) == 0  # no quota: not even tracked
    assert q.manager.tracked == 1


def test_a_more_specific_entity_wins():
    book = QuotaBook().alter([(Entity.of([(USER, None)]), [(REQUEST_PERCENTAGE, 1.0, False)]),
                              (Entity.of([(USER, "vip")]), [(REQUEST_PERCENTAGE, 1000.0, False)])])
    q = RequestTimeQuota()
    q.use(book)
    assert q.record("vip", "c", 5.0, 0) == 0  # 50 % of 1000 %
    assert q.record("someone", "c", 5.0, 0) == 1000  # the default user's 1 %


@given(st.lists(st.tuples(st.integers(0, 200), st.floats(0, 0.05)), min_size=1, max_size=200),
       st.floats(0.5, 500))
def test_throttle_is_never_negative_nor_past_one_window(steps, percent):
    q = quota(Entity.of([(CLIENT_ID, "c")]), percent, samples=5, window_ms=500)
    now = 0
    for gap, busy in steps:
        now += gap
        assert 0 <= q.record("u", "c", busy, now) <= 500


@given(st.floats(0.001, 0.5), st.floats(1, 100))
def test_waiting_the_throttle_brings_the_rate_back_within_the_quota(busy, percent):
    """A client that waits out an uncapped throttle is within its quota again (Kafka's promise: the throttle
    is the time for the rate to drop back to the quota); a capped one is throttled less than before."""
    q = quota(Entity.of([(CLIENT_ID, "c")]), percent)
    throttle = q.record("u", "c", busy * percent / 10, 0)
    after = q.record("u", "c", 0.0, throttle + 1)
    if throttle < 1000:
        assert after == 0
    else:
        assert after <= throttle
