"""What the kopf handlers need from the controller core, as one small interface.

On Kubernetes the operator *is* the controller: it runs the controller core
(tinystream.operator.controller, pure `apply(state, event, now_ms)`), serves
the controller API to the broker pods, and keeps the core's state in the
custom resources' status. The handlers do not call the core directly; they
call this port, so the wiring (state persistence, the HTTP API, heartbeats)
lives in one adapter and the handlers are tested with a fake.

The adapter is controller_host.OperatorController (what `tinystream
operator` runs). `UnattachedController` stands in where no controller runs: it has no
partition view (the reconcile plan then rolls by pod readiness only and
refuses scale-down) and refuses topic changes with ControllerUnavailable,
which the Topic's Ready condition reports as such.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tinystream.operator.controller.image import AclRecord, ClientQuotaRecord, ScramCredentialRecord
from tinystream.operator.k8s.model import ClusterSpec
from tinystream.operator.k8s.reconcile import (
    BrokerDown,
    DrainBrokers,
    EndRollDrain,
    EndScaleDownDrain,
    MoveLeadership,
    PartitionView,
    Rebalance,
)
from tinystream.operator.k8s.topics import TopicAction, TopicView
from tinystream.operator.k8s.users import UserAccessPlan


@dataclass(frozen=True, slots=True, order=True)
class ClusterKey:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class ControllerUnavailable(Exception):
    """The controller for this cluster cannot answer now (not attached, not elected, starting)."""


class ControllerRefused(Exception):
    """The controller refused a change (Kafka error name and message)."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message


BrokerAction = MoveLeadership | DrainBrokers | Rebalance | BrokerDown | EndRollDrain | EndScaleDownDrain
RebalanceMoves = Mapping[tuple[str, int], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class RebalanceProgress:
    """What is left of a rebalance's moves (verify), or what a stop cancelled."""

    remaining: tuple[tuple[str, int], ...]
    cancelled: tuple[tuple[str, int], ...] = ()


class ControllerPort(Protocol):
    async def start(self, client: Any) -> None:
        """Operator start-up (kopf): serve the controller API; `client` is the KubeClient."""

    async def stop(self) -> None:
        """Operator shutdown: stop serving, close every cluster's controller."""

    def stand_down(self) -> None:
        """Told to stop (a signal handler): stop acting as any cluster's controller now; `stop` follows."""

    async def registered(self, cluster: ClusterKey) -> frozenset[int] | None:
        """Broker ids the controller knows (registered at least once), or None without a view."""

    async def cluster_id(self, cluster: ClusterKey) -> str | None:
        """The Kafka cluster id, once the cluster's controller runs."""

    async def partitions(self, cluster: ClusterKey) -> tuple[PartitionView, ...] | None:
        """Every partition of the cluster, or None when there is no controller view."""

    async def fenced(self, cluster: ClusterKey) -> frozenset[int]:
        """Brokers the controller has fenced (missed heartbeats, shut down)."""

    async def drained_for_roll(self, cluster: ClusterKey) -> frozenset[int]:
        """Brokers whose leadership moved away for a restart (MoveLeadership), not restarted yet."""

    async def topic(self, cluster: ClusterKey, name: str) -> TopicView | None:
        """The topic as the controller has it; raises ControllerUnavailable."""

    async def apply_topic(self, cluster: ClusterKey, actions: Sequence[TopicAction]) -> None:
        """Create, grow, reconfigure; raises ControllerUnavailable or ControllerRefused."""

    async def delete_topic(self, cluster: ClusterKey, name: str) -> None:
        """Delete the topic and its data; raises ControllerUnavailable."""

    async def broker_actions(self, cluster: ClusterKey, actions: Sequence[BrokerAction]) -> None:
        """Move leadership, drain brokers before scale-down, rebalance onto new brokers."""

    async def access(self, cluster: ClusterKey) -> tuple[tuple[AclRecord, ...], tuple[ScramCredentialRecord, ...]]:
        """The ACLs and SCRAM credentials in the cluster's metadata (TinyStreamUsers reconcile against them)."""

    async def client_quotas(self, cluster: ClusterKey) -> tuple[ClientQuotaRecord, ...]:
        """The client quotas in the cluster's metadata (a TinyStreamUser's spec.quotas reconciles against them)."""

    async def alter_access(self, cluster: ClusterKey, plan: UserAccessPlan) -> None:
        """Create and delete ACLs, set and remove credentials and quotas, as one TinyStreamUser's plan says."""

    async def rebalance_proposal(self, cluster: ClusterKey, mode: str, brokers: Sequence[int], *,
                                 members: Collection[int] | None = None) -> dict[str, Any]:
        """A rebalance proposal (Proposal.to_dict()) on the cluster's image, partition sizes unknown (0 bytes);
        `members` (node pools: the ids the pools keep) limits the brokers that receive replicas, None: every
        registered one; raises ControllerUnavailable or ControllerRefused (a mode or broker list no plan can
        meet)."""

    async def rebalance_moves(self, cluster: ClusterKey, step: str, moves: RebalanceMoves, *,
                              throttle: int | None = None) -> RebalanceProgress:
        """`step` execute (with the topics' throttled-replicas and, given `throttle` in bytes/s, the involved
        brokers' rates), verify or stop reviewed moves (given the same `throttle`, they take the rates out);
        raises ControllerUnavailable or ControllerRefused."""

    async def forget(self, cluster: ClusterKey) -> None:
        """The cluster was deleted: drop its state."""

    def follow_ca(self, spec: ClusterSpec) -> None:
        """The cluster CA's state in `spec` was just recorded: the controller API's certificate follows it."""


class UnattachedController:
    """No controller core attached yet: honest answers, no pretending."""

    MESSAGE = "the controller core is not attached to this operator yet (issue 5: wiring pending)"

    async def start(self, client: Any) -> None:
        return None

    async def stop(self) -> None:
        return None

    def stand_down(self) -> None:
        return None

    async def registered(self, cluster: ClusterKey) -> frozenset[int] | None:
        return None

    async def cluster_id(self, cluster: ClusterKey) -> str | None:
        return None

    async def partitions(self, cluster: ClusterKey) -> tuple[PartitionView, ...] | None:
        return None

    async def fenced(self, cluster: ClusterKey) -> frozenset[int]:
        return frozenset()

    async def drained_for_roll(self, cluster: ClusterKey) -> frozenset[int]:
        return frozenset()

    async def topic(self, cluster: ClusterKey, name: str) -> TopicView | None:
        raise ControllerUnavailable(self.MESSAGE)

    async def apply_topic(self, cluster: ClusterKey, actions: Sequence[TopicAction]) -> None:
        raise ControllerUnavailable(self.MESSAGE)

    async def delete_topic(self, cluster: ClusterKey, name: str) -> None:
        raise ControllerUnavailable(self.MESSAGE)

    async def broker_actions(self, cluster: ClusterKey, actions: Sequence[BrokerAction]) -> None:
        raise ControllerUnavailable(self.MESSAGE)

    async def access(self, cluster: ClusterKey) -> tuple[tuple[AclRecord, ...], tuple[ScramCredentialRecord, ...]]:
        raise ControllerUnavailable(self.MESSAGE)

    async def client_quotas(self, cluster: ClusterKey) -> tuple[ClientQuotaRecord, ...]:
        raise ControllerUnavailable(self.MESSAGE)

    async def alter_access(self, cluster: ClusterKey, plan: UserAccessPlan) -> None:
        raise ControllerUnavailable(self.MESSAGE)

    async def rebalance_proposal(self, cluster: ClusterKey, mode: str, brokers: Sequence[int], *,
                                 members: Collection[int] | None = None) -> dict[str, Any]:
        raise ControllerUnavailable(self.MESSAGE)

    async def rebalance_moves(self, cluster: ClusterKey, step: str, moves: RebalanceMoves, *,
                              throttle: int | None = None) -> RebalanceProgress:
        raise ControllerUnavailable(self.MESSAGE)

    async def forget(self, cluster: ClusterKey) -> None:
        return None

    def follow_ca(self, spec: ClusterSpec) -> None:
        return None
