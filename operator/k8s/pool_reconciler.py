"""One pass over a TinyStreamNodePool: observe -> plan_pool (pure, node_pools.py) -> act -> report.

- observe: the pool's cluster (by the tinystream.io/cluster label), its StatefulSet, the ids of the
  cluster's other pools, and on a scale-down the controller's partition view.
- act: new ids are written to status.nodeIds before any pod can take them (so two pools never give
  one id twice: a cluster's pool passes take turns, and each reads the others' status); then the ids
  ConfigMap and the StatefulSet, applied when they differ from what is there; a drain goes to the
  controller (the scale-down path of reconcile.py), and a pool not shrinking ends any scale-down drain
  left on its ids (an id removed once and given out again).
- report: status replicas, nodeIds, labelSelector and the Ready condition; an Event on a new reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import kopf

from tinystream.operator.k8s.conditions import PoolReason, merge_condition
from tinystream.operator.k8s.controller_port import ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, POOL_KIND, ClusterSpec, PartitionView
from tinystream.operator.k8s.node_pools import (
    CLUSTER_LABEL,
    PoolObserved,
    PoolPlan,
    PoolSpec,
    other_pools,
    plan_pool,
    plan_pool_roll,
    pool_broker_pods,
    pool_cluster,
    pool_outdated,
    pool_pod_ids,
    pool_selector,
    statefulset_name,
    with_ca_markers,
)
from tinystream.operator.k8s.reconcile import DeletePod, differs
from tinystream.operator.k8s.resources import Names, selector_labels
from tinystream.operator.k8s.volume_reader import read_storage

WAIT_S = 5.0  # how soon to look again while a scale-down drains


class PoolReconciler:
    """The I/O around plan_pool for every TinyStreamNodePool of one registry."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self._turns: dict[tuple[str, str], asyncio.Lock] = {}  # per (namespace, cluster): id assignment in turn

    async def reconcile(self, body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> PoolPlan:
        pool = PoolSpec.from_resource(body)
        async with self._turns.setdefault((pool.namespace, pool.cluster), asyncio.Lock()):
            plan = await self._pass(pool, body, logger)
        self.report(pool, plan, body, status, patch)
        if plan.waiting:
            raise kopf.TemporaryError(plan.condition.message, delay=WAIT_S)
        return plan

    async def _pass(self, pool: PoolSpec, body: Any, logger: logging.Logger) -> PoolPlan:
        client = self.deps.kube()
        found = await client.get(API_VERSION, CLUSTER_KIND, pool.cluster, pool.namespace) if pool.cluster else None
        cluster = with_ca_markers(ClusterSpec.from_resource(found)) if found is not None else None
        sts = (await client.get("apps/v1", "StatefulSet", statefulset_name(pool.cluster, pool.name), pool.namespace)
               if cluster is not None else None)
        current = int(sts["spec"].get("replicas", 0)) if sts is not None else None
        others = await client.list(API_VERSION, POOL_KIND, pool.namespace, labels={CLUSTER_LABEL: pool.cluster})
        taken, other_brokers = other_pools(others, uid=pool.uid)
        claims, classes = (await read_storage(client, pool.namespace, labels=selector_labels(cluster),
                                              statefulset=statefulset_name(cluster.name, pool.name),
                                              volumes=pool_cluster(cluster, pool).storage_volumes)
                           if sts is not None and cluster is not None else ((), {}))
        observed = PoolObserved(current=current, taken=taken, other_brokers=other_brokers,
                                partitions=await self._partitions(cluster, pool, current), statefulset=sts,
                                claims=claims, storage_classes=classes,
                                config=await client.get("v1", "ConfigMap", Names.of(cluster).config, pool.namespace)
                                if cluster is not None else None)
        plan = plan_pool(cluster, pool, observed, ctx=self.deps.ctx)
        if plan.node_ids != pool.node_ids:  # reserved before a pod can start with them
            await client.patch(API_VERSION, POOL_KIND, pool.name, pool.namespace,
                               {"status": {"nodeIds": list(plan.node_ids)}}, subresource="status")
        sts_applied = await self._apply(pool, plan, sts, logger)
        await self._resize(pool, plan, body)
        if plan.drain is not None and cluster is not None:
            await self._drain(cluster, plan, body, logger)
        if plan.undrain is not None and cluster is not None:
            await self._undrain(cluster, plan, logger)
        if cluster is not None and sts is not None and not sts_applied and plan.condition.reason == PoolReason.READY:
            return await self._roll(cluster, pool, sts, others, plan, body)
        return plan

    async def _apply(self, pool: PoolSpec, plan: PoolPlan, sts: dict[str, Any] | None,
                     logger: logging.Logger) -> bool:
        """The plan's objects, each applied when it differs from what is there; whether the StatefulSet was."""
        client, sts_applied = self.deps.kube(), False
        for obj in plan.objects:
            existing = sts if obj["kind"] == "StatefulSet" else await client.get(
                obj["apiVersion"], obj["kind"], obj["metadata"]["name"], pool.namespace)
            if existing is not None and obj["kind"] == "StatefulSet":  # claim templates are immutable
                obj["spec"]["volumeClaimTemplates"] = existing["spec"].get("volumeClaimTemplates")
            if existing is None or differs(obj, existing):
                await client.apply(obj)
                sts_applied = sts_applied or obj["kind"] == "StatefulSet"
                logger.info("%s %s/%s", "created" if existing is None else "updated", obj["kind"],
                            obj["metadata"]["name"])
        return sts_applied

    async def _resize(self, pool: PoolSpec, plan: PoolPlan, body: Any) -> None:
        """The claims to grow, then (claim templates are immutable) the StatefulSet deleted with its pods and
        claims orphaned: the next pass makes it again with the larger template, and it adopts the pods."""
        client = self.deps.kube()
        for claim in plan.expand:
            kopf.info(body, reason="ExpandingVolume", message=f"{claim.name}: requesting {claim.size}")
            await client.patch("v1", "PersistentVolumeClaim", claim.name, pool.namespace,
                               {"spec": {"resources": {"requests": {"storage": claim.size}}}})
        if plan.recreate:
            name = statefulset_name(pool.cluster, pool.name)
            kopf.info(body, reason="RecreatingStatefulSet",
                      message=f"{name}: deleted with its pods orphaned, re-created with the larger claim template")
            await client.delete("apps/v1", "StatefulSet", name, pool.namespace, propagation="Orphan")

    async def _roll(self, cluster: ClusterSpec, pool: PoolSpec, sts: dict[str, Any], pools: list[dict[str, Any]],
                    plan: PoolPlan, body: Any) -> PoolPlan:
        """One step of the pool's roll (node_pools.plan_pool_roll), by the cluster's safety rules; the
        controller is asked only when a pod of the pool is outdated."""
        client, key = self.deps.kube(), ClusterKey(cluster.namespace, cluster.name)
        ids = pool_pod_ids(cluster.name, pools)
        pods = pool_broker_pods(await client.list("v1", "Pod", cluster.namespace, labels=selector_labels(cluster)), ids)
        if not pool_outdated(cluster, pool, statefulset=sts, pods=pods):
            return plan
        roll = plan_pool_roll(cluster, pool, statefulset=sts, pods=pods,
                              partitions=await self.deps.controller.partitions(key),
                              drained=await self.deps.controller.drained_for_roll(key), expected=ids)
        if roll is None:
            return plan
        for action in roll.actions:
            if isinstance(action, DeletePod):
                kopf.info(body, reason="RollingBroker",
                          message=f"restarting {action.name} (broker {action.broker_id}) for the new revision")
                await client.delete("v1", "Pod", action.name, cluster.namespace)
                continue
            try:
                await self.deps.controller.broker_actions(key, [action])
            except (ControllerUnavailable, ControllerRefused) as exc:
                kopf.warn(body, reason="BrokerActionRefused", message=str(exc))
        return dataclasses.replace(plan, condition=roll.condition, rolling=True)

    async def _partitions(self, cluster: ClusterSpec | None, pool: PoolSpec,
                          current: int | None) -> tuple[PartitionView, ...] | None:
        """The controller's view, asked only for a scale-down (the one step that needs it)."""
        if cluster is None or current is None or pool.replicas >= current:
            return None
        return await self.deps.controller.partitions(ClusterKey(cluster.namespace, cluster.name))

    async def _drain(self, cluster: ClusterSpec, plan: PoolPlan, body: Any, logger: logging.Logger) -> None:
        assert plan.drain is not None
        try:
            await self.deps.controller.broker_actions(ClusterKey(cluster.namespace, cluster.name), [plan.drain])
        except ControllerUnavailable as exc:
            logger.warning("drain postponed: %s", exc)
        except ControllerRefused as exc:  # e.g. a rack constraint the remaining brokers cannot meet
            kopf.warn(body, reason="BrokerActionRefused", message=str(exc))

    async def _undrain(self, cluster: ClusterSpec, plan: PoolPlan, logger: logging.Logger) -> None:
        """The pool's ids carry no scale-down drain (the controller acts only on ids drained that way);
        an unavailable controller is asked again at the next pass."""
        assert plan.undrain is not None
        try:
            await self.deps.controller.broker_actions(ClusterKey(cluster.namespace, cluster.name), [plan.undrain])
        except (ControllerUnavailable, ControllerRefused) as exc:
            logger.debug("scale-down drains of %s not checked: %s", list(plan.undrain.broker_ids), exc)

    def report(self, pool: PoolSpec, plan: PoolPlan, body: Any, status: Any, patch: kopf.Patch) -> None:
        previous = (status or {}).get("conditions") or []
        condition = plan.condition
        if not any(c.get("type") == "Ready" and c.get("reason") == condition.reason for c in previous):
            (kopf.info if condition.status else kopf.warn)(body, reason=condition.reason, message=condition.message)
        patch.status["nodeIds"] = list(plan.node_ids)
        patch.status["replicas"] = plan.replicas
        patch.status["observedGeneration"] = pool.generation
        patch.status["labelSelector"] = pool_selector(pool)
        conditions = merge_condition(previous, condition)
        if plan.storage is not None:
            conditions = merge_condition(conditions, plan.storage)
        patch.status["conditions"] = conditions
