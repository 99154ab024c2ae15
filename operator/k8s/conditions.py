"""Status conditions: the Kubernetes API convention (metav1.Condition).

Every state the operator reports is a `Ready` condition with a CamelCase
reason from an enum and a message a person can act on ("waiting for
broker demo-broker-2 to be ready", not "NotReady"). `lastTransitionTime`
changes only when the status flips, so `kubectl wait` and dashboards can
tell how long a state has lasted.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class ClusterReason(str, enum.Enum):
    READY = "ClusterReady"
    CREATING = "Creating"
    WAITING_FOR_BROKERS = "WaitingForBrokers"
    ROLLING = "RollingUpdate"
    ROLL_WAITING_FOR_POD = "RollWaitingForPod"
    ROLL_WAITING_FOR_ISR = "RollWaitingForISR"
    MOVING_LEADERSHIP = "MovingLeadership"
    SCALING_UP = "ScalingUp"
    REBALANCING = "Rebalancing"
    SCALING_DOWN = "ScalingDown"
    SCALE_DOWN_DRAINING = "ScaleDownDraining"
    SCALE_DOWN_BLOCKED = "ScaleDownBlocked"
    WAITING_FOR_CONTROLLER = "WaitingForController"
    INVALID_BROKER_CONFIG = "InvalidBrokerConfig"
    INVALID_POD_TEMPLATE = "InvalidPodTemplate"  # spec.template.pod sets a reserved label or annotation
    SECRET_NOT_OWNED = "SecretNotOwned"  # a Secret the cluster needs is there under another owner
    CA_UNUSABLE = "CaUnusable"  # the provided CA's Secret is missing, unreadable, invalid or expired
    WAITING_FOR_EXTERNAL_ADDRESSES = "WaitingForExternalAddresses"  # a node port or load balancer not known yet
    RESIZING_STORAGE = "ResizingStorage"  # the StatefulSet is re-created for a larger claim template
    VOLUMES_CHANGED = "VolumesChanged"  # spec.storage.volumes added or removed on a running cluster: refused
    NODE_POOLS = "NodePools"  # tinystream.io/node-pools: enabled: the brokers are the TinyStreamNodePools'
    BROKERS_NOT_ADOPTED = "BrokersNotAdopted"  # pools enabled, <cluster>-broker still runs, no pool broker has it


class StorageReason(str, enum.Enum):
    """The `StorageResized` condition's reasons (volume_expansion.py)."""

    AT_SIZE = "ClaimsAtRequestedSize"
    RESIZING = "ClaimsResizing"
    FILE_SYSTEM_RESIZE_PENDING = "FileSystemResizePending"
    NOT_EXPANDABLE = "StorageClassNotExpandable"
    CLASS_NOT_FOUND = "StorageClassNotFound"
    SHRINK_REFUSED = "ShrinkRefused"
    VOLUMES_CHANGED = "VolumesChanged"  # spec.storage.volumes added or removed on a running cluster


class TopicReason(str, enum.Enum):
    READY = "TopicReady"
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    REPLICATION_FACTOR_TOO_LARGE = "ReplicationFactorTooLarge"
    PARTITIONS_CANNOT_SHRINK = "PartitionsCannotShrink"
    MIN_INSYNC_REPLICAS_TOO_LARGE = "MinInsyncReplicasTooLarge"
    UNKNOWN_CONFIG_KEY = "UnknownConfigKey"
    INVALID_CONFIG_VALUE = "InvalidConfigValue"
    INVALID_TOPIC_NAME = "InvalidTopicName"
    TOPIC_NAME_CHANGED = "TopicNameChanged"
    CONTROLLER_UNAVAILABLE = "ControllerUnavailable"
    UNDER_REPLICATED = "UnderReplicated"
    REPLICATION_FACTOR_CHANGING = "ReplicationFactorChanging"
    CONTROLLER_REFUSED = "ControllerRefused"
    # The controller core's refusals, by Kafka error (the message starts with the Kafka name).
    INVALID_REPLICATION_FACTOR = "InvalidReplicationFactor"
    INVALID_PARTITIONS = "InvalidPartitions"
    INVALID_CONFIG = "InvalidConfig"
    TOPIC_DELETION_DISABLED = "TopicDeletionDisabled"


class UserReason(str, enum.Enum):
    READY = "UserReady"
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    AUTHENTICATION_DISABLED = "AuthenticationDisabled"
    AUTHENTICATION_MISMATCH = "AuthenticationMismatch"
    CONTROLLER_UNAVAILABLE = "ControllerUnavailable"
    CONTROLLER_REFUSED = "ControllerRefused"
    NAME_RESERVED = "NameReserved"  # the name of the cluster's own principal or Secrets
    SECRET_NOT_OWNED = "SecretNotOwned"  # a Secret of the user's name is there under another owner


class SchemaReason(str, enum.Enum):
    READY = "SchemaReady"
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    REGISTRY_NOT_DEPLOYED = "RegistryNotDeployed"  # the cluster has no spec.schemaRegistry
    REGISTRY_UNAVAILABLE = "RegistryUnavailable"  # not reachable, or a 5xx: retried
    INCOMPATIBLE = "IncompatibleSchema"  # 409: the subject's compatibility level refuses it
    INVALID = "InvalidSchema"  # 42201 (or 42203: an invalid compatibility level)
    REFUSED = "RegistryRefused"  # any other 4xx, its error code in the message


class PoolReason(str, enum.Enum):
    """A TinyStreamNodePool's Ready reasons (node_pools.py)."""

    READY = "PoolReady"
    CLUSTER_NOT_FOUND = "ClusterNotFound"  # no cluster of the tinystream.io/cluster label (or no label)
    NODE_POOLS_NOT_ENABLED = "NodePoolsNotEnabled"  # the cluster lacks tinystream.io/node-pools: enabled
    ADOPTION_REFUSED = "AdoptionRefused"  # pool broker cannot take over the cluster's own StatefulSet (why)
    NODE_IDS_EXHAUSTED = "NodeIdsExhausted"  # next-node-ids unreadable, or no free id left in it
    SCALING_DOWN = "ScalingDown"
    SCALE_DOWN_DRAINING = "ScaleDownDraining"
    SCALE_DOWN_BLOCKED = "ScaleDownBlocked"
    RESIZING_STORAGE = "ResizingStorage"  # the pool's StatefulSet is re-created for a larger claim template
    VOLUMES_CHANGED = "VolumesChanged"  # volumes added or removed on a running pool: refused, nothing applied


_REFUSALS = {
    "INVALID_REPLICATION_FACTOR": TopicReason.INVALID_REPLICATION_FACTOR,
    "INVALID_PARTITIONS": TopicReason.INVALID_PARTITIONS,
    "INVALID_CONFIG": TopicReason.INVALID_CONFIG,
    "INVALID_TOPIC_EXCEPTION": TopicReason.INVALID_TOPIC_NAME,
    "TOPIC_DELETION_DISABLED": TopicReason.TOPIC_DELETION_DISABLED,
}


def refusal_reason(error: str) -> TopicReason:
    """The Ready reason for a refusal by the controller core (Kafka error name), else ControllerRefused."""
    return _REFUSALS.get(error, TopicReason.CONTROLLER_REFUSED)


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: bool | None  # None: Unknown
    reason: str
    message: str
    observed_generation: int | None = None

    @property
    def status_text(self) -> str:
        return "Unknown" if self.status is None else ("True" if self.status else "False")


def ready(status: bool | None, reason: ClusterReason | TopicReason | UserReason | SchemaReason | PoolReason,
          message: str, *, generation: int | None = None) -> Condition:
    return Condition("Ready", status, reason.value, message, generation)


def secure_condition(insecure: Sequence[str], *, generation: int | None = None) -> Condition:
    """The cluster's `Secure` condition: True with every default protection on, False naming each opt-out."""
    if not insecure:
        return Condition("Secure", True, "SecureByDefault",
                         "TLS, SCRAM or mTLS clients, ACLs, an authenticated replication listener", generation)
    return Condition("Secure", False, "InsecureByRequest", "; ".join(insecure), generation)


def merge_condition(existing: Sequence[Mapping[str, Any]] | None, new: Condition, *,
                    now: datetime | None = None) -> list[dict[str, Any]]:
    """The conditions list with `new` in place; its transition time kept unless the status flips."""
    now = now or datetime.now(UTC)
    out: list[dict[str, Any]] = []
    previous = None
    for cond in existing or ():
        if cond.get("type") == new.type:
            previous = cond
        else:
            out.append(dict(cond))
    flipped = previous is None or previous.get("status") != new.status_text
    entry: dict[str, Any] = {
        "type": new.type,
        "status": new.status_text,
        "reason": new.reason,
        "message": new.message,
        "lastTransitionTime": (now.strftime("%Y-%m-%dT%H:%M:%SZ") if flipped
                               else previous.get("lastTransitionTime")),  # type: ignore[union-attr]
    }
    if new.observed_generation is not None:
        entry["observedGeneration"] = new.observed_generation
    out.append(entry)
    return out
