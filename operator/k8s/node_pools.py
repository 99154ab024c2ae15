"""TinyStreamNodePool: a group of a cluster's brokers with its own StatefulSet (as Strimzi's KafkaNodePool).

A pool names its cluster by the label `tinystream.io/cluster`; the cluster uses pools only with the
annotation `tinystream.io/node-pools: enabled` (Strimzi's strimzi.io/node-pools), and then makes no
StatefulSet of its own. For pool `fast` of cluster `demo`:

    StatefulSet  demo-fast           spec.replicas pods demo-fast-<ordinal>, under the cluster's headless
                                     Service (DNS demo-fast-N.demo-brokers.ns.svc: the broker certificate's
                                     wildcard *.demo-brokers.ns.svc names it), the cluster's broker.toml
    ConfigMap    demo-fast-ids       node-ids: one "<ordinal> <broker id>" line per pod

Broker ids are the operator's, kept in the pool's status.nodeIds, one per ordinal and ascending: a pod's
id is nodeIds[ordinal]. Growing appends ids above the pool's largest, unused by the cluster's other pools
(within the `tinystream.io/next-node-ids` ranges when given); shrinking drops the last ones, so a
scale-down removes the pool's highest ids, and a surviving pod never changes its id. The ids file is not
in the pod template (a scale-up rolls nothing); the broker container's start reads its own line
(ID_SCRIPT) into TINYSTREAM_BROKER_ID.

Moving an existing cluster into pools (Strimzi's KafkaNodePool named after the old StatefulSet): the pool
named `broker` (ADOPTING_POOL) adopts StatefulSet <cluster>-broker, the cluster's own from before pools.
Its ids are its pods' ordinals, as they were (0..n-1), and its StatefulSet is rendered exactly as the
cluster rendered it (resources.statefulset, no pool label, no ids file): same claims, nothing re-created,
no pod restarted unless the pool changes resources, template or config. It must start with the cluster's
replicas (adoption_problem); afterwards it scales like any pool, a growth only onto ids no pool holds.

Scale-down is the cluster's path (reconcile._plan_scale_down): the replicas on the removed ids are moved
off first (DrainBrokers, through the controller), the StatefulSet shrinks only when they hold none.
Everything here is pure; pool_reconciler.py observes and acts.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tinystream.operator.k8s.ca_lifecycle import CLIENTS, CLUSTER, CaKind, CaState, marker
from tinystream.operator.k8s.conditions import ClusterReason, Condition, PoolReason, StorageReason, ready
from tinystream.operator.k8s.model import (
    GROUP,
    NODE_POOLS_ANNOTATION,
    ClusterSpec,
    OperatorContext,
    PartitionView,
    StorageVolume,
    parse_volumes,
)
from tinystream.operator.k8s.pod_template import PodTemplate
from tinystream.operator.k8s.reconcile import (
    BrokerPod,
    ClusterPass,
    DeletePod,
    DrainBrokers,
    EndScaleDownDrain,
    MoveLeadership,
    Observed,
    Phase,
    Scale,
    plan_volume_sizes,
    roll_one,
    template_sizes,
)
from tinystream.operator.k8s.resources import (
    CONFIG_DIR,
    CONFIG_FILE,
    config_hash,
    config_map,
    labels,
    log_dir,
    owner_reference,
    statefulset,
)
from tinystream.operator.k8s.volume_expansion import (
    Claim,
    ExpandClaim,
    StorageClassView,
    StoragePlan,
    volumes_changed,
)

CLUSTER_LABEL = f"{GROUP}/cluster"
POOL_LABEL = f"{GROUP}/pool"
NEXT_NODE_IDS_ANNOTATION = f"{GROUP}/next-node-ids"
ADOPTING_POOL = "broker"  # StatefulSet <cluster>-broker: the cluster's own before pools, which this pool adopts
IDS_MOUNT = "/etc/tinystream-ids"
IDS_FILE = "node-ids"
MAX_NODE_ID = 2**31 - 1  # Kafka's node.id is an int32

#: The start of a pool broker's container: its own line of the ids file becomes TINYSTREAM_BROKER_ID (a pod
#: whose line is not there yet exits; the kubelet restarts it once the ConfigMap has it).
ID_SCRIPT = """\
ordinal="${{POD_NAME##*-}}"
TINYSTREAM_BROKER_ID=""
while read -r o id; do
  if [ "$o" = "$ordinal" ]; then TINYSTREAM_BROKER_ID="$id"; fi
done < "{file}"
if [ -z "$TINYSTREAM_BROKER_ID" ]; then echo "no broker id for $POD_NAME in {file}" >&2; exit 1; fi
export TINYSTREAM_BROKER_ID
"""


class NodeIdsError(ValueError):
    """The next-node-ids annotation cannot be read, or it leaves no id to give."""


@dataclass(frozen=True, slots=True)
class PoolSpec:
    name: str
    namespace: str
    uid: str
    cluster: str  # the tinystream.io/cluster label; "" when missing
    replicas: int
    generation: int = 1
    storage: Mapping[str, Any] | None = None  # spec.storage, as the cluster's; None: the cluster's
    resources: Mapping[str, Any] | None = None
    pod: Mapping[str, Any] | None = None  # spec.template.pod; None: the cluster's
    node_ids: tuple[int, ...] = ()  # status.nodeIds
    next_node_ids: str = ""

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> PoolSpec:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        return cls(name=meta["name"], namespace=meta.get("namespace") or "default", uid=meta.get("uid") or "",
                   cluster=str((meta.get("labels") or {}).get(CLUSTER_LABEL) or ""),
                   replicas=int(spec.get("replicas", 0)), generation=int(meta.get("generation") or 1),
                   storage=spec.get("storage"), resources=spec.get("resources"),
                   pod=(spec.get("template") or {}).get("pod"),
                   node_ids=tuple(int(i) for i in (body.get("status") or {}).get("nodeIds") or ()),
                   next_node_ids=str((meta.get("annotations") or {}).get(NEXT_NODE_IDS_ANNOTATION) or ""))


def statefulset_name(cluster: str, pool: str) -> str:
    return f"{cluster}-{pool}"


def ids_name(cluster: str, pool: str) -> str:
    return f"{cluster}-{pool}-ids"


def pod_name(cluster: str, pool: str, ordinal: int) -> str:
    return f"{statefulset_name(cluster, pool)}-{ordinal}"


def pod_ids(cluster: str, pool: PoolSpec, node_ids: Sequence[int]) -> dict[str, int]:
    """Pod name -> broker id, for each of `node_ids` by ordinal."""
    return {pod_name(cluster, pool.name, ordinal): broker_id for ordinal, broker_id in enumerate(node_ids)}


def pool_pod_ids(cluster: str, pools: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Every pool pod of `cluster` and its broker id, from the pools' status.nodeIds (who a token's pod is)."""
    found: dict[str, int] = {}
    for body in pools:
        pool = PoolSpec.from_resource(body)
        if pool.cluster == cluster:
            found.update(pod_ids(cluster, pool, pool.node_ids))
    return found


def pool_members(cluster: str, pools: Sequence[Mapping[str, Any]]) -> frozenset[int]:
    """The broker ids `cluster`'s pools keep: each pool's status.nodeIds up to its spec.replicas (the ids past
    it are leaving, drained by the pool's scale-down). What a TinyStreamRebalance may place replicas on."""
    found: set[int] = set()
    for body in pools:
        pool = PoolSpec.from_resource(body)
        if pool.cluster == cluster:
            found.update(pool.node_ids[:pool.replicas])
    return frozenset(found)


def other_pools(pools: Sequence[Mapping[str, Any]], *, uid: str) -> tuple[frozenset[int], int]:
    """(the ids, the brokers) the cluster's pools other than `uid` hold: status.nodeIds, and the lower of
    spec and status replicas (a pool shrinking at the same time counts at its smaller size)."""
    ids: set[int] = set()
    brokers = 0
    for body in pools:
        if (body.get("metadata") or {}).get("uid") == uid:
            continue
        pool = PoolSpec.from_resource(body)
        ids.update(pool.node_ids)
        brokers += min(pool.replicas, int((body.get("status") or {}).get("replicas", 0)))
    return frozenset(ids), brokers


def pool_brokers(pools: Sequence[Mapping[str, Any]], cluster: str) -> int:
    """How many brokers a pool cluster asks for: its pools' replicas (a Topic's replicationFactor limit)."""
    return sum(p.replicas for p in map(PoolSpec.from_resource, pools) if p.cluster == cluster)


def pool_broker_pods(pods: Sequence[Mapping[str, Any]], ids: Mapping[str, int]) -> tuple[BrokerPod, ...]:
    """The cluster's view of its pool pods: each as a BrokerPod whose `ordinal` is its broker id (what the
    cluster's status and checks read as the id); a pod no pool's status names yet is left out."""
    return tuple(dataclasses.replace(BrokerPod.from_pod(p), ordinal=ids[p["metadata"]["name"]])
                 for p in pods if p["metadata"]["name"] in ids)


# --- broker ids ---------------------------------------------------------------------------

def id_ranges(text: str) -> list[range]:
    """`tinystream.io/next-node-ids`, as Strimzi's: "[1000-1099]", "[5, 7, 10-12]" (ids and inclusive ranges)."""
    body = text.strip()
    if not body:
        return []
    if not (body.startswith("[") and body.endswith("]")):
        raise NodeIdsError(f"{NEXT_NODE_IDS_ANNOTATION} {text!r}: expected a list such as [1000-1099] or [5, 7]")
    ranges = []
    for part in body[1:-1].split(","):
        found = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not found:
            raise NodeIdsError(f"{NEXT_NODE_IDS_ANNOTATION} {text!r}: {part.strip()!r} is not an id or a range")
        low, high = int(found.group(1)), int(found.group(2) or found.group(1))
        if high < low or high > MAX_NODE_ID:
            raise NodeIdsError(f"{NEXT_NODE_IDS_ANNOTATION} {text!r}: range {low}-{high} is empty or too large")
        ranges.append(range(low, high + 1))
    return ranges


def grow_ids(current: Sequence[int], *, wanted: int, taken: Collection[int], next_ids: str = "") -> tuple[int, ...]:
    """`current` with ids appended up to `wanted`: each the lowest free id above the pool's largest (so the
    list stays ascending and a scale-down removes the highest), within `next_ids`' ranges when given."""
    ids = list(current)
    ranges = sorted(id_ranges(next_ids), key=lambda r: r.start) or [range(0, MAX_NODE_ID + 1)]
    used = set(taken) | set(ids)
    for r in ranges:
        candidate = max(r.start, (ids[-1] + 1) if ids else 0)
        while len(ids) < wanted and candidate < r.stop:
            if candidate not in used:
                ids.append(candidate)
                used.add(candidate)
            candidate += 1
    if len(ids) < wanted:
        raise NodeIdsError(f"no free broker id above {ids[-1] if ids else -1} for {wanted - len(ids)} more "
                           f"broker(s) in {next_ids or 'the id space'}")
    return tuple(ids)


# --- the objects --------------------------------------------------------------------------

def pool_cluster(cluster: ClusterSpec, pool: PoolSpec) -> ClusterSpec:
    """The cluster as this pool's brokers see it: the pool's replicas, and its storage, resources and pod
    template where it gives them."""
    changes: dict[str, Any] = {"brokers": pool.replicas}
    if pool.storage is not None:
        changes.update(storage_size=str(pool.storage.get("size") or "10Gi"),
                       storage_class=pool.storage.get("storageClass") or None,
                       delete_claim=bool(pool.storage.get("deleteClaim", False)), volumes=parse_volumes(pool.storage))
    if pool.resources is not None:
        changes["resources"] = dict(pool.resources)
    if pool.pod is not None:
        changes["pod_template"] = PodTemplate.from_spec(pool.pod)
    return dataclasses.replace(cluster, **changes)


def _marker(status: Mapping[str, Any], kind: CaKind) -> str:
    state = CaState.from_status(status)
    return marker(state, kind) if state is not None else ""


def with_ca_markers(cluster: ClusterSpec) -> ClusterSpec:
    """The cluster as read by a pool's pass, with the CA markers its pod template carries: those of the CA
    phases in the cluster's status.clusterCa and status.clientsCa (the cluster's pass, cluster_tls.py, moves
    them), as the cluster's own StatefulSet would carry. A rotation's roll thus reaches every pool, and the
    cluster's pass moves on only once every pool has rolled (ca_lifecycle.pools_rolled_marker)."""
    return dataclasses.replace(cluster, ca_marker=_marker(cluster.ca_status, CLUSTER),
                               clients_ca_marker=_marker(cluster.clients_ca_status, CLIENTS))


def pool_labels(cluster: ClusterSpec, pool: PoolSpec) -> dict[str, str]:
    return {**labels(cluster), POOL_LABEL: pool.name}


def pool_selector(pool: PoolSpec) -> str:
    """The pool's pods, as its scale subresource reports them (status.labelSelector); the adopting pool's
    pods carry no pool label (their template is the cluster's own)."""
    found = {CLUSTER_LABEL: pool.cluster, "app.kubernetes.io/component": "broker"}
    if pool.name != ADOPTING_POOL:
        found[POOL_LABEL] = pool.name
    return ",".join(f"{k}={v}" for k, v in sorted(found.items()))


def ids_config_map(cluster: ClusterSpec, pool: PoolSpec, node_ids: Sequence[int]) -> dict[str, Any]:
    lines = "".join(f"{ordinal} {broker_id}\n" for ordinal, broker_id in enumerate(node_ids))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ids_name(cluster.name, pool.name), "namespace": cluster.namespace,
                         "labels": pool_labels(cluster, pool), "ownerReferences": [owner_reference(cluster)]},
            "data": {IDS_FILE: lines}}


def _pool_container(container: dict[str, Any], volumes: Sequence[StorageVolume]) -> None:
    """The broker container of a pool: its id from the ids file, its own log.dirs (the pool's volumes)."""
    container["env"] = [e for e in container["env"] if e["name"] != "TINYSTREAM_BROKER_ID"]
    container["env"].append({"name": "TINYSTREAM_LOG_DIRS", "value": ",".join(log_dir(v) for v in volumes)})
    start = (container["command"][2] if "command" in container
             else f'exec tinystream broker --config "{CONFIG_DIR}/{CONFIG_FILE}"\n')
    container.pop("args", None)
    container["command"] = ["/bin/sh", "-c", ID_SCRIPT.format(file=f"{IDS_MOUNT}/{IDS_FILE}") + start]
    container["volumeMounts"].append({"name": "node-ids", "mountPath": IDS_MOUNT, "readOnly": True})


def adopted_statefulset(cluster: ClusterSpec, pool: PoolSpec, ctx: OperatorContext, *, replicas: int,
                        config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The adopting pool's StatefulSet: <cluster>-broker exactly as the cluster renders its own (ids are
    ordinals, so no ids file; its selector, immutable, stays the cluster's), with the pool's replicas,
    resources and template (pool_cluster). Unchanged, it changes nothing of the running StatefulSet."""
    spec = pool_cluster(cluster, pool)
    return statefulset(spec, ctx, replicas=replicas, cfg_hash=config_hash(config or config_map(cluster, ctx)))


def pool_objects(cluster: ClusterSpec, pool: PoolSpec, ctx: OperatorContext, ids: Sequence[int], *,
                 replicas: int, config: Mapping[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """What a pass applies, in order: the ids ConfigMap and the pool's StatefulSet; for the adopting pool
    its StatefulSet alone."""
    if pool.name == ADOPTING_POOL:
        return (adopted_statefulset(cluster, pool, ctx, replicas=replicas, config=config),)
    return (ids_config_map(cluster, pool, ids), pool_statefulset(cluster, pool, ctx, replicas=replicas,
                                                                 config=config))


def adoption_problem(cluster: ClusterSpec, pool: PoolSpec, observed: PoolObserved) -> str | None:
    """Why the adopting pool cannot take over (or grow) now, or None. It adopts StatefulSet <cluster>-broker
    only when that exists, and first with the cluster's replicas, so that no broker is added or removed by
    the take-over itself (scale it afterwards: a scale-down drains first). Its ids are its ordinals, so
    it grows only onto ids no other pool holds."""
    sts = statefulset_name(cluster.name, pool.name)
    current = observed.current
    if current is None:
        if not pool.node_ids:
            return (f"pool {ADOPTING_POOL} adopts StatefulSet {sts}, the cluster's own from before node pools, "
                    "and there is none: give a new pool another name")
        current = 0  # adopted already, its StatefulSet made again (volume expansion): its ids stay its own
    if not pool.node_ids and current > 0 and not (pool.replicas == cluster.brokers == current):
        return (f"pool {ADOPTING_POOL} takes over the cluster's brokers as they are: spec.replicas "
                f"{pool.replicas} must equal the cluster's spec.brokers {cluster.brokers} and StatefulSet {sts}'s "
                f"replicas {current}; scale it once adopted")
    clash = sorted(set(range(max(pool.replicas, current))) & observed.taken)
    if clash:
        return (f"pool {ADOPTING_POOL}'s broker ids are its pods' ordinals: id(s) {clash} belong to another "
                f"pool, so it cannot grow to {pool.replicas}")
    return None


def pool_statefulset(cluster: ClusterSpec, pool: PoolSpec, ctx: OperatorContext, *, replicas: int,
                     config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The pool's StatefulSet: the cluster's broker StatefulSet (resources.statefulset) with the pool's
    name, replicas, storage, resources and pod template, its pods labelled with the pool, ids from the file.
    `config`: the cluster's ConfigMap as it is (its hash rolls the pods once it changes, the external
    listeners' addresses included); None: as the spec renders it without external addresses."""
    spec = pool_cluster(cluster, pool)
    sts = statefulset(spec, ctx, replicas=replicas, cfg_hash=config_hash(config or config_map(cluster, ctx)))
    sts["metadata"]["name"] = statefulset_name(cluster.name, pool.name)
    sts["metadata"]["labels"][POOL_LABEL] = pool.name
    sts["spec"]["selector"]["matchLabels"][POOL_LABEL] = pool.name
    template = sts["spec"]["template"]
    template["metadata"]["labels"][POOL_LABEL] = pool.name
    template["spec"]["volumes"].append({"name": "node-ids", "configMap": {"name": ids_name(cluster.name, pool.name)}})
    _pool_container(template["spec"]["containers"][0], spec.storage_volumes)
    return sts


# --- the plan -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PoolPlan:
    """One pass's decision: the objects to apply (ConfigMap before StatefulSet), the controller's action,
    the ids to keep in status.nodeIds, the StatefulSet's replicas after the pass, and the Ready condition."""

    objects: tuple[dict[str, Any], ...]
    drain: DrainBrokers | None
    node_ids: tuple[int, ...]
    replicas: int
    condition: Condition
    rolling: bool = False  # a roll step was taken or waits (plan_pool_roll)
    expand: tuple[ExpandClaim, ...] = ()  # claims to grow (plan_pool_storage)
    recreate: bool = False  # delete the StatefulSet orphaning its pods; the next pass makes it again
    storage: Condition | None = None  # the StorageResized condition; None: no StatefulSet to compare with
    undrain: EndScaleDownDrain | None = None  # the ids the pool keeps: a drain left by an earlier removal ends

    @property
    def waiting(self) -> bool:
        """A scale-down drains or is blocked, a roll goes on, or the StatefulSet is re-created: look again soon."""
        return self.rolling or self.condition.reason in (PoolReason.SCALE_DOWN_DRAINING.value,
                                                         PoolReason.SCALE_DOWN_BLOCKED.value,
                                                         PoolReason.RESIZING_STORAGE.value)


@dataclass(frozen=True, slots=True)
class PoolRoll:
    """The roll step's decision: at most one controller action or pod deletion, and what the pool waits for."""

    actions: tuple[MoveLeadership | DeletePod, ...]
    condition: Condition


@dataclass(frozen=True, slots=True)
class PoolObserved:
    """What a pool's pass reads: its StatefulSet's replicas (None: none yet), the ids and the brokers the
    cluster's other pools keep, the controller's partition view (None: not asked, or unavailable), and for
    volume expansion the StatefulSet, its claims and their StorageClasses."""

    current: int | None = None
    taken: frozenset[int] = frozenset()
    other_brokers: int = 0  # the other pools' replicas (the lower of spec and status: one shrinking counts low)
    partitions: tuple[PartitionView, ...] | None = None
    statefulset: Mapping[str, Any] | None = None  # the pool's StatefulSet (its claim templates)
    claims: tuple[Claim, ...] = ()  # the pool's data claims (volume_reader.read_storage)
    storage_classes: Mapping[str, StorageClassView] = dataclasses.field(default_factory=dict)  # by name
    config: Mapping[str, Any] | None = None  # the cluster's ConfigMap (pool_statefulset); None: not there yet


def _stop(pool: PoolSpec, current: int | None, reason: PoolReason, message: str,
          drain: DrainBrokers | None = None, ids: tuple[int, ...] | None = None) -> PoolPlan:
    return PoolPlan((), drain, pool.node_ids if ids is None else ids, current or 0,
                    ready(False, reason, message, generation=pool.generation))


def plan_pool(cluster: ClusterSpec | None, pool: PoolSpec, observed: PoolObserved, *,
              ctx: OperatorContext) -> PoolPlan:
    """What to do for `pool`, given what is `observed` now."""
    current = observed.current
    if cluster is None:
        return _stop(pool, current, PoolReason.CLUSTER_NOT_FOUND,
                     f"no TinyStreamCluster {pool.cluster!r} in namespace {pool.namespace}" if pool.cluster
                     else f"the pool names no cluster: label {CLUSTER_LABEL} missing")
    if not cluster.node_pools:
        return _stop(pool, current, PoolReason.NODE_POOLS_NOT_ENABLED,
                     f"cluster {cluster.name} has no annotation {NODE_POOLS_ANNOTATION}: enabled; "
                     "its brokers are its own StatefulSet's")
    if pool.name == ADOPTING_POOL:  # pod <cluster>-broker-<n> is broker <n> (broker_identity.py)
        refused = adoption_problem(cluster, pool, observed)
        if refused is not None:
            return _stop(pool, current, PoolReason.ADOPTION_REFUSED, refused)
        ids = tuple(range(max(pool.replicas, current or 0)))
    else:
        try:
            ids = grow_ids(pool.node_ids if current is None else pool.node_ids[:current],
                           wanted=max(pool.replicas, current or 0), taken=observed.taken,
                           next_ids=pool.next_node_ids)
        except NodeIdsError as exc:
            return _stop(pool, current, PoolReason.NODE_IDS_EXHAUSTED, str(exc))
    sts = observed.statefulset
    if sts is not None and (sts.get("metadata") or {}).get("deletionTimestamp"):
        return _stop(pool, current, PoolReason.RESIZING_STORAGE, f"waiting for StatefulSet "
                     f"{statefulset_name(cluster.name, pool.name)} to go (orphan deletion) before re-creating it")
    if current is not None and pool.replicas < current:
        return _plan_shrink(cluster, pool, ctx, ids, observed)
    storage = plan_pool_storage(cluster, pool, observed)
    condition = storage.condition if storage is not None else None
    if condition is not None and condition.reason == StorageReason.VOLUMES_CHANGED.value:
        return dataclasses.replace(_stop(pool, current, PoolReason.VOLUMES_CHANGED, condition.message, ids=ids),
                                   storage=condition)
    objects = pool_objects(cluster, pool, ctx, ids, replicas=pool.replicas, config=observed.config)
    if storage is not None and storage.recreate_statefulset:  # no StatefulSet update: it goes, and comes back
        return PoolPlan(objects[:-1], None, ids, pool.replicas, ready(
            True, PoolReason.RESIZING_STORAGE, f"re-creating StatefulSet {statefulset_name(cluster.name, pool.name)} "
            "with the larger claim template; its pods keep running", generation=pool.generation),
            expand=storage.expand, recreate=True, storage=condition)
    verb = "creating" if current is None else ("scaling up to" if pool.replicas > current else "running")
    # An id a scale-down removed (of this pool or another) keeps its lasting drain in the controller, which
    # a restart does not end: given out again, or kept by a scale-down undone, it would receive no replica
    # (rebalance, new topics). A pool not shrinking keeps all its ids: none of them stays drained.
    return PoolPlan(objects, None, ids, pool.replicas, ready(
        True, PoolReason.READY, f"{verb} {pool.replicas} broker(s), ids {list(ids)}", generation=pool.generation),
        expand=storage.expand if storage is not None else (), storage=condition,
        undrain=EndScaleDownDrain(ids[:pool.replicas]) if pool.replicas else None)


def plan_pool_storage(cluster: ClusterSpec, pool: PoolSpec, observed: PoolObserved) -> StoragePlan | None:
    """A larger size of the pool's volumes (its spec.storage, else the cluster's): the claims grow and the
    StatefulSet is re-created with its pods orphaned, as the cluster's own (reconcile.plan_volumes,
    volume_expansion.py); never while the pool scales. None: no StatefulSet yet."""
    sts = observed.statefulset
    if sts is None or observed.current is None:
        return None
    view = pool_cluster(cluster, pool)
    changed = volumes_changed(wanted=[v.claim for v in view.storage_volumes], templates=template_sizes(sts),
                              generation=pool.generation)
    if changed is not None:
        return changed
    return plan_volume_sizes(
        view.storage_volumes, claims=observed.claims, templates=template_sizes(sts) or {},
        storage_classes=observed.storage_classes, replicas=max(observed.current, pool.replicas),
        scaling=observed.current != pool.replicas, generation=pool.generation,
        where="spec.storage" if pool.storage is not None else f"cluster {cluster.name}'s spec.storage")


def _plan_shrink(cluster: ClusterSpec, pool: PoolSpec, ctx: OperatorContext, ids: tuple[int, ...],
                 observed: PoolObserved) -> PoolPlan:
    """Scale-down: refused while a partition's replicas would not fit on the brokers left; else the removed
    (highest) ids hold no replica first (the controller's drain), then the StatefulSet shrinks."""
    current, partitions = observed.current or 0, observed.partitions
    removed = ids[pool.replicas:current]
    if partitions is None:
        return _stop(pool, current, PoolReason.SCALE_DOWN_BLOCKED, f"cannot remove broker(s) {list(removed)}: "
                     "the controller's partition view is unavailable", ids=ids)
    left = observed.other_brokers + pool.replicas
    widest = max((len(p.target) for p in partitions), default=0)
    if widest > left:
        return _stop(pool, current, PoolReason.SCALE_DOWN_BLOCKED, f"cannot remove broker(s) {list(removed)}: "
                     f"a partition has {widest} replicas and the cluster would keep {left} broker(s)", ids=ids)
    hosted = [p for p in partitions if set(removed) & set(p.replicas)]
    if hosted:
        return _stop(pool, current, PoolReason.SCALE_DOWN_DRAINING,
                     f"moving {len(hosted)} partition replica set(s) off broker(s) {list(removed)} before "
                     "scaling down", DrainBrokers(tuple(removed)), ids)
    # The ids file keeps the removed ids until their pods are gone (a terminating pod restarts with its own).
    objects = pool_objects(cluster, pool, ctx, ids, replicas=pool.replicas, config=observed.config)
    return PoolPlan(objects, None, ids[:pool.replicas], pool.replicas, ready(
        True, PoolReason.SCALING_DOWN, f"scaling down from {current} to {pool.replicas}: broker(s) "
        f"{list(removed)} hold no replica", generation=pool.generation))


def pool_outdated(cluster: ClusterSpec, pool: PoolSpec, *, statefulset: Mapping[str, Any] | None,
                  pods: Sequence[BrokerPod]) -> list[BrokerPod]:
    """The pool's pods not at its StatefulSet's update revision (OnDelete: the operator restarts them), by id."""
    revision = ((statefulset or {}).get("status") or {}).get("updateRevision")
    prefix = statefulset_name(cluster.name, pool.name) + "-"
    return sorted((q for q in pods if q.name.startswith(prefix) and revision and q.revision
                   and q.revision != revision), key=lambda q: q.ordinal)


def plan_pool_roll(cluster: ClusterSpec, pool: PoolSpec, *, statefulset: Mapping[str, Any] | None,
                   pods: Sequence[BrokerPod], partitions: Sequence[PartitionView] | None,
                   drained: frozenset[int], expected: Collection[str] = ()) -> PoolRoll | None:
    """A pool's pods on an older StatefulSet revision restart one at a time, by the cluster's rules
    (reconcile.roll_one): every broker of every pool ready and none going, every ISR full, leadership
    moved off the victim first; the pool's highest id first. `pods`: every pool pod of the cluster, each
    with its broker id as `ordinal` (pool_broker_pods); `expected`: the pod names the pools' ids call for
    (a pod deleted and not made again yet is not ready either). None: nothing of this pool to roll."""
    outdated = pool_outdated(cluster, pool, statefulset=statefulset, pods=pods)
    if not outdated:
        return None
    missing = sorted(set(expected) - {q.name for q in pods})
    if missing:
        return PoolRoll((), ready(False, ClusterReason.ROLL_WAITING_FOR_POD,
                                  f"rolling update: waiting for {missing[0]} to be made again",
                                  generation=pool.generation))
    current = ClusterPass(cluster, Observed(pods=tuple(pods), partitions=None if partitions is None
                                            else tuple(partitions), drained_for_roll=drained),
                          Scale(len(pods), Phase.ROLLING), sts_changing=False)
    step = roll_one(current, sorted(pods, key=lambda q: q.ordinal), outdated)
    assert step.end is not None, "a roll step always says where it stands"
    actions = tuple(a for a in step.actions if isinstance(a, (MoveLeadership, DeletePod)))
    return PoolRoll(actions, ready(False, step.end.reason, step.end.message, generation=pool.generation))
