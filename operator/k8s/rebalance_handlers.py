"""kopf handlers for TinyStreamRebalance: each a thin call into rebalance_reconciler.RebalanceReconciler.

create/update/resume (an annotation change is an update) take the next
step at once; a timer every deps.placement_interval_s follows a running
rebalance (verify) and retries a step the controller could not take.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.handler_ids import handler_id
from tinystream.operator.k8s.model import GROUP, REBALANCE_PLURAL, VERSION
from tinystream.operator.k8s.rebalance_reconciler import RebalanceReconciler

REBALANCES = (GROUP, VERSION, REBALANCE_PLURAL)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    reconciler = RebalanceReconciler(deps)

    @kopf.on.create(*REBALANCES, id=handler_id("rebalance_changed"), registry=registry)
    @kopf.on.update(*REBALANCES, id=handler_id("rebalance_changed"), registry=registry)
    @kopf.on.resume(*REBALANCES, id=handler_id("rebalance_changed"), registry=registry)
    @deps.metrics.instrument("rebalance_changed")
    async def rebalance_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)

    @kopf.timer(*REBALANCES, interval=deps.placement_interval_s, initial_delay=deps.placement_interval_s,
                id=handler_id("rebalance_progress"), registry=registry)
    @deps.metrics.instrument("rebalance_progress")
    async def rebalance_progress(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger,
                                 **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)
