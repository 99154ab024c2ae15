"""kopf handlers for TinyStreamCluster: each a thin call into cluster_reconciler.ClusterReconciler.

- create/update/resume run one reconcile pass; the health timer repeats it
  (ready brokers, per-broker state, and the next step of a roll or a scale),
  so waiting never blocks a handler.
- a field handler on spec.brokers records the scale request as an Event.
- delete is optional (no finalizer): the owned objects go with the cluster
  through their owner references, and a namespace deletion is never blocked
  by the operator. Only a spec.rack cluster's ClusterRoleBinding (cluster-scoped: no owner reference
  can name a namespaced cluster) is deleted here, as Strimzi deletes its kafka-init binding.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.cluster_reconciler import ClusterReconciler
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.handler_ids import handler_id
from tinystream.operator.k8s.model import CLUSTER_PLURAL, GROUP, VERSION
from tinystream.operator.k8s.rack import RACK_BINDING, binding_name

CLUSTERS = (GROUP, VERSION, CLUSTER_PLURAL)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    reconciler = ClusterReconciler(deps)

    @kopf.on.create(*CLUSTERS, id=handler_id("cluster_changed"), registry=registry)
    @kopf.on.update(*CLUSTERS, id=handler_id("cluster_changed"), registry=registry)
    @kopf.on.resume(*CLUSTERS, id=handler_id("cluster_changed"), registry=registry)
    @deps.metrics.instrument("cluster_changed")
    async def cluster_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)

    @kopf.on.field(*CLUSTERS, field="spec.brokers", id=handler_id("brokers_changed"), registry=registry)
    def brokers_changed(old: Any, new: Any, body: Any, **_: Any) -> None:
        if old is not None and new is not None and old != new:
            kopf.info(body, reason="ScaleRequested", message=f"brokers {old} -> {new}")

    @kopf.timer(*CLUSTERS, interval=deps.health_interval_s, initial_delay=deps.health_interval_s,
                id=handler_id("cluster_health"), registry=registry)
    @deps.metrics.instrument("cluster_health")
    async def cluster_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)

    @kopf.on.delete(*CLUSTERS, optional=True, id=handler_id("cluster_deleted"), registry=registry)
    @deps.metrics.instrument("cluster_deleted")
    async def cluster_deleted(name: str, namespace: str, body: Any, logger: logging.Logger, **_: Any) -> None:
        reconciler.forget(body)
        await deps.controller.forget(ClusterKey(namespace, name))
        if await deps.kube().delete(*RACK_BINDING, binding_name(namespace, name)):
            logger.info("deleted the brokers' ClusterRoleBinding %s", binding_name(namespace, name))
        logger.info("cluster deleted; its objects go with it (owner references)")
