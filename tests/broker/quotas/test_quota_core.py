"""The pure quota core: sampled rate, throttle time, resolution order, validation, bounded tracking.

Time is a number passed in (ms), so each case is exact and instant.
"""

from __future__ import annotations

import pytest

from tinystream.broker.quotas.book import QuotaBook
from tinystream.broker.quotas.entities import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    USER,
    Component,
    Entity,
    entity_error,
    filter_error,
    filter_matches,
    op_error,
)
from tinystream.broker.quotas.manager import ClientQuotaManager
from tinystream.broker.quotas.rate import SampledRate


def test_a_fresh_rate_is_averaged_over_ten_full_windows():
    rate = SampledRate(11, 1000)
    rate.record(10_000, now_ms=0)
    assert rate.window_size_ms(0) == 10_000  # Kafka's Rate.windowSize: at least samples - 1 windows
    assert rate.rate(0) == pytest.approx(1000.0)


def test_the_rate_forgets_samples_older_than_the_whole_window():
    rate = SampledRate(11, 1000)
    rate.record(50_000, now_ms=0)
    assert rate.rate(5_000) == pytest.approx(5000.0)  # 50 kB over 10 s
    assert rate.rate(12_001) == 0.0  # the sample started 12 s ago: past 11 windows


def test_a_steady_stream_measures_its_own_rate():
    rate = SampledRate(11, 1000)
    for t in range(0, 30_000, 100):  # 1 kB every 100 ms = 10 kB/s
        rate.record(1000, now_ms=t)
    assert rate.rate(29_999) == pytest.approx(10_000, rel=0.1)


def test_throttle_time_is_kafkas_formula_and_capped():
    rate = SampledRate(11, 1000)
    rate.record(20_000, now_ms=0)  # 2000 B/s over the 10 s minimum window
    # (rate - quota) / quota * window = (2000 - 1000) / 1000 * 10 s
    assert rate.throttle_ms(1000.0, now_ms=0, max_ms=11_000) == 10_000
    assert rate.throttle_ms(2000.0, now_ms=0, max_ms=11_000) == 0
    assert rate.throttle_ms(10.0, now_ms=0, max_ms=11_000) == 11_000


def test_waiting_the_throttle_brings_the_rate_back_to_the_quota():
    rate = SampledRate(11, 1000)
    for t in range(0, 11_000, 1000):
        rate.record(3000, now_ms=t)  # 3 kB/s against a 1 kB/s quota
    wait = rate.throttle_ms(1000.0, now_ms=10_999, max_ms=11_000)
    assert wait > 0
    assert rate.rate(10_999 + wait) <= 1000.0 * 1.2


BOOK = QuotaBook().alter([
    (Entity.of([(USER, "alice"), (CLIENT_ID, "app")]), [(PRODUCER_BYTE_RATE, 1.0, False)]),
    (Entity.of([(USER, "alice"), (CLIENT_ID, None)]), [(PRODUCER_BYTE_RATE, 2.0, False)]),
    (Entity.of([(USER, "alice")]), [(PRODUCER_BYTE_RATE, 3.0, False)]),
    (Entity.of([(USER, None), (CLIENT_ID, "app")]), [(PRODUCER_BYTE_RATE, 4.0, False)]),
    (Entity.of([(USER, None), (CLIENT_ID, None)]), [(PRODUCER_BYTE_RATE, 5.0, False)]),
    (Entity.of([(USER, None)]), [(PRODUCER_BYTE_RATE, 6.0, False)]),
    (Entity.of([(CLIENT_ID, "app")]), [(PRODUCER_BYTE_RATE, 7.0, False)]),
    (Entity.of([(CLIENT_ID, None)]), [(PRODUCER_BYTE_RATE, 8.0, False)]),
])


def _without(*limits: float) -> QuotaBook:
    return QuotaBook({e: v for e, v in BOOK.entries.items() if v[PRODUCER_BYTE_RATE] not in limits})


@pytest.mark.parametrize(("removed", "expected", "tags"), [
    ((), 1.0, ("alice", "app")),
    ((1.0,), 2.0, ("alice", "app")),
    ((1.0, 2.0), 3.0, ("alice", "")),
    ((1.0, 2.0, 3.0), 4.0, ("alice", "app")),
    ((1.0, 2.0, 3.0, 4.0), 5.0, ("alice", "app")),
    ((1.0, 2.0, 3.0, 4.0, 5.0), 6.0, ("alice", "")),
    ((1.0, 2.0, 3.0, 4.0, 5.0, 6.0), 7.0, ("", "app")),
    ((1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0), 8.0, ("", "app")),
])
def test_resolution_order_most_specific_wins(removed, expected, tags):
    found = _without(*removed).resolve("alice", "app", PRODUCER_BYTE_RATE)
    assert found is not None and (found.limit, found.tags) == (expected, tags)


def test_no_quota_and_other_keys_resolve_to_nothing():
    assert QuotaBook().resolve("alice", "app", PRODUCER_BYTE_RATE) is None
    assert BOOK.resolve("alice", "app", "consumer_byte_rate") is None
    assert _without(7.0, 8.0, 4.0, 5.0, 6.0).resolve("bob", "other", PRODUCER_BYTE_RATE) is None


def test_alter_removes_keys_and_empty_entities_and_round_trips_json():
    entity = Entity.of([(CLIENT_ID, "app")])
    book = QuotaBook().alter([(entity, [(PRODUCER_BYTE_RATE, 100.0, False), ("consumer_byte_rate", 50.0, False)])])
    book = book.alter([(entity, [(PRODUCER_BYTE_RATE, 0.0, True)])])
    assert dict(book.entries[entity]) == {"consumer_byte_rate": 50.0}
    assert QuotaBook.from_json(book.to_json()) == book
    assert QuotaBook.from_json(book.alter([(entity, [("consumer_byte_rate", 0.0, True)])]).to_json()).entries == {}
    with pytest.raises(ValueError):
        QuotaBook.from_json({"quotas": [{"entity": {"ip": "1.2.3.4"}, "values": {}}]})


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("producer_byte_rate", 1024.0, None),
    ("request_percentage", 12.5, None),
    ("request_percentage", 0.0, "must be greater than 0"),
    ("request_percentage", float("nan"), "must be greater than 0"),
    ("controller_mutation_rate", 0.5, None),
    ("controller_mutation_rate", -1.0, "must be greater than 0"),
    ("no_such_key", 1.0, "Invalid configuration key no_such_key"),
    ("producer_byte_rate", 0.0, "must be greater than 0"),
    ("producer_byte_rate", -5.0, "must be greater than 0"),
    ("consumer_byte_rate", 10.5, "is not an integer"),
    ("producer_byte_rate", 1e300, "too large"),
])
def test_op_validation_as_kafka(key, value, reason):
    found = op_error(key, value, False)
    assert (found is None) if reason is None else (found is not None and reason in found)


def test_entity_validation():
    assert entity_error([(USER, "a"), (CLIENT_ID, None)]) is None
    assert "empty" in entity_error([])
    assert "twice" in entity_error([(USER, "a"), (USER, "b")])
    assert "unknown" in entity_error([("topic", "t")])
    assert "ip" in entity_error([("ip", "1.2.3.4")])


def test_describe_filters_strict_and_not():
    both = Entity.of([(USER, "alice"), (CLIENT_ID, "app")])
    user_only = Entity.of([(USER, "alice")])
    default_client = Entity.of([(CLIENT_ID, None)])
    exact_alice = [Component(USER, 0, "alice")]
    assert filter_matches(both, exact_alice, strict=False) and filter_matches(user_only, exact_alice, strict=False)
    assert not filter_matches(both, exact_alice, strict=True) and filter_matches(user_only, exact_alice, strict=True)
    assert filter_matches(default_client, [Component(CLIENT_ID, 1, None)], strict=True)
    assert not filter_matches(default_client, [Component(CLIENT_ID, 2, None)], strict=True)
    assert filter_matches(default_client, [], strict=False) and not filter_matches(default_client, [], strict=True)
    assert filter_error([Component(USER, 0, None)]) is not None
    assert filter_error([Component(USER, 2, None), Component(USER, 1, None)]) is not None


def test_manager_throttles_only_the_entity_over_its_quota():
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE)
    manager.use(QuotaBook().alter([(Entity.of([(CLIENT_ID, "noisy")]), [(PRODUCER_BYTE_RATE, 1000.0, False)])]))
    assert manager.record("ANONYMOUS", "noisy", 5_000, 0) == 0  # 500 B/s over the 10 s window
    assert manager.record("ANONYMOUS", "noisy", 20_000, 100) > 0
    assert manager.record("ANONYMOUS", "quiet", 10**9, 100) == 0  # no quota: not even tracked
    assert manager.tracked == 1


def test_manager_bounds_and_expires_what_it_tracks():
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, max_entities=3, idle_expiry_ms=60_000)
    manager.use(QuotaBook().alter([(Entity.of([(CLIENT_ID, None)]), [(PRODUCER_BYTE_RATE, 1000.0, False)])]))
    for i in range(10):  # the default client-id quota: one rate per client id
        manager.record("ANONYMOUS", f"c{i}", 1, i)
    assert manager.tracked == 3
    manager.record("ANONYMOUS", "late", 1, 10 + 60_000)
    assert manager.tracked == 1  # the three idle for a minute are gone
