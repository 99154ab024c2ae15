"""A cluster's reconcile passes take turns: the change handler and the health timer never overlap."""

from __future__ import annotations

import asyncio
from typing import Any

from tinystream.operator.k8s.cluster_reconciler import ClusterReconciler


class Recording(ClusterReconciler):
    """The pass's I/O replaced by a pause that records how many passes run at once."""

    def __init__(self) -> None:
        super().__init__(deps=None)  # type: ignore[arg-type]
        self.running = self.most = 0

    async def observe(self, *args: Any) -> None:  # the pass's first I/O
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0.05)
        self.running -= 1
        raise asyncio.CancelledError  # stops the pass here: nothing else of it is under test


def body(uid: str) -> dict[str, Any]:
    return {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster",
            "metadata": {"name": f"c-{uid}", "namespace": "ns", "uid": uid, "generation": 1}, "spec": {"brokers": 3}}


async def _passes(reconciler: Recording, *bodies: dict[str, Any]) -> None:
    calls = [reconciler.reconcile(b, {}, None, None) for b in bodies]  # type: ignore[arg-type]
    for outcome in await asyncio.gather(*calls, return_exceptions=True):
        assert isinstance(outcome, asyncio.CancelledError)


async def test_two_passes_of_one_cluster_take_turns():
    reconciler = Recording()
    await _passes(reconciler, body("a"), body("a"), body("a"))
    assert reconciler.most == 1


async def test_passes_of_different_clusters_still_run_together():
    reconciler = Recording()
    await _passes(reconciler, body("a"), body("b"))
    assert reconciler.most == 2
    reconciler.forget(body("a"))
    assert "a" not in reconciler._passes
