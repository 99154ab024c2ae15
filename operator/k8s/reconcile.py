"""What to do next for a TinyStreamCluster: `plan_cluster(spec, status, observed) -> ClusterPlan`.

Pure: the handler observes (owned objects, broker pods, the controller's
partition view), calls `plan_cluster`, executes the actions, writes the
status, and calls again after `requeue_after` seconds or on the next event.
Each call does at most one risky step (delete one pod, shrink by the drained
brokers), so a plan never has to be undone; the next call sees its effect.

Decisions, in order:

1. Broker config that the broker would refuse -> nothing is changed, the
   condition says which key (InvalidBrokerConfig). A bad config never rolls.
2. Replicas of the StatefulSet:
   - no StatefulSet yet: spec.brokers;
   - scale up: spec.brokers at once; new brokers get a fair share of replicas
     (Rebalance) once they are ready;
   - scale down: refused while a topic's replication factor exceeds the new
     count (ScaleDownBlocked); otherwise replicas are moved off the removed
     (highest-ordinal) brokers first (DrainBrokers, ScaleDownDraining), and
     the StatefulSet shrinks only when they hold none.
3. Owned objects whose desired fields differ from the observed ones are applied
   (create-or-patch); a disabled dashboard's Service is deleted.
4. Rolling update (the StatefulSet is OnDelete): one broker at a time, highest
   ordinal first, only when every broker is ready and every ISR is full; a
   broker that leads partitions first hands leadership away (MoveLeadership),
   then its pod is deleted. The drain takes it out of every ISR and its
   readiness, so from then on the checks look past that broker alone.

Without a controller view (`observed.partitions is None`, the controller core
not attached), the ISR checks cannot be made: rolls then wait for pod
readiness only, and scale-down is refused, both said in the condition.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinystream.operator.k8s.conditions import ClusterReason, Condition, ready
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.resources import (
    Names,
    broker_config_problems,
    label_selector_string,
    owned_objects,
    serves_dashboard,
)

REVISION_LABEL = "controller-revision-hash"
WAIT_S = 5.0  # how soon to look again while waiting for pods or ISRs


class Phase(str, enum.Enum):
    PENDING = "Pending"
    CREATING = "Creating"
    RUNNING = "Running"
    ROLLING = "Rolling"
    SCALING = "Scaling"
    DEGRADED = "Degraded"
    FAILED = "Failed"


# --- what was observed --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BrokerPod:
    name: str
    ordinal: int
    ready: bool
    revision: str | None = None
    terminating: bool = False
    node: str | None = None

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> BrokerPod:
        meta = pod.get("metadata") or {}
        name = meta["name"]
        conditions = (pod.get("status") or {}).get("conditions") or []
        is_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return cls(name=name, ordinal=int(name.rsplit("-", 1)[1]), ready=is_ready,
                   revision=(meta.get("labels") or {}).get(REVISION_LABEL),
                   terminating=bool(meta.get("deletionTimestamp")),
                   node=(pod.get("spec") or {}).get("nodeName"))


@dataclass(frozen=True, slots=True)
class PartitionView:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = 0

    @property
    def under_replicated(self) -> bool:
        return not set(self.replicas) <= set(self.isr)


@dataclass(frozen=True, slots=True)
class Observed:
    objects: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)  # (kind, name) -> object
    pods: tuple[BrokerPod, ...] = ()
    partitions: tuple[PartitionView, ...] | None = None  # None: no controller view
    max_replication_factor: int = 0  # the largest RF among the cluster's Topics
    fenced: frozenset[int] = frozenset()
    drained_for_roll: frozenset[int] = frozenset()  # leadership moved off for a restart, not restarted yet
    racks: Mapping[int, str] = field(default_factory=dict)
    registered: frozenset[int] | None = None  # brokers the controller knows; None: no controller view
    cluster_id: str | None = None

    def statefulset(self, cluster: ClusterSpec) -> Mapping[str, Any] | None:
        return self.objects.get(("StatefulSet", Names.of(cluster).statefulset))


# --- what to do ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Apply:
    obj: Mapping[str, Any]
    create: bool  # False: patch an existing object

    @property
    def key(self) -> tuple[str, str]:
        return self.obj["kind"], self.obj["metadata"]["name"]


@dataclass(frozen=True, slots=True)
class Delete:
    api_version: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class DeletePod:
    name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class MoveLeadership:
    broker_id: int


@dataclass(frozen=True, slots=True)
class DrainBrokers:
    broker_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Rebalance:
    broker_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndRollDrain:
    """A broker drained for a restart that no roll will restart any more (the template went back)."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class BrokerDown:
    """The broker's process is not running (a Pod event, pod_health.py): end its session now."""

    broker_id: int
    reason: str


Action = Apply | Delete | DeletePod | MoveLeadership | DrainBrokers | Rebalance | EndRollDrain


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    actions: tuple[Action, ...]
    phase: Phase
    condition: Condition
    status: dict[str, Any]  # every status field but conditions
    requeue_after: float | None = None


# --- helpers ------------------------------------------------------------------------------

def differs(desired: Any, current: Any) -> bool:
    """True when a field `desired` sets is missing or different in `current`.

    Fields the server adds (defaults, status, uid, ...) are not differences.
    """
    if isinstance(desired, Mapping):
        if not isinstance(current, Mapping):
            return True
        return any(differs(v, current.get(k)) for k, v in desired.items())
    if isinstance(desired, (list, tuple)):
        if not isinstance(current, (list, tuple)) or len(desired) != len(current):
            return True
        return any(differs(d, c) for d, c in zip(desired, current))
    return desired != current


def _partitions_led(partitions: Sequence[PartitionView] | None, broker_id: int) -> int | None:
    if partitions is None:
        return None
    return sum(1 for p in partitions if p.leader == broker_id)


def _hosted(partitions: Sequence[PartitionView], broker_ids: set[int]) -> list[PartitionView]:
    return [p for p in partitions if broker_ids & set(p.replicas)]


def _status(spec: ClusterSpec, observed: Observed, phase: Phase) -> dict[str, Any]:
    pods = sorted(observed.pods, key=lambda p: p.ordinal)
    by_id: dict[int, BrokerPod | None] = {p.ordinal: p for p in pods}
    for broker_id in observed.registered or ():  # known to the controller, pod gone (or not a pod)
        by_id.setdefault(broker_id, None)
    brokers = []
    for broker_id, pod in sorted(by_id.items()):
        entry: dict[str, Any] = {"id": broker_id, "ready": bool(pod and pod.ready),
                                 "fenced": broker_id in observed.fenced}
        if pod is not None:
            entry["pod"] = pod.name
        led = _partitions_led(observed.partitions, broker_id)
        if led is not None:
            entry["partitionsLed"] = led
        if broker_id in observed.racks:
            entry["rack"] = observed.racks[broker_id]
        brokers.append(entry)
    status: dict[str, Any] = {
        "phase": phase.value,
        "observedGeneration": spec.generation,
        "replicas": len(pods),
        "readyBrokers": sum(1 for p in pods if p.ready),
        "labelSelector": label_selector_string(spec),
        "brokers": brokers,
    }
    if observed.cluster_id:
        status["clusterId"] = observed.cluster_id
    if observed.partitions is not None:  # the controller's view (printer columns Partitions, Under-Replicated)
        status["partitions"] = len(observed.partitions)
        status["underReplicatedPartitions"] = sum(1 for p in observed.partitions if p.under_replicated)
        status["offlinePartitions"] = sum(1 for p in observed.partitions if p.leader < 0)
    return status


def _plan(spec: ClusterSpec, observed: Observed, actions: list[Action], phase: Phase,
          reason: ClusterReason, message: str, *, ok: bool = False, requeue: float | None = WAIT_S) -> ClusterPlan:
    return ClusterPlan(tuple(actions), phase, ready(ok, reason, message, generation=spec.generation),
                       _status(spec, observed, phase), None if ok else requeue)


# --- the decision -------------------------------------------------------------------------

def plan_cluster(spec: ClusterSpec, status: Mapping[str, Any] | None, observed: Observed, *,
                 ctx: OperatorContext) -> ClusterPlan:
    """The next step for `spec`, given the last `status` written and what is `observed` now."""
    del status  # the decision uses only what is observed now; status is its output
    problems = broker_config_problems(spec.config)
    if problems:
        return _plan(spec, observed, [], Phase.FAILED, ClusterReason.INVALID_BROKER_CONFIG,
                     "spec.config would stop the brokers, nothing was changed: " + "; ".join(problems),
                     requeue=None)

    sts = observed.statefulset(spec)
    current = int((sts or {}).get("spec", {}).get("replicas", 0)) if sts else None
    replicas = spec.brokers if current is None else current
    waiting: tuple[ClusterReason, str] | None = None
    actions: list[Action] = []
    phase = Phase.CREATING if sts is None else Phase.RUNNING

    # 2. replicas
    if current is not None and spec.brokers > current:
        replicas, phase = spec.brokers, Phase.SCALING
        waiting = (ClusterReason.SCALING_UP, f"scaling up from {current} to {spec.brokers} brokers")
    elif current is not None and spec.brokers < current:
        removed = set(range(spec.brokers, current))
        names = ", ".join(Names.of(spec).pod(i) for i in sorted(removed))
        if observed.max_replication_factor > spec.brokers:
            waiting = (ClusterReason.SCALE_DOWN_BLOCKED,
                       f"cannot scale down to {spec.brokers} brokers: a topic has replicationFactor "
                       f"{observed.max_replication_factor}; lower it or keep {current} brokers")
        elif observed.partitions is None:
            waiting = (ClusterReason.SCALE_DOWN_BLOCKED,
                       f"cannot scale down to {spec.brokers} brokers: the controller's partition view is "
                       f"unavailable, so replicas on {names} cannot be moved safely")
        elif hosted := _hosted(observed.partitions, removed):
            actions.append(DrainBrokers(tuple(sorted(removed))))
            phase = Phase.SCALING
            waiting = (ClusterReason.SCALE_DOWN_DRAINING,
                       f"moving {len(hosted)} partition replica set(s) off {names} before scaling down")
        else:
            replicas, phase = spec.brokers, Phase.SCALING
            waiting = (ClusterReason.SCALING_DOWN, f"scaling down from {current} to {spec.brokers} brokers")

    # 3. owned objects
    desired = owned_objects(spec, ctx, replicas=replicas)
    for obj in desired:
        key = (obj["kind"], obj["metadata"]["name"])
        existing = observed.objects.get(key)
        if key[0] == "StatefulSet" and existing is not None:
            # Claim templates are immutable; keep the existing ones (resizing is a PVC expansion).
            obj["spec"]["volumeClaimTemplates"] = existing.get("spec", {}).get(
                "volumeClaimTemplates", obj["spec"]["volumeClaimTemplates"])
        if existing is None or differs(obj, existing):
            actions.append(Apply(obj, create=existing is None))
    if not serves_dashboard(spec, ctx) and ("Service", Names.of(spec).dashboard) in observed.objects:
        actions.append(Delete("v1", "Service", Names.of(spec).dashboard))
    sts_changing = any(isinstance(a, Apply) and a.key[0] == "StatefulSet" for a in actions)

    if sts is None:
        return _plan(spec, observed, actions, Phase.CREATING, ClusterReason.CREATING,
                     f"creating {spec.brokers} broker(s)")
    if waiting and waiting[0] in (ClusterReason.SCALE_DOWN_BLOCKED, ClusterReason.SCALE_DOWN_DRAINING):
        return _plan(spec, observed, actions, Phase.DEGRADED if waiting[0] is ClusterReason.SCALE_DOWN_BLOCKED
                     else phase, *waiting)

    # 4. rolling update
    pods = sorted((p for p in observed.pods if p.ordinal < replicas), key=lambda p: p.ordinal)
    update_revision = (sts.get("status") or {}).get("updateRevision")
    outdated = [p for p in pods if update_revision and p.revision and p.revision != update_revision]
    if not outdated:  # a roll undone before its victim restarted leaves no broker drained for good
        actions += [EndRollDrain(p.ordinal) for p in pods
                    if p.ordinal in observed.drained_for_roll and not p.terminating]
    if sts_changing and not outdated:
        # The new template makes a new revision; the next pass sees which pods are outdated.
        reason, message = waiting or (ClusterReason.ROLLING, "applying the new broker template")
        return _plan(spec, observed, actions, phase if waiting else Phase.ROLLING, reason, message)
    if outdated:
        victim = outdated[-1]  # highest ordinal first, as the StatefulSet controller would
        # Once its leadership moved away, the victim has left every ISR (KIP-841) and reports not
        # ready: that is the roll's own doing, so the checks below look past it and it restarts next.
        drained = victim.ordinal in observed.drained_for_roll
        excused = {victim.ordinal} if drained else set()
        # A terminating victim is not excused: its deletion is under way, wait for the new pod.
        not_ready = [p for p in pods if (not p.ready and p.ordinal not in excused) or p.terminating]
        if not_ready:
            return _plan(spec, observed, actions, Phase.ROLLING, ClusterReason.ROLL_WAITING_FOR_POD,
                         f"rolling update: waiting for {not_ready[0].name} to be ready "
                         f"({len(outdated)} broker(s) still to restart)")
        if observed.partitions is not None:
            under = [p for p in observed.partitions if set(p.replicas) - set(p.isr) - excused]
            if under:
                p = under[0]
                return _plan(spec, observed, actions, Phase.ROLLING, ClusterReason.ROLL_WAITING_FOR_ISR,
                             f"rolling update: waiting for full ISRs ({len(under)} under-replicated, e.g. "
                             f"{p.topic}-{p.partition} ISR {list(p.isr)} of replicas {list(p.replicas)})")
        led = _partitions_led(observed.partitions, victim.ordinal)
        if led and not drained:
            actions.append(MoveLeadership(victim.ordinal))
            return _plan(spec, observed, actions, Phase.ROLLING, ClusterReason.MOVING_LEADERSHIP,
                         f"rolling update: moving leadership of {led} partition(s) off broker {victim.ordinal} "
                         f"before restarting {victim.name}")
        actions.append(DeletePod(victim.name, victim.ordinal))
        note = "" if observed.partitions is not None else " (ISRs not checked: no controller view)"
        return _plan(spec, observed, actions, Phase.ROLLING, ClusterReason.ROLLING,
                     f"rolling update: restarting {victim.name}, {len(outdated) - 1} more to go{note}")

    # 5. readiness and scale-up rebalance
    ready_count = sum(1 for p in pods if p.ready)
    if ready_count < spec.brokers or len(pods) < replicas:
        missing = [Names.of(spec).pod(i) for i in range(replicas)
                   if not any(p.ordinal == i and p.ready for p in pods)]
        reason, message = waiting or (ClusterReason.WAITING_FOR_BROKERS, "")
        detail = f"{ready_count}/{spec.brokers} brokers ready; waiting for {', '.join(missing[:3])}"
        return _plan(spec, observed, actions, phase if waiting else Phase.CREATING,
                     reason, f"{message}: {detail}" if message else detail)
    if observed.partitions:
        hosting = {b for p in observed.partitions for b in p.replicas}
        empty = tuple(p.ordinal for p in pods if p.ordinal not in hosting)
        total = sum(len(p.replicas) for p in observed.partitions)
        if empty and total >= len(pods):  # each broker's fair share is at least one replica
            actions.append(Rebalance(empty))
            # Serving while replicas move: Ready stays True, the reason says what happens.
            return _plan(spec, observed, actions, Phase.SCALING, ClusterReason.REBALANCING,
                         f"{ready_count}/{spec.brokers} brokers ready; moving a fair share of replicas "
                         f"to broker(s) {list(empty)}", ok=True)
    return _plan(spec, observed, actions, Phase.RUNNING, ClusterReason.READY,
                 f"{ready_count}/{spec.brokers} brokers ready", ok=True)
