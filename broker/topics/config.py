"""Topic configs by their Kafka names: validation, broker defaults, LogConfig.

A topic stores only its overrides (`{"retention.ms": "60000"}`, strings as
they came over the wire); its effective config is the broker's `log.*`
defaults with the overrides on top. Each key is described once in
`TOPIC_CONFIGS`: its type and range (Kafka's TopicConfig validators), the
broker setting that gives its default (the "synonym" DescribeConfigs shows),
and one line of documentation.

Only keys the broker actually honours are accepted: those of
`storage.base.LogConfig`, plus `tinystream.value.schema`, which the produce
path reads (see `value_schema`) and the log never sees; anything else is
INVALID_CONFIG rather than a setting silently ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tinystream.broker.storage.base import LogConfig
from tinystream.broker.topics import value_schema
from tinystream.config.settings import BrokerSettings

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ config_type (Kafka's ConfigEntry.ConfigType)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ config_source (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class InvalidConfig(ValueError):
    """A config name or value Kafka would refuse (INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str  # Kafka topic config name
    type: ConfigType
    parse: Callable[[str], object]  # string -> the LogConfig value; raises InvalidConfig
    broker_setting: str  # BrokerSettings attribute holding the default
    broker_key: str  # its Kafka name (the synonym); "" when no broker setting backs it
    doc: str
    default: object = None  # the default when no broker setting backs it
    in_log: bool = True  # a LogConfig field; False for keys only the produce path reads


def _integer(low: int, high: int, *, none_at: int | None = None) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            value = int(text.strip())
        except (ValueError, AttributeError):
            raise InvalidConfig(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise InvalidConfig(f"{value} is outside [{low}, {high}]")
        return None if none_at is not None and value == none_at else value

    return parse


def _choice(*choices: str) -> Callable[[str], object]:
    def parse(text: str) -> object:
        if text not in choices:
            raise InvalidConfig(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _cleanup_policy(text: str) -> object:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise InvalidConfig(f"{text!r}: cleanup.policy is a list of delete and/or compact")
    return ",".join(dict.fromkeys(parts))


def _json_schema(text: str) -> object:
    try:
        value_schema.check_schema(text)
    except value_schema.InvalidSchema as exc:
        raise InvalidConfig(str(exc)) from None
    return text


def _boolean(text: str) -> object:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidConfig(f"{text!r} is not a boolean")
    return lowered == "true"


TOPIC_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey("cleanup.policy", ConfigType.LIST, _cleanup_policy, "log_cleanup_policy", "log.cleanup.policy",
                  "delete old segments, compact to the last value per key, or both"),
        ConfigKey("delete.retention.ms", ConfigType.LONG, _integer(0, _INT64_MAX), "log_cleaner_delete_retention_ms",
                  "log.cleaner.delete.retention.ms", "how long tombstones are kept in compacted topics"),
        ConfigKey("flush.messages", ConfigType.LONG, _integer(1, _INT64_MAX, none_at=_INT64_MAX),
                  "log_flush_interval_messages", "log.flush.interval.messages",
                  "fsync after this many messages (unset: leave it to the OS)"),
        ConfigKey("flush.ms", ConfigType.LONG, _integer(0, _INT64_MAX, none_at=_INT64_MAX), "log_flush_interval_ms",
                  "log.flush.interval.ms", "fsync at least this often (unset: leave it to the OS)"),
        ConfigKey("index.interval.bytes", ConfigType.INT, _integer(0, _INT32_MAX), "log_index_interval_bytes",
                  "log.index.interval.bytes", "bytes between offset index entries"),
        ConfigKey("max.message.bytes", ConfigType.INT, _integer(0, _INT32_MAX), "message_max_bytes",
                  "message.max.bytes", "largest record batch the topic accepts"),
        ConfigKey("message.timestamp.type", ConfigType.STRING, _choice("CreateTime", "LogAppendTime"),
                  "log_message_timestamp_type", "log.message.timestamp.type",
                  "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append"),
        ConfigKey("min.insync.replicas", ConfigType.INT, _integer(1, _INT32_MAX), "min_insync_replicas",
                  "min.insync.replicas", "in-sync replicas an acks=all produce needs"),
        ConfigKey("retention.bytes", ConfigType.LONG, _integer(-1, _INT64_MAX), "log_retention_bytes",
                  "log.retention.bytes", "size a partition may grow to before old segments go (-1: no limit)"),
        ConfigKey("retention.ms", ConfigType.LONG, _integer(-1, _INT64_MAX), "log_retention_ms", "log.retention.ms",
                  "age after which old segments go (-1: keep forever)"),
        ConfigKey("segment.bytes", ConfigType.INT, _integer(14, _INT32_MAX), "log_segment_bytes", "log.segment.bytes",
                  "segment file size before a new segment is rolled"),
        ConfigKey("segment.ms", ConfigType.LONG, _integer(1, _INT64_MAX), "log_roll_ms", "log.roll.ms",
                  "age after which the active segment is rolled"),
        ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, _boolean, "", "unclean.leader.election.enable",
                  "allow a replica outside the ISR to become leader (may lose data)", default=False),
        ConfigKey(value_schema.SCHEMA_CONFIG, ConfigType.STRING, _json_schema, "", "",
                  "JSON Schema every record value must match (the leader rejects the batch otherwise)",
                  in_log=False),
    )
}


def validate(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Check every name and value; returns the overrides as strings. Raises InvalidConfig."""
    clean: dict[str, str] = {}
    for name, value in overrides.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise InvalidConfig(f"unknown topic config {name!r}")
        if value is None:
            raise InvalidConfig(f"{name}: null value")
        try:
            key.parse(value)
        except InvalidConfig as exc:
            raise InvalidConfig(f"{name}: {exc}") from None
        clean[name] = value
    return clean


def broker_default(settings: BrokerSettings, key: ConfigKey) -> object:
    if not key.broker_setting:
        return key.default  # unclean.leader.election.enable: Kafka's default (false); the schema: none
    return getattr(settings, key.broker_setting)


def log_config(settings: BrokerSettings, overrides: Mapping[str, str]) -> LogConfig:
    """The effective LogConfig: broker defaults, then the topic's overrides."""
    values: dict[str, object] = {}
    for name, key in TOPIC_CONFIGS.items():
        if not key.in_log:
            continue
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


def _as_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def describe(settings: BrokerSettings, overrides: Mapping[str, str]) -> list[DescribedConfig]:
    """Every topic config with its effective value and where it came from."""
    explicitly_set = settings.model_fields_set
    out = []
    for name in sorted(TOPIC_CONFIGS):
        key = TOPIC_CONFIGS[name]
        default_value = _as_text(broker_default(settings, key))
        broker_source = (
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
