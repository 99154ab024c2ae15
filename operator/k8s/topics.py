"""Topic decisions: can this spec be applied, and what changes on the controller.

`validate_topic` returns every problem with the spec as seen against its
cluster (the CRD cannot see the cluster: RF > brokers) and against what
exists (partitions cannot shrink, the topic name cannot change). The
handler reports the first as the Ready=False reason and all of them in the
message; nothing is changed on the controller while any problem stands, and
nothing breaks: fixing the spec (or growing the cluster) clears it.

`plan_topic` compares the spec with the controller's view of the topic and
lists the changes (create, grow partitions, alter config), in the order
Kafka's admin API would apply them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tinystream.operator.controller.topic_config import schema_error
from tinystream.operator.k8s.conditions import TopicReason
from tinystream.operator.k8s.model import VALUE_SCHEMA_KEY, ConfigValue, TopicSpec

# Kafka's Topic.validate(): 1..249 legal characters, not "." or "..".
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # fullmatch: "$" would let a name end in a newline

# The Topic CRD's config keys (Kafka names) and their lower bounds (Kafka's TopicConfig validators).
LONG_KEYS: dict[str, int] = {
    "retention.ms": -1,
    "retention.bytes": -1,
    "min.insync.replicas": 1,
    "max.message.bytes": 0,
    "segment.bytes": 14,
}
CLEANUP_POLICIES = frozenset({"delete", "compact", "compact,delete", "delete,compact"})
ALLOWED_KEYS = frozenset(LONG_KEYS) | {"cleanup.policy", VALUE_SCHEMA_KEY}  # the schema comes from spec.schema


@dataclass(frozen=True, slots=True)
class Problem:
    reason: TopicReason
    message: str


@dataclass(frozen=True, slots=True)
class TopicView:
    """The controller's view of an existing topic."""

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, ConfigValue] = field(default_factory=dict)


def _as_long(value: ConfigValue) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else None


def config_problems(config: Mapping[str, ConfigValue]) -> list[Problem]:
    problems = []
    for key in sorted(config):
        value = config[key]
        if key not in ALLOWED_KEYS:
            problems.append(Problem(TopicReason.UNKNOWN_CONFIG_KEY,
                                    f"unknown topic config {key!r}; allowed: {', '.join(sorted(ALLOWED_KEYS))}"))
        elif key == VALUE_SCHEMA_KEY:
            if (why := schema_error(value)) is not None:
                problems.append(Problem(TopicReason.INVALID_CONFIG_VALUE, f"spec.schema {why}"))
        elif key == "cleanup.policy":
            if str(value) not in CLEANUP_POLICIES:
                problems.append(Problem(TopicReason.INVALID_CONFIG_VALUE,
                                        f"cleanup.policy={value!r}: expected delete, compact or compact,delete"))
        else:
            number = _as_long(value)
            if number is None or number < LONG_KEYS[key]:
                problems.append(Problem(TopicReason.INVALID_CONFIG_VALUE,
                                        f"{key}={value!r}: expected a whole number >= {LONG_KEYS[key]}"))
    return problems


def validate_topic(spec: TopicSpec, *, cluster_brokers: int | None,
                   existing: TopicView | None = None, created_name: str | None = None) -> list[Problem]:
    """Every reason `spec` cannot be applied now (empty: it can).

    `cluster_brokers` is the cluster's spec.brokers, None when the cluster does
    not exist; `existing` is the topic as the controller has it; `created_name`
    the Kafka name recorded in status when the topic was created.
    """
    problems: list[Problem] = []
    if cluster_brokers is None:
        problems.append(Problem(TopicReason.CLUSTER_NOT_FOUND,
                                f"TinyStreamCluster {spec.cluster!r} does not exist in namespace {spec.namespace}"))
    elif spec.replication_factor > cluster_brokers:
        problems.append(Problem(TopicReason.REPLICATION_FACTOR_TOO_LARGE,
                                f"replicationFactor {spec.replication_factor} exceeds the {cluster_brokers} "
                                f"broker(s) of cluster {spec.cluster!r}"))
    if not TOPIC_NAME.fullmatch(spec.topic_name) or spec.topic_name in (".", ".."):
        problems.append(Problem(TopicReason.INVALID_TOPIC_NAME,
                                f"{spec.topic_name!r} is not a Kafka topic name (1-249 of [a-zA-Z0-9._-])"))
    if created_name and created_name != spec.topic_name:
        problems.append(Problem(TopicReason.TOPIC_NAME_CHANGED,
                                f"the topic was created as {created_name!r}; a Kafka topic cannot be renamed"))
    if existing is not None and spec.partitions < existing.partitions:
        problems.append(Problem(TopicReason.PARTITIONS_CANNOT_SHRINK,
                                f"partitions {spec.partitions} < {existing.partitions} existing; "
                                f"Kafka cannot remove partitions"))
    problems.extend(config_problems(spec.config))
    mir = spec.config.get("min.insync.replicas")
    if mir is not None and (n := _as_long(mir)) is not None and n > spec.replication_factor:
        problems.append(Problem(TopicReason.MIN_INSYNC_REPLICAS_TOO_LARGE,
                                f"min.insync.replicas {n} exceeds replicationFactor {spec.replication_factor}: "
                                f"no acks=all write could succeed"))
    return problems


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, ConfigValue]


@dataclass(frozen=True, slots=True)
class GrowPartitions:
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class AlterConfig:
    name: str
    config: Mapping[str, ConfigValue | None]  # None deletes an override (IncrementalAlterConfigs DELETE)


TopicAction = CreateTopic | GrowPartitions | AlterConfig


def _normalized(config: Mapping[str, ConfigValue]) -> dict[str, str]:
    return {k: str(v) for k, v in config.items()}


def plan_topic(spec: TopicSpec, existing: TopicView | None) -> list[TopicAction]:
    """Changes that bring the controller's topic to `spec` (call only when validate_topic found none)."""
    if existing is None:
        return [CreateTopic(spec.topic_name, spec.partitions, spec.replication_factor, dict(spec.config))]
    actions: list[TopicAction] = []
    if spec.partitions > existing.partitions:
        actions.append(GrowPartitions(spec.topic_name, spec.partitions))
    want, have = _normalized(spec.config), _normalized(existing.config)
    if want != have:
        change: dict[str, ConfigValue | None] = {k: v for k, v in spec.config.items() if have.get(k) != str(v)}
        change.update({k: None for k in have if k not in want})
        actions.append(AlterConfig(spec.topic_name, change))
    return actions
