"""kopf handler for broker pods: a broker whose process is certainly not running ends its session now.

An event saying a broker's process is not running (its container terminated
or crash-looping, the pod deleted) ends the broker's session at once
(pod_health.py decides), so leadership moves before the session timeout.
Only broker pods are watched (a server-side label selector, set at start-up).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.controller_port import ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.handler_ids import handler_id
from tinystream.operator.k8s.pod_health import broker_down, process_gone
from tinystream.operator.k8s.resources import BROKER_POD_LABELS


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:

    @kopf.on.event("v1", "pods", labels=BROKER_POD_LABELS, id=handler_id("broker_pod_event"), registry=registry)
    @deps.metrics.instrument("broker_pod_event")
    async def broker_pod_event(event: Any, body: Any, namespace: str, logger: logging.Logger, **_: Any) -> None:
        """A broker process that is certainly not running ends its session now, not at the timeout."""
        down = broker_down(body, deleted=event.get("type") == "DELETED")
        cluster = ((body.get("metadata") or {}).get("labels") or {}).get("tinystream.io/cluster")
        if down is None or not cluster:
            return
        key = ClusterKey(namespace, cluster)
        if down.broker_id in await deps.controller.fenced(key):
            return  # already out: nothing to do, nothing to repeat
        if not process_gone(await deps.kube().get("v1", "Pod", body["metadata"]["name"], namespace)):
            return  # handled late: a new process runs now and may have registered; leave its session alone
        try:
            await deps.controller.broker_actions(key, [down])
        except (ControllerUnavailable, ControllerRefused) as exc:
            logger.info("broker %d down, session not ended early (%s); the session timeout will", down.broker_id, exc)
            return
        if event.get("type") != "DELETED":
            kopf.warn(body, reason="BrokerDown", message=f"{down.reason}: its session ended, leadership moves now")
