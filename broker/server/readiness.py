"""When a broker is ready for traffic (the pod's readiness probe, `GET /readyz`): pure.

A standalone broker (no controller) is ready once it serves. A replicated
broker is ready when the controller's image it applied lists it registered
and unfenced, and it is in the ISR of every partition it replicates whose
leader is up: caught up, so a rolling update may take the next broker down.
A partition with no leader (offline) does not hold readiness back: this
broker may be the replica that brings it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    reason: str
    lagging: list[str] = field(default_factory=list)  # "topic-partition" not yet in the ISR


def replicated_readiness(image: Mapping[str, Any] | None, broker_id: int) -> Readiness:
    if image is None:
        return Readiness(False, "no metadata image from the controller yet")
    me = next((b for b in image.get("brokers", ()) if b["broker_id"] == broker_id), None)
    if me is None:
        return Readiness(False, "not registered in the controller's image")
    if me.get("fenced"):
        return Readiness(False, "fenced by the controller (no heartbeat seen yet)")
    lagging = [f"{topic['name']}-{p['partition']}"
               for topic in image.get("topics", ())
               for p in topic.get("partitions", ())
               if broker_id in p["replicas"] and p["leader"] >= 0 and broker_id not in p["isr"]]
    if lagging:
        return Readiness(False, f"catching up: not in the ISR of {len(lagging)} partition(s)", lagging[:20])
    return Readiness(True, f"registered, in the ISR of every partition it replicates (image v{image['version']})")
