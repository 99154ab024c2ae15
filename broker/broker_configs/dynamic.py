"""Dynamic broker configs: the two layers and their validation over this broker's static settings (pure).

Kafka keeps dynamic broker configs at two levels (DynamicBrokerConfig): one
broker's (resource name "1") over the cluster default (resource name ""),
both over server.properties; DescribeConfigs names the level a value came
from (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG).

Which keys are dynamic and how one change is checked is
`tinystream.config.broker_configs` (the controller checks with it too); this
module adds the layers and their merge over one broker's static settings.

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

from tinystream.config.broker_configs import (
    DYNAMIC_KEYS,
    THROTTLE_KEYS,
    Change,
    Op,
    Refused,
    fold,
    layer_problem,
    validated,
)
from tinystream.config.settings import BrokerSettings

__all__ = ["DYNAMIC_KEYS", "THROTTLE_KEYS", "Change", "DynamicLayers", "Level", "Op", "Refused"]


class Level(enum.Enum):
    BROKER = "broker"  # this broker's own (resource name = its id): wins
    DEFAULT = "default"  # the cluster default (resource name "")


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
        values = fold(self.layer(level), changes)
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
        validated(static, self.default)
        merged = validated(static, {**self.default, **self.broker})
        update = {DYNAMIC_KEYS[key]: getattr(merged, DYNAMIC_KEYS[key]) for key in {*self.default, *self.broker}}
        return static.model_copy(update=update)

    def to_json(self) -> dict[str, Any]:
        return {"default": dict(self.default), "broker": dict(self.broker)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DynamicLayers:
        layers = {}
        for name in ("default", "broker"):
            values = data.get(name, {})
            problem = layer_problem(values)
            if problem is not None:
                raise ValueError(f"{name!r} {problem}")
            layers[name] = _frozen(values)
        return cls(**layers)
