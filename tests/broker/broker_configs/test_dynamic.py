"""Dynamic broker config layers: which keys change live, the two levels, validation (pure)."""

from __future__ import annotations

import pytest

from tinystream.broker.broker_configs.dynamic import DYNAMIC_KEYS, Change, DynamicLayers, Level, Op, Refused
from tinystream.config.settings import BrokerSettings


def test_the_dynamic_keys_are_the_log_defaults_topics_read_and_the_connection_limits():
    assert {"log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms", "message.max.bytes",
            "log.cleanup.policy", "min.insync.replicas", "max.connections", "max.connections.per.ip"} <= set(
        DYNAMIC_KEYS)
    assert not {"num.partitions", "socket.request.max.bytes", "broker.id", "listeners", "log.dirs",
                "listener.name.client.max.connections"} & set(DYNAMIC_KEYS)
    assert all(attr in BrokerSettings.model_fields for attr in DYNAMIC_KEYS.values())


def test_the_broker_level_wins_over_the_default_which_wins_over_static():
    static = BrokerSettings(**{"log.retention.ms": 1000, "message.max.bytes": 500})
    layers = DynamicLayers().alter(Level.DEFAULT, [Change(Op.SET, "log.retention.ms", "2000"),
                                                   Change(Op.SET, "message.max.bytes", "600")])
    layers = layers.alter(Level.BROKER, [Change(Op.SET, "log.retention.ms", "3000")])
    effective = layers.effective(static)
    assert (effective.log_retention_ms, effective.message_max_bytes) == (3000, 600)
    assert (layers.level_of("log.retention.ms"), layers.level_of("message.max.bytes")) == (Level.BROKER, Level.DEFAULT)
    assert layers.level_of("log.roll.ms") is None
    back = layers.alter(Level.BROKER, [Change(Op.DELETE, "log.retention.ms")]).effective(static)
    assert back.log_retention_ms == 2000
    assert DynamicLayers().effective(static) is static


@pytest.mark.parametrize(("change", "invalid_config"), [
    (Change(Op.SET, "log.retention.ms", "soon"), True),
    (Change(Op.SET, "log.retention.ms", "-2"), True),
    (Change(Op.SET, "log.cleanup.policy", "forever"), True),
    (Change(Op.SET, "log.retention.ms", None), True),
    (Change(Op.SET, "what.is.this", "1"), True),
    (Change(Op.SET, "num.partitions", "2"), False),
    (Change(Op.SET, "follower.replication.throttled.rate", "-1"), True),  # a rate is >= 0
    (Change(Op.SET, "replica.alter.log.dirs.io.max.bytes.per.second", "1"), False),  # no move between log dirs
    (Change(Op.APPEND, "log.cleanup.policy", "compact"), False),
    (Change(9, "log.retention.ms", "1"), False),
])
def test_refusals_say_which_kafka_error(change, invalid_config):
    with pytest.raises(Refused) as refused:
        DynamicLayers().alter(Level.BROKER, [change]).effective(BrokerSettings())
    assert refused.value.invalid_config is invalid_config


def test_a_default_that_this_broker_refuses_is_refused_even_under_a_broker_value():
    layers = DynamicLayers().alter(Level.BROKER, [Change(Op.SET, "log.segment.bytes", "4096")])
    with pytest.raises(Refused):
        layers.alter(Level.DEFAULT, [Change(Op.SET, "log.segment.bytes", "1")]).effective(BrokerSettings())


def test_deleting_what_is_not_set_succeeds_and_json_round_trips():
    layers = DynamicLayers().alter(Level.DEFAULT, [Change(Op.DELETE, "leader.replication.throttled.rate")])
    assert (dict(layers.default), dict(layers.broker)) == ({}, {})
    layers = layers.alter(Level.DEFAULT, [Change(Op.SET, "log.roll.ms", "5000")])
    assert DynamicLayers.from_json(layers.to_json()).to_json() == {"default": {"log.roll.ms": "5000"}, "broker": {}}
    with pytest.raises(ValueError, match="not dynamic"):
        DynamicLayers.from_json({"broker": {"num.partitions": "3"}})
    with pytest.raises(ValueError):
        DynamicLayers.from_json({"broker": {"log.roll.ms": 5}})
