"""Dynamic broker configs: the keys that change live, the two layers, and validation (pure).

Kafka keeps dynamic broker configs at two levels (DynamicBrokerConfig): one
broker's (resource name "1") over the cluster default (resource name ""),
both over server.properties; DescribeConfigs names the level a value came
from (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG).

Here a key is dynamic only when the broker reads it at use time: the `log.*`
defaults behind topic configs (and message.max.bytes, min.insync.replicas),
which the topic manager turns into every open log's LogConfig again when they
change, max.connections / max.connections.per.ip, which admission checks
at each new connection, and the replication throttles' rates
(replication/throttle.py), read at each follower fetch. Kafka too lets each of these change live. Any other
broker key is refused with INVALID_REQUEST rather than accepted and ignored.

    layers = DynamicLayers()
    layers = layers.alter(Level.BROKER, [Change(SET, "log.retention.ms", "60000")])   # raises Refused
    settings = layers.effective(static)    # a BrokerSettings with the layers on top, validated
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from tinystream.config.settings import BrokerSettings
from tinystream.config.topic_configs import TOPIC_CONFIGS, AppliedBy

#: Kafka key -> BrokerSettings attribute, for every key that changes live: the topic defaults every
#: LogConfig is made from, and the connection limits admission reads at each new connection (Kafka
#: changes both live too: DynamicLogConfig, DynamicListenerConfig / ConnectionQuotas).
DYNAMIC_KEYS: Mapping[str, str] = MappingProxyType({
    **{key.broker_key: key.broker_setting
       for key in TOPIC_CONFIGS.values()
       if key.applied_by is AppliedBy.LOG and key.broker_setting and key.broker_key},
    "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    # Replication throttles (KIP-73): the replica manager and the fetcher read them at each fetch.
    "leader.replication.throttled.rate": "leader_replication_throttled_rate",
    "follower.replication.throttled.rate": "follower_replication_throttled_rate",
})

#: Kafka's throttle of moves between log dirs of one broker: there is no such move here, so never accepted.
THROTTLE_KEYS = frozenset({"replica.alter.log.dirs.io.max.bytes.per.second"})


class Level(enum.Enum):
    BROKER = "broker"  # this broker's own (resource name = its id): wins
    DEFAULT = "default"  # the cluster default (resource name "")


class Op(enum.IntEnum):
    """IncrementalAlterConfigs' config_operation (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class Change:
    op: int
    key: str
    value: str | None = None


class Refused(ValueError):
    """A change Kafka would refuse; `invalid_config` tells INVALID_CONFIG from INVALID_REQUEST."""

    def __init__(self, message: str, *, invalid_config: bool) -> None:
        super().__init__(message)
        self.invalid_config = invalid_config


def _frozen(values: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True, slots=True)
class DynamicLayers:
    """The stored values (text, as they came over the wire), per level."""

    default: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    broker: Mapping[str, str] = field(default_factory=lambda: _frozen({}))

    def layer(self, level: Level) -> Mapping[str, str]:
        return self.broker if level is Level.BROKER else self.default

    def level_of(self, key: str) -> Level | None:
        """Where `key`'s value comes from, if a layer sets it."""
        if key in self.broker:
            return Level.BROKER
        if key in self.default:
            return Level.DEFAULT
        return None

    def alter(self, level: Level, changes: Iterable[Change]) -> DynamicLayers:
        """The layers after `changes` to one level; raises Refused for the first change Kafka would refuse."""
        changes = list(changes)
        keys = [c.key for c in changes]
        if len(keys) != len(set(keys)):
            raise Refused("a config is named twice", invalid_config=False)
        values = dict(self.layer(level))
        for change in changes:
            if change.op == Op.DELETE:
                values.pop(change.key, None)  # deleting what is not set succeeds, as in Kafka
            elif change.op == Op.SET:
                _check_settable(change)
                values[change.key] = change.value  # type: ignore[assignment]
            elif change.op in (Op.APPEND, Op.SUBTRACT):
                raise Refused(f"{change.key}: APPEND and SUBTRACT do not apply to broker configs here; use SET",
                              invalid_config=False)
            else:
                raise Refused(f"unknown config operation {change.op}", invalid_config=False)
        if level is Level.BROKER:
            return DynamicLayers(default=self.default, broker=_frozen(values))
        return DynamicLayers(default=_frozen(values), broker=self.broker)

    def effective(self, static: BrokerSettings) -> BrokerSettings:
        """`static` with the default layer, then this broker's, on top; a bad value raises Refused.

        Both the default alone and default + broker are validated: deleting the broker's value later
        must not uncover a default that was never checked against this broker's static settings.
        """
        if not self.default and not self.broker:
            return static
        _validated(static, self.default)
        merged = _validated(static, {**self.default, **self.broker})
        update = {DYNAMIC_KEYS[key]: getattr(merged, DYNAMIC_KEYS[key]) for key in {*self.default, *self.broker}}
        return static.model_copy(update=update)

    def to_json(self) -> dict[str, Any]:
        return {"default": dict(self.default), "broker": dict(self.broker)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DynamicLayers:
        layers = {}
        for name in ("default", "broker"):
            values = data.get(name, {})
            if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                       for k, v in values.items()):
                raise ValueError(f"{name!r} must map config names to strings")
            unknown = set(values) - set(DYNAMIC_KEYS)
            if unknown:
                raise ValueError(f"{sorted(unknown)} are not dynamic broker configs")
            layers[name] = _frozen(values)
        return cls(**layers)


def _check_settable(change: Change) -> None:
    if change.value is None:
        raise Refused(f"{change.key}: SET needs a value", invalid_config=True)
    if change.key in DYNAMIC_KEYS:
        return
    if change.key in THROTTLE_KEYS:
        raise Refused(f"{change.key}: TinyStream moves no replica between log dirs, so nothing applies it",
                      invalid_config=False)
    if BrokerSettings.accepts(change.key):
        raise Refused(f"{change.key} cannot change while the broker runs; set it at start-up (dynamic broker "
                      f"configs: {', '.join(sorted(DYNAMIC_KEYS))})", invalid_config=False)
    raise Refused(f"unknown broker config {change.key!r}", invalid_config=True)


def _validated(static: BrokerSettings, values: Mapping[str, str]) -> BrokerSettings:
    if not values:
        return static
    try:
        return type(static).model_validate({**static.model_dump(by_alias=True), **values})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise Refused(f"invalid broker config value: {problems}", invalid_config=True) from None
