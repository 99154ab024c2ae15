"""kopf handlers for Topic: each a thin call into topic_reconciler.TopicReconciler.

create/update/resume validate and apply; a timer repeats that pass every
deps.health_interval_s and, between, copies leaders and ISR from the
controller into status when they change (every deps.placement_interval_s),
so a failover shows in seconds.
Delete has a finalizer (the data must be removed), released whenever the topic cannot be deleted any more (topic_reconciler.py).
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

    # One timer per Topic (a second one made kopf's stop of both at deletion race the finalizer): every
    # tick refreshes leaders and ISR in status; every health_interval_s it is the full pass (topic_reconciler).
    tick_s = min(deps.placement_interval_s, deps.health_interval_s)

    @kopf.timer(*TOPICS, interval=tick_s, initial_delay=tick_s, id=handler_id("topic_health"), registry=registry)
    @deps.metrics.instrument("topic_health")
    async def topic_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.tick(body, status, patch, logger)

    @kopf.on.delete(*TOPICS, id=handler_id("topic_deleted"), registry=registry)
    @deps.metrics.instrument("topic_deleted")
    async def topic_deleted(body: Any, status: Any, retry: int, logger: logging.Logger, **_: Any) -> None:
        await reconciler.delete(body, status, retry, logger)
