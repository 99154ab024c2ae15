"""Topic configs on the broker: validation, DescribeConfigs, and the log's LogConfig.

A topic stores only its overrides (`{"retention.ms": "60000"}`, strings as
they came over the wire); its effective config is the broker's `log.*`
defaults with the overrides on top. Names, types, ranges, defaults and who
applies each key come from the one table, tinystream/config/topic_configs.py,
which the controller reads too: a key is accepted or refused the same way on
a standalone broker and under a controller. Keys no part of TinyStream
applies (`preallocate`, ...) are accepted and kept for Kafka tools' sake,
shown by DescribeConfigs when set, and documented there as not applied.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from tinystream.broker.storage.base import LogConfig
from tinystream.config.settings import BrokerSettings
from tinystream.config.topic_configs import (
    TOPIC_CONFIGS,
    AppliedBy,
    ConfigType,
    InvalidConfig,
    TopicConfigKey,
    as_text,
    broker_default,
    validate,
)

__all__ = [
    "TOPIC_CONFIGS",
    "ConfigSource",
    "ConfigType",
    "DescribedConfig",
    "InvalidConfig",
    "TopicConfigKey",
    "broker_default",
    "describe",
    "log_config",
    "validate",
]


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ config_source (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


def log_config(settings: BrokerSettings, overrides: Mapping[str, str]) -> LogConfig:
    """The effective LogConfig: broker defaults, then the topic's overrides."""
    values: dict[str, object] = {}
    for name in LogConfig.KAFKA_NAMES:
        key = TOPIC_CONFIGS[name]
        values[name] = key.parse(overrides[name]) if name in overrides else broker_default(settings, key)
    return LogConfig.from_topic_config(values)


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]  # (name, value, source), most specific first


def describe(settings: BrokerSettings, overrides: Mapping[str, str], *,
             dynamic: Mapping[str, ConfigSource] | None = None) -> list[DescribedConfig]:
    """Every applied topic config, and every override, with its effective value and where it came from.

    `dynamic`: the broker keys set by a dynamic broker config, and at which level (control/broker_configs.py).
    """
    explicitly_set = settings.model_fields_set
    dynamic = dynamic or {}
    out = []
    for name in sorted(TOPIC_CONFIGS):
        key = TOPIC_CONFIGS[name]
        if key.applied_by is AppliedBy.NOT_APPLIED and name not in overrides:
            continue
        default_value = as_text(broker_default(settings, key))
        broker_source = dynamic.get(key.broker_key) or (
            ConfigSource.STATIC_BROKER_CONFIG if key.broker_setting in explicitly_set else ConfigSource.DEFAULT_CONFIG
        )
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            value, source = overrides[name], ConfigSource.TOPIC_CONFIG
            synonyms.append((name, value, source))
        else:
            value, source = default_value, broker_source
        if key.broker_key:
            synonyms.append((key.broker_key, default_value, broker_source))
        out.append(DescribedConfig(name, value, source, key.type, key.doc, tuple(synonyms)))
    return out
