"""One pass over a TinyStreamCluster: observe -> secure -> plan (pure) -> execute -> report.

- observe: the owned objects, the broker pods and their data claims (and
  the claims' StorageClass), the Topics' largest replication factor, the
  nodes' racks and the controller's view.
- secure: make (or renew) the Secrets spec.listeners asks for
  (cluster_tls.ensure_security) and take the CA's lifecycle a step on
  (ca_lifecycle.py, from the roll observed); a Secret held by another owner
  (SecretNotOwned) or a provided CA that cannot be used (CaUnusable) stops
  the pass, retried in 30 s.
- plan: reconcile.plan_cluster, pure.
- execute: each action through EXECUTORS, a table keyed by the action's
  type; the actions for the controller core go to it in one call.
- registry logins: with spec.schemaRegistry, the registry's users file
  (schema_registry.users_json) from the cluster's scram-sha-512 users and its
  rules file from all its users' topic ACLs (registry_rules.py), and with
  TLS its HTTPS certificate (registry_tls.py).
- report: status fields and conditions (reconcile.status_conditions), and an
  Event when the Ready reason changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

import kopf

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.ca_lifecycle import CLIENTS, pools_rolled_marker, rolled_marker
from tinystream.operator.k8s.caches import IssuedCertificates, ReportedReasons
from tinystream.operator.k8s.certificates import IssuedRecord
from tinystream.operator.k8s.cluster_tls import (
    ForeignSecret,
    SecurityOutcome,
    create_secret,
    ensure_security,
    next_clients_ca,
    replace_secret_data,
    users_holding,
)
from tinystream.operator.k8s.conditions import ClusterReason, merge_condition, ready
from tinystream.operator.k8s.controller_port import BrokerAction, ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.errors import Forbidden
from tinystream.operator.k8s.external import LISTENER_LABEL, certificate_hosts, node_addresses
from tinystream.operator.k8s.model import API_VERSION, POOL_KIND, USER_KIND, ClusterSpec, UserSpec
from tinystream.operator.k8s.node_pools import CLUSTER_LABEL, POOL_LABEL, pool_broker_pods, pool_pod_ids
from tinystream.operator.k8s.rack import RACK_BINDING, binding_name
from tinystream.operator.k8s.reconcile import (
    Action,
    Apply,
    BrokerPod,
    ClusterPlan,
    Delete,
    DeletePod,
    DrainBrokers,
    EndRollDrain,
    MoveLeadership,
    Observed,
    OrphanStatefulSet,
    Rebalance,
    plan_cluster,
    sizes,
    status_conditions,
)
from tinystream.operator.k8s.registry_tls import ensure_registry_certificate
from tinystream.operator.k8s.resources import Names, owned_objects, selector_labels
from tinystream.operator.k8s.schema_registry import (
    registry_keys,
    registry_rules,
    registry_status,
    scram_logins,
    users_json,
    users_secret,
)
from tinystream.operator.k8s.user_secrets import user_password
from tinystream.operator.k8s.volume_expansion import ExpandClaim
from tinystream.operator.k8s.volume_reader import read_storage


@dataclass
class Execution:
    """One plan's execution: where the actions go, and those collected for the controller core."""

    client: KubeClient
    spec: ClusterSpec
    body: Any
    logger: logging.Logger
    for_controller: list[BrokerAction] = field(default_factory=list)


async def _apply(run: Execution, action: Apply) -> None:
    await run.client.apply(action.obj)
    run.logger.info("%s %s/%s", "created" if action.create else "updated", *action.key)


async def _delete(run: Execution, action: Delete) -> None:
    await run.client.delete(action.api_version, action.kind, action.name, run.spec.namespace)


async def _delete_pod(run: Execution, action: DeletePod) -> None:
    kopf.info(run.body, reason="RollingBroker", message=f"restarting {action.name} for the new revision")
    await run.client.delete("v1", "Pod", action.name, run.spec.namespace)


async def _expand_claim(run: Execution, action: ExpandClaim) -> None:
    kopf.info(run.body, reason="ExpandingVolume", message=f"{action.name}: requesting {action.size}")
    await run.client.patch("v1", "PersistentVolumeClaim", action.name, run.spec.namespace,
                           {"spec": {"resources": {"requests": {"storage": action.size}}}})


async def _orphan_statefulset(run: Execution, action: OrphanStatefulSet) -> None:
    # Claim templates are immutable: the StatefulSet goes (its pods and claims stay) and comes back with new ones.
    kopf.info(run.body, reason="RecreatingStatefulSet",
              message=f"{action.name}: deleted with its pods orphaned, re-created with claims of {sizes(run.spec)}")
    await run.client.delete("apps/v1", "StatefulSet", action.name, run.spec.namespace, propagation="Orphan")


async def _to_controller(run: Execution, action: BrokerAction) -> None:
    run.for_controller.append(action)


Executor = Callable[[Execution, Any], Awaitable[None]]
EXECUTORS: Mapping[type, Executor] = {
    Apply: _apply,
    Delete: _delete,
    DeletePod: _delete_pod,
    ExpandClaim: _expand_claim,
    OrphanStatefulSet: _orphan_statefulset,
    MoveLeadership: _to_controller,
    DrainBrokers: _to_controller,
    Rebalance: _to_controller,
    EndRollDrain: _to_controller,
}
assert set(get_args(Action)) <= set(EXECUTORS), "every action plan_cluster can make has an executor"


class ClusterReconciler:
    """The I/O around plan_cluster for every TinyStreamCluster of one registry."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.reported = ReportedReasons()
        self.issued = IssuedCertificates()
        self._passes: dict[str, asyncio.Lock] = {}  # per cluster uid: one pass at a time
        self._unlabelled: set[tuple[str, str, str]] = set()  # (cluster uid, pod, node) already reported
        self._registry_logins: dict[str, str] = {}  # per cluster uid: the registry logins last written
        self._registry_certs: dict[str, IssuedRecord] = {}  # per cluster uid: the registry's HTTPS certificate

    async def reconcile(self, body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> ClusterPlan:
        """One pass: observe, plan, act, report. kopf runs a cluster's change handler and its health timer
        concurrently; two passes at once would act twice on one observation (two creates of one Service
        racing for its node port, a pod deleted twice in a roll), so a cluster's passes take turns."""
        async with self._passes.setdefault(_uid(body), asyncio.Lock()):
            spec = ClusterSpec.from_resource(body)
            if spec.node_pools:  # the pool brokers (an external listener has a Service for each)
                spec = dataclasses.replace(spec, pool_brokers=await self._pool_brokers(spec))
            observed = await self.observe(spec)
            self._warn_unlabelled(spec, observed, body)
            spec = await self.secure(spec, body, status, patch, observed)
            await self._registry_users(spec)
            spec = await self._registry_certificate(spec, status)
            plan = plan_cluster(spec, status, observed, ctx=self.deps.ctx)
            await self.execute(spec, plan, body, logger)
            self.report(spec, plan, body, status, patch)
            return plan

    def _warn_unlabelled(self, spec: ClusterSpec, observed: Observed, body: Any) -> None:
        """An Event, once per pod and node, for a broker whose node lacks the rack label: it runs without
        broker.rack (its init container logs the same), and status.brokers shows no rack for it."""
        if not spec.rack_topology_key:
            return
        for pod in observed.pods:
            key = (_uid(body), pod.name, pod.node or "")
            if pod.node and pod.ordinal not in observed.racks and key not in self._unlabelled:
                self._unlabelled.add(key)
                kopf.warn(body, reason="RackLabelMissing",
                          message=f"{pod.name}: node {pod.node} has no label {spec.rack_topology_key}; "
                                  "the broker runs without broker.rack")

    def forget(self, body: Any) -> None:
        uid = _uid(body)
        self._unlabelled = {k for k in self._unlabelled if k[0] != uid}
        self.reported.forget(uid)
        self.issued.forget(uid)
        self._passes.pop(uid, None)
        self._registry_logins.pop(uid, None)
        self._registry_certs.pop(uid, None)

    async def secure(self, spec: ClusterSpec, body: Any, status: Any, patch: kopf.Patch,
                     observed: Observed) -> ClusterSpec:
        """The Secrets, and the CA step (ca_lifecycle.py): the spec comes back with the CA marker the pod
        template carries in this pass."""
        deps = self.deps
        if deps.master_secret is None:
            raise kopf.TemporaryError("the operator has no master secret to make certificates and passwords with")
        if spec.node_pools:  # every pool's StatefulSet rolls (node_pools.with_ca_markers): all must have
            pool_sets = await self._pool_statefulsets(spec)
            rolled = pools_rolled_marker(pool_sets, observed.pods)
            clients_rolled = pools_rolled_marker(pool_sets, observed.pods, annotation=CLIENTS.annotation)
        else:
            rolled = rolled_marker(observed.statefulset(spec), observed.pods, replicas=spec.brokers)
            clients_rolled = rolled_marker(observed.statefulset(spec), observed.pods, replicas=spec.brokers,
                                           annotation=CLIENTS.annotation)
        latest = self.issued.latest(spec.uid, status)
        holding = await self._users_holding(dataclasses.replace(spec, clients_ca_status=latest.get("clientsCa") or {}),
                                            deps.master_secret)
        try:
            outcome = await ensure_security(deps.kube(), spec, latest,
                                            master=deps.master_secret, ctx=deps.ctx, now=deps.clock(),
                                            external_hosts=await self._external_hosts(spec), rolled=rolled,
                                            clients_rolled=clients_rolled, holding=holding)
        except ForeignSecret as exc:  # never mount (or write into) a Secret that is not the cluster's
            condition = ready(False, ClusterReason.SECRET_NOT_OWNED, str(exc), generation=spec.generation)
            if self.reported.changed(body, status, condition.reason):
                kopf.warn(body, reason=condition.reason, message=condition.message)
            patch.status["conditions"] = merge_condition((status or {}).get("conditions") or [], condition)
            raise kopf.TemporaryError(str(exc), delay=30) from exc
        if outcome.certificates is not None:
            self.issued.record(spec.uid, outcome.certificates)
        if outcome.issued_because:
            kopf.info(body, reason="CertificateIssued",
                      message=f"broker certificate {outcome.certificates and outcome.certificates['serial']}: "
                              f"{outcome.issued_because}")
        if outcome.certificates is not None:
            patch.status["certificates"] = outcome.certificates
        return self._ca_step(spec, body, status, patch, outcome)

    async def _pool_brokers(self, spec: ClusterSpec) -> tuple[tuple[int, str], ...]:
        """(broker id, pod name) of every pool broker, from the pools' status.nodeIds."""
        pools = await self.deps.kube().list(API_VERSION, POOL_KIND, spec.namespace, labels={CLUSTER_LABEL: spec.name})
        return tuple(sorted((broker, pod) for pod, broker in pool_pod_ids(spec.name, pools).items()))

    async def _pool_statefulsets(self, spec: ClusterSpec) -> list[dict[str, Any]]:
        """The StatefulSets of the cluster's brokers: its node pools' (by their pool label), and its own from
        before pools (<cluster>-broker), which pool `broker` adopts without a label and whose brokers need
        the CA phase as much, adopted or not yet."""
        found = await self.deps.kube().list("apps/v1", "StatefulSet", spec.namespace, labels={CLUSTER_LABEL: spec.name})
        own = Names.of(spec).statefulset
        return [s for s in found if POOL_LABEL in ((s.get("metadata") or {}).get("labels") or {})
                or (s.get("metadata") or {}).get("name") == own]

    async def _registry_users(self, spec: ClusterSpec) -> None:
        """spec.schemaRegistry's logins (schema_registry.users_json): written when they changed since the last
        pass (deterministic content: a patch with the same content would change nothing either)."""
        master = self.deps.master_secret
        if spec.schema_registry is None or master is None:
            return
        users = await self.deps.kube().list(API_VERSION, USER_KIND, spec.namespace)
        logins = [(name, user_password(master, UserSpec.from_resource(body)))
                  for name, body in scram_logins(users, spec)]
        rules = registry_rules(spec, [UserSpec.from_resource(body) for body in users])
        key = json.dumps([spec.uid, sorted(logins), rules])
        if self._registry_logins.get(spec.uid) == key:
            return
        secret = users_secret(spec, users_json(master, spec, logins), rules)
        if not await create_secret(self.deps.kube(), secret):
            await replace_secret_data(self.deps.kube(), secret)
        self._registry_logins[spec.uid] = key

    async def _registry_certificate(self, spec: ClusterSpec, status: Any) -> ClusterSpec:
        """With spec.schemaRegistry and TLS: its HTTPS certificate (registry_tls.py), issued or renewed when due;
        the spec comes back with its serial, which the registry's pod template carries."""
        master = self.deps.master_secret
        if spec.schema_registry is None or not spec.tls or master is None:
            return spec
        current = self._registry_certs.get(spec.uid) or IssuedRecord.from_status(
            ((status or {}).get("schemaRegistry") or {}).get("certificate"))
        latest = dataclasses.replace(spec, ca_status=self.issued.latest(spec.uid, status).get("clusterCa") or {})
        done = await ensure_registry_certificate(self.deps.kube(), latest, master=master, current=current,
                                                 ctx=self.deps.ctx, now=self.deps.clock())
        if done.record is None:
            return spec
        self._registry_certs[spec.uid] = done.record
        return dataclasses.replace(spec, registry_certificate=done.record.serial)

    async def _users_holding(self, spec: ClusterSpec, master: str) -> str:
        """While the clients CA is in RenewingCertificates: the tls users not yet re-issued from the new CA."""
        new_ca = next_clients_ca(master, spec) if spec.tls_clients else ""
        if not new_ca:
            return ""
        users = await self.deps.kube().list(API_VERSION, USER_KIND, spec.namespace)
        return users_holding(users, spec, new_ca)

    def _ca_step(self, spec: ClusterSpec, body: Any, status: Any, patch: kopf.Patch,
                 outcome: SecurityOutcome) -> ClusterSpec:
        """Record the CA states and their conditions; a provided CA that cannot be used stops the pass."""
        plan = outcome.ca
        if plan is None:
            return spec
        conditions = merge_condition((status or {}).get("conditions") or [], plan.condition)
        if outcome.clients is not None:
            conditions = merge_condition(conditions, outcome.clients.condition)
        for step in (plan, outcome.clients):
            if step is not None and step.problem:
                condition = ready(False, ClusterReason.CA_UNUSABLE, step.condition.message, generation=spec.generation)
                if self.reported.changed(body, status, condition.reason):
                    kopf.warn(body, reason=step.condition.reason, message=step.condition.message)
                patch.status["conditions"] = merge_condition(conditions, condition)
                raise kopf.TemporaryError(step.condition.message, delay=30)
        patch.status["conditions"] = conditions  # report() merges the others into these
        if plan.started:
            kopf.info(body, reason="CaRotationStarted", message=plan.started)
        if outcome.clients is not None and outcome.clients.started:
            kopf.info(body, reason="CaRotationStarted", message=outcome.clients.started)
        if outcome.clients_status is not None:
            previous = ((self.issued.latest(spec.uid, status).get("clientsCa") or {}).get("phase"))
            if previous and previous != outcome.clients_status["phase"]:
                kopf.info(body, reason="CaRotation",
                          message=f"clients CA: {previous} -> {outcome.clients_status['phase']}")
            self.issued.record_clients_ca(spec.uid, outcome.clients_status)
            patch.status["clientsCa"] = outcome.clients_status
        if outcome.ca_status is not None:
            previous = (self.issued.latest(spec.uid, status).get("clusterCa") or {}).get("phase")
            if previous and previous != outcome.ca_status["phase"]:
                kopf.info(body, reason="CaRotation", message=f"cluster CA: {previous} -> {outcome.ca_status['phase']}")
            self.issued.record_ca(spec.uid, outcome.ca_status)
            patch.status["clusterCa"] = outcome.ca_status
            self.deps.controller.follow_ca(dataclasses.replace(spec, ca_status=outcome.ca_status))
        return dataclasses.replace(spec, ca_marker=plan.marker,
                                   clients_ca_marker=outcome.clients.marker if outcome.clients is not None else "")

    async def _external_services(self, spec: ClusterSpec) -> list[dict[str, Any]]:
        """The cluster's external listeners' Services there now (by their listener label)."""
        services = await self.deps.kube().list("v1", "Service", spec.namespace,
                                               labels={"tinystream.io/cluster": spec.name})
        return [s for s in services if LISTENER_LABEL in ((s.get("metadata") or {}).get("labels") or {})]

    async def _external_hosts(self, spec: ClusterSpec) -> frozenset[str]:
        """The external names the broker certificate carries: every node's address (a broker advertises its
        node's, and may be moved to any node: the certificate does not change with a pod's move), the load
        balancers' addresses, every advertisedHost."""
        if not any(listener.tls for listener in spec.external):
            return frozenset()
        try:
            nodes = await self.deps.kube().list("v1", "Node")
        except Forbidden:  # a chart from before external listeners: the broker pods' nodes only
            pods = await self.deps.kube().list("v1", "Pod", spec.namespace, labels=selector_labels(spec))
            addresses = [(p.get("status") or {}).get("hostIP") or "" for p in pods]
        else:
            addresses = node_addresses(nodes)
        services = {s["metadata"]["name"]: s for s in await self._external_services(spec)}
        return certificate_hosts(spec, node_addresses=addresses, services=services)

    async def observe(self, spec: ClusterSpec) -> Observed:
        client, controller = self.deps.kube(), self.deps.controller
        objects = await self._objects(spec)
        broker_pods = await self._broker_pods(spec)
        key = ClusterKey(spec.namespace, spec.name)
        topic_rfs = [int((t.get("spec") or {}).get("replicationFactor", 1))
                     for t in await client.list(API_VERSION, "Topic", spec.namespace)
                     if (t.get("spec") or {}).get("cluster") == spec.name]
        racks = await self._racks(spec, broker_pods)
        claims, storage_classes = await read_storage(client, spec.namespace, labels=selector_labels(spec),
                                                     statefulset=Names.of(spec).statefulset,
                                                     volumes=spec.storage_volumes)
        partitions = await controller.partitions(key)  # opens the cluster's controller on first use
        return Observed(objects=objects, pods=broker_pods, partitions=partitions,
                        max_replication_factor=max(topic_rfs, default=0),
                        fenced=await controller.fenced(key), racks=racks,
                        drained_for_roll=await controller.drained_for_roll(key),
                        registered=await controller.registered(key),
                        cluster_id=await controller.cluster_id(key),
                        claims=claims, storage_classes=storage_classes)

    async def _objects(self, spec: ClusterSpec) -> dict[tuple[str, str], dict[str, Any]]:
        client = self.deps.kube()
        objects: dict[tuple[str, str], dict[str, Any]] = {}
        for obj in owned_objects(spec, self.deps.ctx, replicas=spec.brokers):
            current = await client.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], spec.namespace)
            if current is not None:
                objects[(obj["kind"], obj["metadata"]["name"])] = current
        if spec.node_pools:  # the brokers' StatefulSet from before pools, which pool `broker` adopts
            sts = await client.get("apps/v1", "StatefulSet", Names.of(spec).statefulset, spec.namespace)
            if sts is not None:
                objects[("StatefulSet", Names.of(spec).statefulset)] = sts
        for service in await self._external_services(spec):  # those of a removed listener too, to delete
            objects[("Service", service["metadata"]["name"])] = service
        if not spec.rack_topology_key:  # spec.rack removed: its binding goes (plan_owned_objects)
            binding = await client.get(*RACK_BINDING, binding_name(spec.namespace, spec.name))
            if binding is not None:
                objects[(RACK_BINDING[1], binding_name(spec.namespace, spec.name))] = binding
        for api_version, kind, name in registry_keys(spec):  # there, or left from a removed spec.schemaRegistry
            found = await client.get(api_version, kind, name, spec.namespace)
            if found is not None:
                objects[(kind, name)] = found
        if not spec.dashboard:
            dashboard = await client.get("v1", "Service", Names.of(spec).dashboard, spec.namespace)
            if dashboard is not None:
                objects[("Service", Names.of(spec).dashboard)] = dashboard
        return objects

    async def _broker_pods(self, spec: ClusterSpec) -> tuple[BrokerPod, ...]:
        pods = await self.deps.kube().list("v1", "Pod", spec.namespace, labels=selector_labels(spec))
        if spec.node_pools:  # the pools' pods, by the ids in their status (node_pools.py), not by ordinal
            pools = await self.deps.kube().list(API_VERSION, POOL_KIND, spec.namespace,
                                                labels={CLUSTER_LABEL: spec.name})
            return pool_broker_pods(pods, pool_pod_ids(spec.name, pools))
        return tuple(BrokerPod.from_pod(p) for p in pods
                     if p["metadata"]["name"].startswith(Names.of(spec).statefulset + "-"))

    async def _racks(self, spec: ClusterSpec, pods: tuple[BrokerPod, ...]) -> dict[int, str]:
        racks: dict[int, str] = {}
        if not spec.rack_topology_key:
            return racks
        for pod in pods:
            node = await self.deps.kube().get("v1", "Node", pod.node) if pod.node else None
            rack = ((node or {}).get("metadata", {}).get("labels") or {}).get(spec.rack_topology_key)
            if rack:
                racks[pod.ordinal] = rack
        return racks

    async def execute(self, spec: ClusterSpec, plan: ClusterPlan, body: Any, logger: logging.Logger) -> None:
        run = Execution(self.deps.kube(), spec, body, logger)
        for action in plan.actions:
            await EXECUTORS[type(action)](run, action)
        if not run.for_controller:
            return
        try:
            await self.deps.controller.broker_actions(ClusterKey(spec.namespace, spec.name), run.for_controller)
        except ControllerUnavailable as exc:
            logger.warning("controller actions postponed: %s", exc)
        except ControllerRefused as exc:  # e.g. replicas cannot be placed on the remaining brokers
            kopf.warn(body, reason="BrokerActionRefused", message=str(exc))

    def report(self, spec: ClusterSpec, plan: ClusterPlan, body: Any, status: Any, patch: kopf.Patch) -> None:
        previous = patch.status.get("conditions") or (status or {}).get("conditions") or []
        if self.reported.changed(body, status, plan.condition.reason):
            event = kopf.info if plan.condition.status else kopf.warn
            if plan.condition.status is not False or plan.phase.value != "Creating":
                event(body, reason=plan.condition.reason, message=plan.condition.message)
        for k, v in plan.status.items():
            patch.status[k] = v
        certificate = self._registry_certs.get(spec.uid) if spec.registry_certificate else None
        registry = registry_status(spec, certificate.to_status() if certificate is not None else None)
        if registry is not None or "schemaRegistry" in (status or {}):
            patch.status["schemaRegistry"] = registry  # None: removed (a merge patch's null)
        patch.status["conditions"] = status_conditions(spec, plan, previous)


def _uid(body: Any) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")
