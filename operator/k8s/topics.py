"""Topic decisions: can this spec be applied, what changes on the controller, and what status says.

`validate_topic` returns every problem with the spec as seen against its
cluster (the CRD cannot see the cluster: RF > brokers) and against what
exists (partitions cannot shrink, the topic name cannot change). Config
keys and values are checked against the one topic-config table
(tinystream/config/topic_configs.py), as the controller and the brokers
check them. The handler reports the first problem as the Ready=False reason
and all of them in the message; nothing is changed on the controller while
any problem stands, and nothing breaks: fixing the spec (or growing the
cluster) clears it.

`plan_topic` compares the spec with the controller's view of the topic and
lists the changes (create, grow partitions, change the replication factor,
alter config), in the order Kafka's admin API would apply them; a new
replication factor is a reassignment (KIP-455), planned by the controller.

`placement_condition` is the Ready condition the partitions imply:
reassigning (a replication-factor change under way), under-replicated, or ready.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tinystream.config.topic_configs import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    InvalidConfig,
    parse,
)
from tinystream.operator.controller.topic_config import TOPIC_CONFIGS, schema_error
from tinystream.operator.k8s.conditions import Condition, TopicReason, ready
from tinystream.operator.k8s.model import VALUE_SCHEMA_KEY, ConfigValue, PartitionView, TopicSpec

# Kafka's Topic.validate(): 1..249 legal characters, not "." or "..".
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # fullmatch: "$" would let a name end in a newline

# The keys spec.config takes: every topic config of the table but the value schema, which is spec.schema.
# The Topic CRD lists the same names in a CEL rule (tests/operator/k8s/test_crds.py checks they agree).
SPEC_CONFIG_KEYS = tuple(sorted(k for k in TOPIC_CONFIGS if k != VALUE_SCHEMA_KEY))

# Keys a running reassignment owns (a TinyStreamRebalance, kafka-reassign-partitions.sh --throttle): a
# Topic whose spec does not name them leaves them alone, or every re-reconcile during a move would lift
# the throttle (Strimzi's topic operator has the same carve-out in STRIMZI_ALTERABLE_TOPIC_CONFIG).
REASSIGNMENT_KEYS = frozenset({LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS})


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
        if key not in TOPIC_CONFIGS:
            problems.append(Problem(TopicReason.UNKNOWN_CONFIG_KEY,
                                    f"unknown topic config {key!r} (the Topic docs list the {len(SPEC_CONFIG_KEYS)} "
                                    f"accepted keys)"))
        elif key == VALUE_SCHEMA_KEY:
            if (why := schema_error(value)) is not None:
                problems.append(Problem(TopicReason.INVALID_CONFIG_VALUE, f"spec.schema {why}"))
        else:
            try:
                parse(key, value)
            except InvalidConfig as exc:
                problems.append(Problem(TopicReason.INVALID_CONFIG_VALUE, f"{key}={value!r}: {exc}"))
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


@dataclass(frozen=True, slots=True)
class ChangeReplicationFactor:
    """Every partition to `replication_factor` replicas: a reassignment the controller plans and runs."""

    name: str
    replication_factor: int


TopicAction = CreateTopic | GrowPartitions | ChangeReplicationFactor | AlterConfig


def _normalized(config: Mapping[str, ConfigValue]) -> dict[str, str]:
    return {k: str(v) for k, v in config.items()}


def plan_topic(spec: TopicSpec, existing: TopicView | None) -> list[TopicAction]:
    """Changes that bring the controller's topic to `spec` (call only when validate_topic found none)."""
    if existing is None:
        return [CreateTopic(spec.topic_name, spec.partitions, spec.replication_factor, dict(spec.config))]
    actions: list[TopicAction] = []
    if spec.partitions > existing.partitions:
        actions.append(GrowPartitions(spec.topic_name, spec.partitions))
    if spec.replication_factor != existing.replication_factor:
        actions.append(ChangeReplicationFactor(spec.topic_name, spec.replication_factor))
    want = _normalized(spec.config)
    have = {k: v for k, v in _normalized(existing.config).items() if k in want or k not in REASSIGNMENT_KEYS}
    if want != have:
        change: dict[str, ConfigValue | None] = {k: v for k, v in spec.config.items() if have.get(k) != str(v)}
        change.update({k: None for k in have if k not in want})
        actions.append(AlterConfig(spec.topic_name, change))
    return actions


def partition_rows(partitions: Sequence[PartitionView]) -> list[dict[str, object]]:
    """status.partitions: placement, leader and ISR by partition (and the replicas moving, while they move)."""
    rows: list[dict[str, object]] = []
    for p in sorted(partitions, key=lambda p: p.partition):
        row: dict[str, object] = {"partition": p.partition, "leader": p.leader, "leaderEpoch": p.leader_epoch,
                                  "replicas": list(p.replicas), "isr": list(p.isr)}
        if p.adding:
            row["addingReplicas"] = list(p.adding)
        if p.removing:
            row["removingReplicas"] = list(p.removing)
        rows.append(row)
    return rows


def placement_condition(spec: TopicSpec, partitions: Sequence[PartitionView]) -> Condition:
    """Ready as the partitions say: a replication-factor change under way, an incomplete ISR, or ready."""
    moving = [p for p in partitions if p.adding or p.removing or len(p.target) != spec.replication_factor]
    if moving:
        return ready(False, TopicReason.REPLICATION_FACTOR_CHANGING,
                     f"replication factor changing to {spec.replication_factor}: {len(moving)} of {len(partitions)} "
                     f"partitions moving (new replicas join once they have caught up)", generation=spec.generation)
    under = [p for p in partitions if p.under_replicated]
    if under:
        return ready(False, TopicReason.UNDER_REPLICATED,
                     f"{len(under)} of {len(partitions)} partitions have an incomplete ISR", generation=spec.generation)
    return ready(True, TopicReason.READY, f"{len(partitions)} partitions, replication factor {spec.replication_factor}",
                 generation=spec.generation)
