"""The Topic timer's schedule: the full pass every health interval, the placement refresh on the ticks between."""

from __future__ import annotations

import datetime
import logging

import kopf

from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.topic_reconciler import TopicReconciler

BODY = {"metadata": {"name": "orders", "namespace": "ns", "uid": "u1"}, "spec": {"cluster": "demo", "partitions": 1}}


class Recording(TopicReconciler):
    """The timer's choice, without the passes' I/O."""

    def __init__(self, deps: Deps) -> None:
        super().__init__(deps)
        self.calls: list[str] = []

    async def reconcile(self, body, status, patch, logger) -> None:
        self.last_full[body["metadata"]["uid"]] = self.deps.clock()  # as the real pass does first
        self.calls.append("full")

    async def refresh_placement(self, body, status, patch) -> None:
        self.calls.append("refresh")


async def test_the_timer_refreshes_placement_between_full_passes() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    deps = Deps(connect=lambda **_: None, health_interval_s=30.0, placement_interval_s=2.0, clock=lambda: now)
    reconciler = Recording(deps)
    log = logging.getLogger("test")
    for _ in range(3):  # ticks at 0, 2, 4 s after start: a full pass (none yet), then refreshes
        await reconciler.tick(BODY, {}, kopf.Patch(), log)
        now += datetime.timedelta(seconds=2)
    now += datetime.timedelta(seconds=26)  # 32 s after the full pass
    await reconciler.tick(BODY, {}, kopf.Patch(), log)
    assert reconciler.calls == ["full", "refresh", "refresh", "full"]
