"""Replication throttles, pure: the throttled-replicas format, the rate, and the hold-back decision (KIP-73)."""

from __future__ import annotations

import pytest

from tinystream.broker.broker_configs.dynamic import Change, DynamicLayers, Level, Op, Refused
from tinystream.broker.replication.throttle import (
    UNLIMITED,
    ReplicationQuota,
    ReplicationThrottles,
    Side,
    SimpleRate,
    listed_partitions,
)
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.config.settings import BrokerSettings
from tinystream.config.topic_configs import InvalidConfig, parse, throttled_replicas

LEADER = "leader.replication.throttled.replicas"
FOLLOWER = "follower.replication.throttled.replicas"


@pytest.mark.parametrize(("text", "expected"), [
    ("*", None),
    (" * ", None),
    ("", ()),
    ("0:1", ((0, 1),)),
    ("0:1,0:2, 1 : 3", ((0, 1), (0, 2), (1, 3))),
])
def test_the_kafka_format_parses(text, expected):
    assert throttled_replicas(text) == expected
    assert parse(LEADER, text) == text and parse(FOLLOWER, text) == text


@pytest.mark.parametrize("text", ["0", "0:", ":1", "a:1", "0:1,", "0:1;1:2", "*,0:1", "-1:2", "0:1:2"])
def test_anything_else_is_refused_with_kafkas_message(text):
    with pytest.raises(InvalidConfig, match=r"follower.replication.throttled.replicas: .* must be the literal '\*' "
                                            r"or a list of replicas in the following format: "
                                            r"\[partitionId\]:\[brokerId\]"):
        parse(FOLLOWER, text)


def test_a_broker_sees_only_the_partitions_listed_for_it():
    assert listed_partitions("0:1,1:2,2:1", 1) == frozenset({0, 2})
    assert listed_partitions("0:1,1:2", 3) == frozenset()
    assert listed_partitions("*", 3) is None
    assert listed_partitions("garbage", 1) == frozenset()


def test_simple_rate_averages_a_fresh_burst_over_the_time_elapsed_not_the_full_span():
    rate = SimpleRate(samples=11, window_ms=1000)
    rate.record(1_000_000, now_ms=0)
    assert rate.rate(0) == 1_000_000  # at least one window: 1 MB over 1 s
    assert rate.rate(2000) == 500_000  # 1 MB over the 2 s since the burst began
    rate.record(1_000_000, now_ms=2000)
    assert rate.rate(4000) == 500_000
    assert rate.rate(30_000) == 0  # every sample expired


def _quota(configs: dict[str, dict[str, str]], *, limit: int, broker_id: int = 1,
           side: Side = Side.LEADER) -> ReplicationQuota:
    quota = ReplicationQuota(side, broker_id=broker_id, topic_configs=configs.get)
    quota.limit = limit
    return quota


def test_only_a_listed_out_of_sync_replica_is_held_back_and_only_over_the_limit():
    tp, other = TopicPartition("t", 0), TopicPartition("t", 1)
    quota = _quota({"t": {LEADER: "0:1,1:2"}}, limit=1000)
    assert quota.throttled(tp) and not quota.throttled(other) and not quota.throttled(TopicPartition("u", 0))
    assert not quota.should_throttle(tp, in_sync=False, now_ms=0)  # nothing recorded: under the limit
    quota.record(5000, now_ms=0)
    assert quota.exceeded(0)
    assert quota.should_throttle(tp, in_sync=False, now_ms=0)
    assert not quota.should_throttle(tp, in_sync=True, now_ms=0)  # the ISR is never throttled
    assert not quota.should_throttle(other, in_sync=False, now_ms=0)  # listed for broker 2, not us
    assert quota.held_back == 1 and quota.recorded_bytes == 5000
    assert not quota.should_throttle(tp, in_sync=False, now_ms=5000)  # 5000 B over 5 s: back at the limit


def test_the_sides_read_their_own_lists_and_the_default_rate_holds_nothing_back():
    tp = TopicPartition("t", 0)
    configs = {"t": {FOLLOWER: "*"}}
    assert _quota(configs, limit=1, side=Side.FOLLOWER).throttled(tp)
    assert not _quota(configs, limit=1, side=Side.LEADER).throttled(tp)
    unlimited = _quota(configs, limit=UNLIMITED, side=Side.FOLLOWER)
    unlimited.record(10**12, now_ms=0)
    assert not unlimited.should_throttle(tp, in_sync=False, now_ms=0)


def test_the_rates_are_dynamic_broker_configs_at_both_levels():
    layers = DynamicLayers().alter(Level.DEFAULT, [Change(Op.SET, "leader.replication.throttled.rate", "1000000")])
    layers = layers.alter(Level.BROKER, [Change(Op.SET, "follower.replication.throttled.rate", "500000")])
    settings = layers.effective(BrokerSettings())
    throttles = ReplicationThrottles.for_broker(settings, {}.get)
    assert (throttles.leader.limit, throttles.follower.limit) == (1_000_000, 500_000)
    assert ReplicationThrottles.for_broker(BrokerSettings(), {}.get).leader.limit == UNLIMITED
    with pytest.raises(Refused) as refused:
        DynamicLayers().alter(Level.BROKER, [Change(Op.SET, "leader.replication.throttled.rate", "-1")]).effective(
            BrokerSettings())
    assert refused.value.invalid_config and "leader.replication.throttled.rate" in str(refused.value)
    with pytest.raises(Refused):  # no move between log dirs here: its throttle stays refused
        DynamicLayers().alter(Level.BROKER, [Change(Op.SET, "replica.alter.log.dirs.io.max.bytes.per.second", "1")])
