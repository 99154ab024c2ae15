"""kopf handlers for TinyStreamNodePool: each a thin call into pool_reconciler.PoolReconciler.

create/update/resume run one pass; a timer repeats it (a scale-down's drain, a cluster created or
opted in after its pools). No delete handler: the pool's StatefulSet is owned by the cluster (as
Strimzi's pods are the Kafka resource's), so deleting a pool removes no broker; scale it to 0 first.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.handler_ids import handler_id
from tinystream.operator.k8s.model import GROUP, POOL_PLURAL, VERSION
from tinystream.operator.k8s.pool_reconciler import PoolReconciler

POOLS = (GROUP, VERSION, POOL_PLURAL)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    reconciler = PoolReconciler(deps)

    @kopf.on.create(*POOLS, id=handler_id("pool_changed"), registry=registry)
    @kopf.on.update(*POOLS, id=handler_id("pool_changed"), registry=registry)
    @kopf.on.resume(*POOLS, id=handler_id("pool_changed"), registry=registry)
    @deps.metrics.instrument("pool_changed")
    async def pool_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)

    @kopf.timer(*POOLS, interval=deps.health_interval_s, initial_delay=deps.health_interval_s,
                id=handler_id("pool_health"), registry=registry)
    @deps.metrics.instrument("pool_health")
    async def pool_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)
