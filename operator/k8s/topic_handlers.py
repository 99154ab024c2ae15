"""kopf handlers for Topic: each a thin call into topic_reconciler.TopicReconciler.

create/update/resume validate and apply; a timer refreshes the partition
state in status. Delete has a finalizer (the data must be removed), released
whenever the topic cannot be deleted any more (topic_reconciler.py).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.handler_ids import handler_id
from tinystream.operator.k8s.model import GROUP, TOPIC_PLURAL, VERSION
from tinystream.operator.k8s.topic_reconciler import TopicReconciler

TOPICS = (GROUP, VERSION, TOPIC_PLURAL)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    reconciler = TopicReconciler(deps)

    @kopf.on.create(*TOPICS, id=handler_id("topic_changed"), registry=registry)
    @kopf.on.update(*TOPICS, id=handler_id("topic_changed"), registry=registry)
    @kopf.on.resume(*TOPICS, id=handler_id("topic_changed"), registry=registry)
    @deps.metrics.instrument("topic_changed")
    async def topic_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)

    @kopf.timer(*TOPICS, interval=deps.health_interval_s, initial_delay=deps.health_interval_s,
                id=handler_id("topic_health"), registry=registry)
    @deps.metrics.instrument("topic_health")
    async def topic_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)

    @kopf.on.delete(*TOPICS, id=handler_id("topic_deleted"), registry=registry)
    @deps.metrics.instrument("topic_deleted")
    async def topic_deleted(body: Any, status: Any, retry: int, logger: logging.Logger, **_: Any) -> None:
        await reconciler.delete(body, status, retry, logger)
