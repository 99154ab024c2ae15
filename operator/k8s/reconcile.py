"""What to do next for a TinyStreamCluster: `plan_cluster(spec, status, observed) -> ClusterPlan`.

Pure: cluster_reconciler.py observes (owned objects, broker pods, the controller's
partition view), calls `plan_cluster`, executes the actions, writes the
status, and calls again after `requeue_after` seconds or on the next event.
Each call does at most one risky step (delete one pod, shrink by the drained
brokers), so a plan never has to be undone; the next call sees its effect.

The decision is a fixed sequence of named pure steps (as Strimzi's
KafkaReconciler, without its inline I/O); the first one that cannot go on
ends the pass with the reason that becomes the Ready condition:

1. check_config: broker config that the broker would refuse -> nothing is
   changed, the condition says which key (InvalidBrokerConfig). A bad config
   never rolls. The same for a pod template that sets a label or annotation
   of the operator's (InvalidPodTemplate, pod_template.py).
2. plan_scale: replicas of the StatefulSet:
   - no StatefulSet yet: spec.brokers;
   - scale up: spec.brokers at once; new brokers get a fair share of replicas
     (Rebalance) once they are ready;
   - scale down: refused while a topic's replication factor exceeds the new
     count (ScaleDownBlocked); otherwise replicas are moved off the removed
     (highest-ordinal) brokers first (DrainBrokers, ScaleDownDraining), and
     the StatefulSet shrinks only when they hold none.
3. plan_owned_objects: owned objects whose desired fields differ from the
   observed ones are applied (create-or-patch), spec.schemaRegistry's too
   (schema_registry.py); a disabled dashboard's Service, external Services no
   listener needs and a removed schema registry's objects are deleted. plan_volumes
   (volume_expansion.py): a larger volume size expands its claims (each volume
   of spec.storage.volumes alone; volumes added or removed on a running cluster
   change nothing, VolumesChanged), and the StatefulSet (claim templates are
   immutable) is deleted with orphan propagation and re-created on the next
   pass; the pass stops meanwhile (ResizingStorage). Then wait_for_external_addresses, wait_for_statefulset
   and hold_scale_down stop the pass while an external listener's address is
   not known (the brokers' config waits for it), the StatefulSet is new or a
   scale-down is blocked or draining.
4. plan_roll: rolling update (the StatefulSet is OnDelete): one broker at a
   time, highest ordinal first, only when every broker is ready and every ISR
   is full; a broker that leads partitions first hands leadership away
   (MoveLeadership), then its pod is deleted. The drain takes it out of every
   ISR and its readiness, so from then on the checks look past that broker.
5. wait_for_brokers, plan_rebalance: every broker ready; brokers that host no
   replica get a fair share; else Ready.
6. cluster_status, status_conditions: the status fields, the Ready,
   Secure and StorageResized conditions.

Without a controller view (`observed.partitions is None`, the controller core
not attached), the ISR checks cannot be made: rolls then wait for pod
readiness only, and scale-down is refused, both said in the condition.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinystream.operator.k8s.conditions import (
    ClusterReason,
    Condition,
    StorageReason,
    merge_condition,
    ready,
    secure_condition,
)
from tinystream.operator.k8s.external import ExternalAddresses, advertised_addresses, stale_services
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext, PartitionView, StorageVolume
from tinystream.operator.k8s.rack import RACK_BINDING, binding_name
from tinystream.operator.k8s.resources import (
    Names,
    broker_config_problems,
    label_selector_string,
    owned_objects,
    serves_dashboard,
)
from tinystream.operator.k8s.schema_registry import registry_objects, stale_registry_keys
from tinystream.operator.k8s.volume_expansion import (
    Claim,
    ExpandClaim,
    StorageClassView,
    StoragePlan,
    combine,
    plan_storage,
    volumes_changed,
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
    claims: tuple[Claim, ...] = ()  # the brokers' data claims
    storage_classes: Mapping[str, StorageClassView] = field(default_factory=dict)  # the claims' classes, by name

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
class OrphanStatefulSet:
    """Delete the StatefulSet with propagationPolicy Orphan: its pods and claims stay (volume_expansion.py)."""

    name: str


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
class EndScaleDownDrain:
    """Brokers a node pool holds again (an id a pool scale-down removed, given out anew): the scale-down's
    lasting drain, which a restart keeps, ends; ids not drained that way are left as they are."""

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


Action = (Apply | Delete | DeletePod | MoveLeadership | DrainBrokers | Rebalance | EndRollDrain | ExpandClaim
          | OrphanStatefulSet)


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    actions: tuple[Action, ...]
    phase: Phase
    condition: Condition
    status: dict[str, Any]  # every status field but conditions
    requeue_after: float | None = None
    storage: Condition | None = None  # StorageResized; None: not decided in this pass (invalid config)


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


def cluster_status(spec: ClusterSpec, observed: Observed, phase: Phase) -> dict[str, Any]:
    """6. Every status field but conditions: the phase, one entry per broker, the controller's counts."""
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


@dataclass(frozen=True, slots=True)
class End:
    """Where a pass stops: the phase, the Ready condition's reason and message, and when to look again."""

    phase: Phase
    reason: ClusterReason
    message: str
    ok: bool = False  # Ready=True: nothing to wait for, no requeue
    requeue: float | None = WAIT_S


@dataclass(frozen=True, slots=True)
class Step:
    """What one planning step adds: actions, and an End when the pass stops there."""

    actions: tuple[Action, ...] = ()
    end: End | None = None


@dataclass(frozen=True, slots=True)
class Scale:
    """The scale step's decision: the StatefulSet's replicas in this pass, the phase, what it waits for."""

    replicas: int
    phase: Phase
    waiting: tuple[ClusterReason, str] | None = None
    actions: tuple[Action, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterPass:
    """What the steps after the owned objects read: the inputs and the decisions made so far."""

    spec: ClusterSpec
    observed: Observed
    scale: Scale
    sts_changing: bool  # the owned objects apply a new StatefulSet

    @property
    def pods(self) -> list[BrokerPod]:
        """The pods of the brokers kept in this pass, by ordinal."""
        return sorted((p for p in self.observed.pods if p.ordinal < self.scale.replicas), key=lambda p: p.ordinal)


def _plan(spec: ClusterSpec, observed: Observed, actions: Sequence[Action], end: End,
          storage: StoragePlan | None = None) -> ClusterPlan:
    return ClusterPlan(tuple(actions), end.phase, ready(end.ok, end.reason, end.message, generation=spec.generation),
                       cluster_status(spec, observed, end.phase), None if end.ok else end.requeue,
                       storage.condition if storage is not None else None)


# --- the steps, in order ------------------------------------------------------------------

def check_config(spec: ClusterSpec) -> End | None:
    """1. Broker config the broker would refuse: change nothing (a bad config never rolls)."""
    problems = broker_config_problems(spec.config)
    if not problems:
        return None
    return End(Phase.FAILED, ClusterReason.INVALID_BROKER_CONFIG,
               "spec.config would stop the brokers, nothing was changed: " + "; ".join(problems), requeue=None)


def check_pod_template(spec: ClusterSpec) -> End | None:
    """1. A pod template that would take a key of the operator's (the CRD refuses it first): change nothing."""
    problems = [f"spec.template.pod {p}" for p in spec.pod_template.problems()]
    if spec.schema_registry is not None:
        problems += [f"spec.schemaRegistry.template.pod {p}" for p in spec.schema_registry.pod_template.problems()]
    if not problems:
        return None
    return End(Phase.FAILED, ClusterReason.INVALID_POD_TEMPLATE,
               "a pod template cannot be used, nothing was changed: " + "; ".join(problems), requeue=None)


def plan_scale(spec: ClusterSpec, observed: Observed) -> Scale:
    """2. The StatefulSet's replicas: spec.brokers when new or growing; shrinking only once drained."""
    sts = observed.statefulset(spec)
    current = int((sts or {}).get("spec", {}).get("replicas", 0)) if sts else None
    phase = Phase.CREATING if sts is None else Phase.RUNNING
    if current is None or spec.brokers == current:
        return Scale(spec.brokers if current is None else current, phase)
    if spec.brokers > current:
        return Scale(spec.brokers, Phase.SCALING,
                     (ClusterReason.SCALING_UP, f"scaling up from {current} to {spec.brokers} brokers"))
    return _plan_scale_down(spec, observed, current, phase)


def _plan_scale_down(spec: ClusterSpec, observed: Observed, current: int, phase: Phase) -> Scale:
    removed = set(range(spec.brokers, current))
    names = ", ".join(Names.of(spec).pod(i) for i in sorted(removed))
    if observed.max_replication_factor > spec.brokers:
        return Scale(current, phase, (ClusterReason.SCALE_DOWN_BLOCKED,
                     f"cannot scale down to {spec.brokers} brokers: a topic has replicationFactor "
                     f"{observed.max_replication_factor}; lower it or keep {current} brokers"))
    if observed.partitions is None:
        return Scale(current, phase, (ClusterReason.SCALE_DOWN_BLOCKED,
                     f"cannot scale down to {spec.brokers} brokers: the controller's partition view is "
                     f"unavailable, so replicas on {names} cannot be moved safely"))
    if hosted := _hosted(observed.partitions, removed):
        return Scale(current, Phase.SCALING, (ClusterReason.SCALE_DOWN_DRAINING,
                     f"moving {len(hosted)} partition replica set(s) off {names} before scaling down"),
                     (DrainBrokers(tuple(sorted(removed))),))
    return Scale(spec.brokers, Phase.SCALING,
                 (ClusterReason.SCALING_DOWN, f"scaling down from {current} to {spec.brokers} brokers"))


def external_addresses(spec: ClusterSpec, observed: Observed, *, replicas: int) -> ExternalAddresses:
    """The brokers' external addresses from the observed external Services (external.py)."""
    services = {name: obj for (kind, name), obj in observed.objects.items() if kind == "Service"}
    return advertised_addresses(spec, services, replicas=replicas)


def broker_statefulset_key(spec: ClusterSpec) -> tuple[str, str]:
    """(kind, name) of the brokers' StatefulSet: the registry's StatefulSet is none of the steps' business."""
    return "StatefulSet", Names.of(spec).statefulset


def plan_owned_objects(spec: ClusterSpec, observed: Observed, ctx: OperatorContext, *,
                       replicas: int) -> tuple[Action, ...]:
    """3. Apply the owned objects that differ from the observed ones; delete a disabled dashboard's Service
    and the external Services no listener needs. While an external address is not known yet (a Service
    just made, a load balancer not provisioned) the ConfigMap and the StatefulSet wait: brokers restart
    once, with every address."""
    actions: list[Action] = []
    addresses = external_addresses(spec, observed, replicas=replicas)
    registry = registry_objects(spec, image=spec.image or ctx.broker_image)
    brokers = broker_statefulset_key(spec)
    for obj in [*owned_objects(spec, ctx, replicas=replicas, addresses=addresses), *registry]:
        key = (obj["kind"], obj["metadata"]["name"])
        if addresses.waiting and key in (("ConfigMap", Names.of(spec).config), brokers):
            continue
        existing = observed.objects.get(key)
        if key == brokers and existing is not None:
            # Claim templates are immutable; keep the existing ones (resizing is a PVC expansion).
            obj["spec"]["volumeClaimTemplates"] = existing.get("spec", {}).get(
                "volumeClaimTemplates", obj["spec"]["volumeClaimTemplates"])
        if existing is None or differs(obj, existing):
            actions.append(Apply(obj, create=existing is None))
    if not serves_dashboard(spec, ctx) and ("Service", Names.of(spec).dashboard) in observed.objects:
        actions.append(Delete("v1", "Service", Names.of(spec).dashboard))
    binding = binding_name(spec.namespace, spec.name)
    if not spec.rack_topology_key and (RACK_BINDING[1], binding) in observed.objects:  # spec.rack removed
        actions.append(Delete(*RACK_BINDING, binding))
    # spec.schemaRegistry removed: its objects go; the Deployment of earlier releases goes (schema_registry.py)
    actions += [Delete(*key) for key in stale_registry_keys(spec, observed.objects.keys())]
    actions += [Delete("v1", "Service", name) for name in stale_services(spec, observed.objects.values(),
                                                                         replicas=replicas)]
    return tuple(actions)


def template_sizes(statefulset: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The StatefulSet's claim templates, name -> size; None without a StatefulSet."""
    if statefulset is None:
        return None
    return {str(claim["metadata"]["name"]): str(claim["spec"]["resources"]["requests"]["storage"])
            for claim in statefulset.get("spec", {}).get("volumeClaimTemplates") or ()}


def plan_volumes(spec: ClusterSpec, observed: Observed, scale: Scale) -> StoragePlan:
    """3b. A larger volume size: expand the claims, re-create the StatefulSet (volume_expansion.py), per volume."""
    sts = observed.statefulset(spec)
    current = int(sts.get("spec", {}).get("replicas", 0)) if sts is not None else None
    volumes = spec.storage_volumes
    changed = volumes_changed(wanted=[v.claim for v in volumes], templates=template_sizes(sts),
                              generation=spec.generation)
    if changed is not None:
        return changed
    if sts is not None and (sts.get("metadata") or {}).get("deletionTimestamp"):
        sts = None  # going already (hold_for_new_template waits): its template is not deleted twice
    return plan_volume_sizes(volumes, claims=observed.claims, templates=template_sizes(sts) or {},
                             storage_classes=observed.storage_classes, replicas=max(scale.replicas, spec.brokers),
                             scaling=current is not None and current != spec.brokers, generation=spec.generation)


def plan_volume_sizes(volumes: Sequence[StorageVolume], *, claims: Sequence[Claim], templates: Mapping[str, str],
                      storage_classes: Mapping[str, StorageClassView], replicas: int, scaling: bool,
                      generation: int, where: str = "spec.storage") -> StoragePlan:
    """Each volume planned over its own claims and StorageClass (volume_expansion.plan_storage), then one plan:
    the cluster's StatefulSet's (plan_volumes) or a node pool's (node_pools.plan_pool_storage, whose sizes
    may come from `where`, the cluster's spec.storage)."""
    plans = []
    for volume in volumes:
        mine = [c for c in claims if c.volume == volume.claim]
        class_name = next((c.storage_class for c in mine if c.storage_class), volume.storage_class)
        plans.append((f"volume {volume.id}", plan_storage(
            size=volume.size, claims=mine, replicas=replicas, template_size=templates.get(volume.claim),
            storage_class=storage_classes.get(class_name or ""), class_name=class_name, scaling=scaling,
            generation=generation, field=volume.field.replace("spec.storage", where, 1))))
    return combine(plans)


def sizes(spec: ClusterSpec) -> str:
    """The volumes' sizes for messages: "10Gi", or "10Gi (volume 0), 20Gi (volume 1)"."""
    if not spec.volumes:
        return spec.storage_size
    return ", ".join(f"{v.size} (volume {v.id})" for v in spec.volumes)


def hold_for_changed_volumes(storage: StoragePlan) -> End | None:
    """Volumes added or removed on a running cluster: change nothing at all (the ConfigMap's log.dirs would
    name a directory no pod mounts); the StorageResized condition says why."""
    if storage.condition.reason != StorageReason.VOLUMES_CHANGED.value:
        return None
    return End(Phase.FAILED, ClusterReason.VOLUMES_CHANGED, storage.condition.message, requeue=None)


def hold_for_new_template(spec: ClusterSpec, observed: Observed, storage: StoragePlan) -> End | None:
    """The StatefulSet is deleted (orphaning its pods) or still going: stop the pass until it is re-created."""
    sts = observed.statefulset(spec)
    name = Names.of(spec).statefulset
    if storage.recreate_statefulset:
        return End(Phase.RUNNING, ClusterReason.RESIZING_STORAGE,
                   f"re-creating StatefulSet {name} with claims of {sizes(spec)}; its pods keep running")
    if sts is not None and (sts.get("metadata") or {}).get("deletionTimestamp"):
        return End(Phase.RUNNING, ClusterReason.RESIZING_STORAGE,
                   f"waiting for StatefulSet {name} to go (orphan deletion) before re-creating it")
    return None


def wait_for_statefulset(p: ClusterPass) -> Step:
    """No StatefulSet yet: the owned objects create it, and the pass stops."""
    if p.observed.statefulset(p.spec) is not None:
        return Step()
    if p.observed.pods:  # re-created (a larger claim template, or deleted by hand): it adopts the pods
        return Step(end=End(Phase.CREATING, ClusterReason.CREATING,
                            f"creating the StatefulSet; it adopts the {len(p.observed.pods)} broker pod(s) there"))
    return Step(end=End(Phase.CREATING, ClusterReason.CREATING, f"creating {p.spec.brokers} broker(s)"))


def wait_for_external_addresses(p: ClusterPass) -> Step:
    """An external listener's address not known yet: the brokers' config waits for it (plan_owned_objects)."""
    waiting = external_addresses(p.spec, p.observed, replicas=p.scale.replicas).waiting
    if not waiting:
        return Step()
    return Step(end=End(p.scale.phase, ClusterReason.WAITING_FOR_EXTERNAL_ADDRESSES, waiting_message(waiting)))


def waiting_message(waiting: Sequence[str]) -> str:
    """The WaitingForExternalAddresses message: the first three Services without an address, and a count."""
    return (f"external listeners: waiting for {', '.join(waiting[:3])}"
            + (f" and {len(waiting) - 3} more" if len(waiting) > 3 else ""))


def hold_scale_down(p: ClusterPass) -> Step:
    """A scale-down that is blocked or still draining stops the pass: nothing rolls meanwhile."""
    waiting = p.scale.waiting
    if waiting is None or waiting[0] not in (ClusterReason.SCALE_DOWN_BLOCKED, ClusterReason.SCALE_DOWN_DRAINING):
        return Step()
    blocked = waiting[0] is ClusterReason.SCALE_DOWN_BLOCKED
    return Step(end=End(Phase.DEGRADED if blocked else p.scale.phase, *waiting))


def plan_roll(p: ClusterPass) -> Step:
    """4. Rolling update, one broker at a time (highest ordinal first), only over full ISRs."""
    pods = p.pods
    sts = p.observed.statefulset(p.spec) or {}
    update_revision = (sts.get("status") or {}).get("updateRevision")
    outdated = [q for q in pods if update_revision and q.revision and q.revision != update_revision]
    if outdated:
        return roll_one(p, pods, outdated)
    # A roll undone before its victim restarted leaves no broker drained for good.
    ended = tuple(EndRollDrain(q.ordinal) for q in pods
                  if q.ordinal in p.observed.drained_for_roll and not q.terminating)
    if not p.sts_changing:
        return Step(ended)
    # The new template makes a new revision; the next pass sees which pods are outdated.
    waiting = p.scale.waiting
    reason, message = waiting or (ClusterReason.ROLLING, "applying the new broker template")
    return Step(ended, End(p.scale.phase if waiting else Phase.ROLLING, reason, message))


def roll_one(p: ClusterPass, pods: Sequence[BrokerPod], outdated: Sequence[BrokerPod]) -> Step:
    observed = p.observed
    victim = outdated[-1]  # highest ordinal first, as the StatefulSet controller would
    # Once its leadership moved away, the victim has left every ISR (KIP-841) and reports not
    # ready: that is the roll's own doing, so the checks below look past it and it restarts next.
    drained = victim.ordinal in observed.drained_for_roll
    excused = {victim.ordinal} if drained else set()
    # A terminating victim is not excused: its deletion is under way, wait for the new pod.
    not_ready = [q for q in pods if (not q.ready and q.ordinal not in excused) or q.terminating]
    if not_ready:
        return Step(end=End(Phase.ROLLING, ClusterReason.ROLL_WAITING_FOR_POD,
                            f"rolling update: waiting for {not_ready[0].name} to be ready "
                            f"({len(outdated)} broker(s) still to restart)"))
    under = [q for q in observed.partitions or () if set(q.replicas) - set(q.isr) - excused]
    if under:
        u = under[0]
        return Step(end=End(Phase.ROLLING, ClusterReason.ROLL_WAITING_FOR_ISR,
                            f"rolling update: waiting for full ISRs ({len(under)} under-replicated, e.g. "
                            f"{u.topic}-{u.partition} ISR {list(u.isr)} of replicas {list(u.replicas)})"))
    led = _partitions_led(observed.partitions, victim.ordinal)
    if led and not drained:
        return Step((MoveLeadership(victim.ordinal),), End(
            Phase.ROLLING, ClusterReason.MOVING_LEADERSHIP,
            f"rolling update: moving leadership of {led} partition(s) off broker {victim.ordinal} "
            f"before restarting {victim.name}"))
    note = "" if observed.partitions is not None else " (ISRs not checked: no controller view)"
    return Step((DeletePod(victim.name, victim.ordinal),), End(
        Phase.ROLLING, ClusterReason.ROLLING,
        f"rolling update: restarting {victim.name}, {len(outdated) - 1} more to go{note}"))


def wait_for_brokers(p: ClusterPass) -> Step:
    """5. Every broker ready (the scale step's reason first, when it waits for one)."""
    pods, replicas, spec = p.pods, p.scale.replicas, p.spec
    ready_count = sum(1 for q in pods if q.ready)
    if ready_count >= spec.brokers and len(pods) >= replicas:
        return Step()
    missing = [Names.of(spec).pod(i) for i in range(replicas) if not any(q.ordinal == i and q.ready for q in pods)]
    waiting = p.scale.waiting
    reason, message = waiting or (ClusterReason.WAITING_FOR_BROKERS, "")
    detail = f"{ready_count}/{spec.brokers} brokers ready; waiting for {', '.join(missing[:3])}"
    return Step(end=End(p.scale.phase if waiting else Phase.CREATING, reason,
                        f"{message}: {detail}" if message else detail))


def plan_rebalance(p: ClusterPass) -> Step:
    """6. Brokers that host no replica get a fair share (after a scale-up); else the cluster is Ready."""
    pods, observed = p.pods, p.observed
    ready_count = sum(1 for q in pods if q.ready)
    if observed.partitions:
        hosting = {b for q in observed.partitions for b in q.replicas}
        empty = tuple(q.ordinal for q in pods if q.ordinal not in hosting)
        total = sum(len(q.replicas) for q in observed.partitions)
        if empty and total >= len(pods):  # each broker's fair share is at least one replica
            # Serving while replicas move: Ready stays True, the reason says what happens.
            return Step((Rebalance(empty),), End(
                Phase.SCALING, ClusterReason.REBALANCING,
                f"{ready_count}/{p.spec.brokers} brokers ready; moving a fair share of replicas "
                f"to broker(s) {list(empty)}", ok=True))
    return Step(end=End(Phase.RUNNING, ClusterReason.READY, f"{ready_count}/{p.spec.brokers} brokers ready",
                        ok=True))


# After the owned objects, in order; the first End stops the pass. The last step always ends it.
STEPS = (wait_for_external_addresses, wait_for_statefulset, hold_scale_down, plan_roll, wait_for_brokers,
         plan_rebalance)


# --- the decision -------------------------------------------------------------------------

def plan_cluster(spec: ClusterSpec, status: Mapping[str, Any] | None, observed: Observed, *,
                 ctx: OperatorContext) -> ClusterPlan:
    """The next step for `spec`, given the last `status` written and what is `observed` now."""
    del status  # the decision uses only what is observed now; status is its output
    invalid = check_config(spec) or check_pod_template(spec)
    if invalid is not None:
        return _plan(spec, observed, (), invalid)
    if spec.node_pools:
        return plan_with_pools(spec, observed, ctx)
    scale = plan_scale(spec, observed)
    storage = plan_volumes(spec, observed, scale)
    refused = hold_for_changed_volumes(storage)
    if refused is not None:
        return _plan(spec, observed, (), refused, storage)
    owned = plan_owned_objects(spec, observed, ctx, replicas=scale.replicas)
    held = hold_for_new_template(spec, observed, storage)
    if held is not None:  # no StatefulSet update in this pass: it is (being) deleted
        owned = tuple(a for a in owned if not (isinstance(a, Apply) and a.key == broker_statefulset_key(spec)))
    actions: list[Action] = [*scale.actions, *owned, *storage.expand]
    if storage.recreate_statefulset:
        actions.append(OrphanStatefulSet(Names.of(spec).statefulset))
    if held is not None:
        return _plan(spec, observed, actions, held, storage)
    sts_changing = any(isinstance(a, Apply) and a.key == broker_statefulset_key(spec) for a in owned)
    current = ClusterPass(spec, observed, scale, sts_changing)
    for step in STEPS:
        result = step(current)
        actions += result.actions
        if result.end is not None:
            return _plan(spec, observed, actions, result.end, storage)
    raise AssertionError("plan_rebalance always ends the pass")


def plan_with_pools(spec: ClusterSpec, observed: Observed, ctx: OperatorContext) -> ClusterPlan:
    """tinystream.io/node-pools: enabled: the shared objects only (config, Services, budget); the brokers'
    StatefulSets, their scaling, ids, rolls (a CA rotation's too: node_pools.with_ca_markers) and volume
    expansion are the TinyStreamNodePools' (node_pools.py). External listeners: a Service per pool broker
    (spec.pool_brokers), and the ConfigMap waits for every address as without pools. The cluster's own
    StatefulSet from before pools, still running and adopted by no pool `broker`, is BrokersNotAdopted."""
    owned = plan_owned_objects(spec, observed, ctx, replicas=0)
    waiting = external_addresses(spec, observed, replicas=0).waiting
    if waiting:
        return _plan(spec, observed, owned, End(Phase.CREATING, ClusterReason.WAITING_FOR_EXTERNAL_ADDRESSES,
                                                waiting_message(waiting)))
    sts = observed.objects.get(broker_statefulset_key(spec))
    own = f"{Names.of(spec).statefulset}-"  # its pods, <cluster>-broker-<n>; not pool broker-a's -broker-a-<n>
    if sts is not None and int((sts.get("spec") or {}).get("replicas") or 0) > 0 \
            and not any(pod.startswith(own) and pod[len(own):].isdigit() for _, pod in spec.pool_brokers):
        return _plan(spec, observed, owned, End(
            Phase.RUNNING, ClusterReason.BROKERS_NOT_ADOPTED,
            f"StatefulSet {Names.of(spec).statefulset} (the brokers from before node pools) still runs and no pool "
            "manages it: create the TinyStreamNodePool named broker with its replicas to adopt it"))
    ready_count = sum(1 for p in observed.pods if p.ready)
    return _plan(spec, observed, owned, End(Phase.RUNNING, ClusterReason.NODE_POOLS,
                                            f"brokers run in node pools: {ready_count}/{len(observed.pods)} "
                                            "ready", ok=True))


def status_conditions(spec: ClusterSpec, plan: ClusterPlan,
                      previous: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """7. The status conditions after a pass: Ready and StorageResized from the plan, Secure from spec's opt-outs."""
    conditions = merge_condition(previous, plan.condition)
    if plan.storage is not None:
        conditions = merge_condition(conditions, plan.storage)
    return merge_condition(conditions, secure_condition(spec.insecure, generation=spec.generation))
