"""Broker pods whose process is not running, from Pod events: pure.

The controller core learns that a broker died when its session times out
(`broker.session.timeout.ms`, 9 s by default). Kubernetes often knows
sooner: the kubelet reports the broker container terminated or waiting to
restart (CrashLoopBackOff), and a force-deleted pod is gone at once. The
operator turns such a Pod event into `BrokerDown`, which ends the broker's
session now (ExpireSession): leadership moves without waiting for the timeout.

Only a container that is not running counts: a running one may already be
a new incarnation that registered (registering ends the old session anyway),
and a container that never started has registered nothing. An event may be
handled late, so the handler reads the pod again and acts only if
`process_gone(current)` still holds: a process that is not running at that
moment cannot have registered a new incarnation a few milliseconds later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tinystream.operator.k8s.reconcile import BrokerDown

BROKER_CONTAINER = "broker"


def _broker_container(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((c for c in statuses if c.get("name") == BROKER_CONTAINER), None)


def _ordinal(pod: Mapping[str, Any]) -> int | None:
    name = (pod.get("metadata") or {}).get("name") or ""
    suffix = name.rsplit("-", 1)[-1]
    return int(suffix) if suffix.isdigit() else None


def broker_down(pod: Mapping[str, Any], *, deleted: bool = False) -> BrokerDown | None:
    """`BrokerDown` when this broker pod's process is certainly not running, else None."""
    ordinal = _ordinal(pod)
    if ordinal is None:
        return None
    name = pod["metadata"]["name"]
    if deleted:
        return BrokerDown(ordinal, f"pod {name} was deleted")
    container = _broker_container(pod)
    if container is None:
        return None
    state = container.get("state") or {}
    if "running" in state:
        return None
    if "terminated" in state:
        ended = state["terminated"]
        why = ended.get("reason") or f"exit code {ended.get('exitCode')}"
        return BrokerDown(ordinal, f"the broker container of {name} terminated ({why})")
    started_before = container.get("restartCount", 0) > 0 or "terminated" in (container.get("lastState") or {})
    if "waiting" in state and started_before:
        why = state["waiting"].get("reason") or "waiting"
        return BrokerDown(ordinal, f"the broker container of {name} is not running ({why})")
    return None


def process_gone(current: Mapping[str, Any] | None) -> bool:
    """The pod as read now (None: gone) runs no broker process that could have registered."""
    if current is None:
        return True
    container = _broker_container(current)
    return container is None or "running" not in (container.get("state") or {})
