"""A stand-in for the controller core behind the operator's ControllerPort.

It places replicas with the real core's placement function over a fixed
set of brokers and reports every ISR as full: enough to test that the
handlers write placement to Topic status and call the controller for
create / grow / delete. It is not the controller: no brokers, no elections.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinystream.operator.controller.errors import PlacementError
from tinystream.operator.controller.image import AclRecord, ClientQuotaRecord, ScramCredentialRecord
from tinystream.operator.controller.placement import assign_replicas
from tinystream.operator.controller.quotas import altered
from tinystream.operator.controller.rebalance import LoadModel, Mode, PartitionLoad, propose
from tinystream.operator.k8s.controller_port import (
    BrokerAction,
    ClusterKey,
    ControllerRefused,
    ControllerUnavailable,
    RebalanceMoves,
    RebalanceProgress,
)
from tinystream.operator.k8s.model import ClusterSpec
from tinystream.operator.k8s.reconcile import PartitionView
from tinystream.operator.k8s.topics import (
    AlterConfig,
    ChangeReplicationFactor,
    CreateTopic,
    GrowPartitions,
    TopicAction,
    TopicView,
)
from tinystream.operator.k8s.users import UserAccessPlan


@dataclass
class FakeController:
    brokers: tuple[int, ...] = (0, 1, 2)
    available: bool = True
    topics: dict[tuple[ClusterKey, str], TopicView] = field(default_factory=dict)
    placement: dict[tuple[ClusterKey, str], list[tuple[int, ...]]] = field(default_factory=dict)
    deleted: list[tuple[ClusterKey, str]] = field(default_factory=list)
    broker_calls: list[BrokerAction] = field(default_factory=list)
    acls: set[AclRecord] = field(default_factory=set)
    credentials: dict[tuple[str, str], ScramCredentialRecord] = field(default_factory=dict)
    quotas: tuple[ClientQuotaRecord, ...] = ()
    leaders: dict[tuple[ClusterKey, str, int], int] = field(default_factory=dict)  # elections; else the first replica
    hold_moves: bool = False  # rebalance moves stay running (a slow copy) until stopped
    moving: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    rebalance_steps: list[str] = field(default_factory=list)
    rebalance_throttles: list[int | None] = field(default_factory=list)
    rebalance_members: list[frozenset[int] | None] = field(default_factory=list)  # each proposal's (node pools)
    ca_phases: list[tuple[str, str]] = field(default_factory=list)  # (cluster, status.clusterCa phase) followed

    async def start(self, client: object) -> None:
        return None

    async def stop(self) -> None:
        return None

    def stand_down(self) -> None:
        return None

    async def registered(self, cluster: ClusterKey) -> frozenset[int] | None:
        return None

    async def cluster_id(self, cluster: ClusterKey) -> str | None:
        return None

    def _check(self) -> None:
        if not self.available:
            raise ControllerUnavailable("fake controller switched off")

    async def partitions(self, cluster: ClusterKey) -> tuple[PartitionView, ...] | None:
        if not self.available:
            return None
        return tuple(PartitionView(name, i, self.leaders.get((key, name, i), reps[0]), reps, reps)
                     for (key, name), assignment in sorted(self.placement.items()) if key == cluster
                     for i, reps in enumerate(assignment))

    def elect(self, cluster: ClusterKey, topic: str, partition: int, leader: int) -> None:
        """A leader election, as a failover makes one."""
        self.leaders[(cluster, topic, partition)] = leader

    async def fenced(self, cluster: ClusterKey) -> frozenset[int]:
        return frozenset()

    async def drained_for_roll(self, cluster: ClusterKey) -> frozenset[int]:
        return frozenset()

    async def topic(self, cluster: ClusterKey, name: str) -> TopicView | None:
        self._check()
        return self.topics.get((cluster, name))

    async def apply_topic(self, cluster: ClusterKey, actions: Sequence[TopicAction]) -> None:
        self._check()
        for action in actions:
            key = (cluster, action.name)
            if isinstance(action, CreateTopic):
                self.topics[key] = TopicView(action.name, action.partitions, action.replication_factor,
                                             dict(action.config))
                self.placement[key] = assign_replicas(brokers=self.brokers, racks={}, partitions=action.partitions,
                                                      replication_factor=action.replication_factor,
                                                      start_index=0, replica_shift=0)
            elif isinstance(action, GrowPartitions):
                view = self.topics[key]
                self.placement[key] += assign_replicas(
                    brokers=self.brokers, racks={}, partitions=action.partitions - view.partitions,
                    replication_factor=view.replication_factor, start_index=0, replica_shift=0,
                    first_partition=view.partitions)
                self.topics[key] = TopicView(view.name, action.partitions, view.replication_factor, view.config)
            elif isinstance(action, ChangeReplicationFactor):  # done at once: no replica has to catch up
                if action.replication_factor > len(self.brokers):
                    raise ControllerRefused("INVALID_REPLICATION_FACTOR", f"only {len(self.brokers)} brokers")
                view = self.topics[key]
                self.placement[key] = [
                    tuple(reps[:action.replication_factor]) + tuple(
                        b for b in self.brokers if b not in reps)[:max(0, action.replication_factor - len(reps))]
                    for reps in self.placement[key]]
                self.topics[key] = TopicView(view.name, view.partitions, action.replication_factor, view.config)
            elif isinstance(action, AlterConfig):
                view = self.topics[key]
                config = {**view.config, **{k: v for k, v in action.config.items() if v is not None}}
                config = {k: v for k, v in config.items() if action.config.get(k, "") is not None}
                self.topics[key] = TopicView(view.name, view.partitions, view.replication_factor, config)

    async def delete_topic(self, cluster: ClusterKey, name: str) -> None:
        self._check()
        self.topics.pop((cluster, name), None)
        self.placement.pop((cluster, name), None)
        self.deleted.append((cluster, name))

    async def broker_actions(self, cluster: ClusterKey, actions: Sequence[BrokerAction]) -> None:
        self._check()
        self.broker_calls.extend(actions)

    async def access(self, cluster: ClusterKey) -> tuple[tuple[AclRecord, ...], tuple[ScramCredentialRecord, ...]]:
        self._check()
        return tuple(sorted(self.acls)), tuple(self.credentials.values())

    async def client_quotas(self, cluster: ClusterKey) -> tuple[ClientQuotaRecord, ...]:
        self._check()
        return self.quotas

    async def alter_access(self, cluster: ClusterKey, plan: UserAccessPlan) -> None:
        self._check()
        if plan.quotas is not None:
            self.quotas = altered(self.quotas, [plan.quotas])
        removed = {(f.resource_type, f.resource_name, f.pattern_type, f.principal, f.host, f.operation, f.permission)
                   for f in plan.delete}
        self.acls = {a for a in self.acls if (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
                                              a.operation, a.permission) not in removed} | set(plan.create)
        for c in plan.upsert:
            self.credentials[(c.user, c.mechanism)] = c
        for d in plan.remove:
            self.credentials.pop((d.user, d.mechanism), None)

    async def rebalance_proposal(self, cluster: ClusterKey, mode: str, brokers: Sequence[int], *,
                                 members: Collection[int] | None = None) -> dict[str, Any]:
        """The real optimizer over the fake's placement (no sizes, no racks); with `members` (node pools)
        those are the brokers, any other holding a replica receives none (as the controller's model)."""
        self._check()
        self.rebalance_members.append(None if members is None else frozenset(members))
        partitions = {(name, i): PartitionLoad(replicas=reps)
                      for (key, name), assignment in self.placement.items() if key == cluster
                      for i, reps in enumerate(assignment)}
        known = set(self.brokers if members is None else members)
        holding = {b for load in partitions.values() for b in load.replicas}
        model = LoadModel(brokers={b: None for b in sorted(known | holding)}, partitions=partitions,
                          excluded=frozenset(holding - known))
        try:
            return propose(model, Mode(mode), brokers).to_dict()
        except PlacementError as exc:
            raise ControllerRefused(exc.error.name, exc.message) from exc

    async def rebalance_moves(self, cluster: ClusterKey, step: str, moves: RebalanceMoves, *,
                              throttle: int | None = None) -> RebalanceProgress:
        """execute starts the moves; verify finishes them at once unless `hold_moves`; stop cancels them.
        Each step's throttle is kept in `rebalance_throttles`."""
        self._check()
        self.rebalance_steps.append(step)
        self.rebalance_throttles.append(throttle)
        if step == "execute":
            self.moving = dict(moves)
        elif step == "verify" and not self.hold_moves:
            for (name, i), target in self.moving.items():
                self.placement[(cluster, name)][i] = tuple(target)
            self.moving = {}
        elif step == "stop":
            cancelled, self.moving = tuple(self.moving), {}
            return RebalanceProgress(remaining=(), cancelled=cancelled)
        return RebalanceProgress(remaining=tuple(self.moving))

    async def forget(self, cluster: ClusterKey) -> None:
        return None

    def follow_ca(self, spec: ClusterSpec) -> None:
        self.ca_phases.append((spec.name, str(spec.ca_status.get("phase") or "")))
