"""TinyStreamRebalance against the real API server: proposal in status, approve, Ready; stop; the CRD's rule.

The controller behind the operator is the fake (fake_controller.py), which runs the real optimizer over
its placement and finishes moves at once (or holds them, to stop them).
"""

from __future__ import annotations

from collections import Counter

import pytest
from fake_controller import FakeController
from kmock_helpers import running_operator
from real_api import connection

from tinystream.operator.k8s.controller_port import ClusterKey

pytestmark = pytest.mark.timeout(120)
TS = "tinystream.io/v1alpha1"
PLURAL = "tinystreamrebalances"
ANNOTATION = "tinystream.io/rebalance"


def rebalance(name: str, **spec) -> dict:
    return {"apiVersion": TS, "kind": "TinyStreamRebalance", "metadata": {"name": name},
            "spec": {"cluster": "demo", **spec}}


def state(name: str):
    return lambda o: o is not None and (o.get("status") or {}).get("state") == name


@pytest.fixture
async def controller(control_plane, namespace):
    fake = FakeController()
    fake.placement[(ClusterKey(namespace, "demo"), "skewed")] = [(0, 1), (1, 0)] * 3
    async with running_operator(control_plane.url, controller=fake, connection=connection(control_plane)):
        yield fake


async def test_a_proposal_is_reviewed_then_approved(api, controller, namespace) -> None:
    await api.create(TS, PLURAL, rebalance("spread"))
    ready = await api.wait_for(TS, PLURAL, "spread", state("ProposalReady"), timeout=30)
    result = ready["status"]["optimizationResult"]
    assert result["numReplicaMovements"] == 4 and result["imbalanceScoreAfter"] < result["imbalanceScoreBefore"]
    assert len(ready["status"]["proposal"]) == 4
    assert controller.rebalance_steps == []  # nothing moves before approval

    await api.patch(TS, PLURAL, "spread", {"metadata": {"annotations": {ANNOTATION: "approve"}}})
    done = await api.wait_for(TS, PLURAL, "spread", state("Ready"), timeout=30)
    assert ANNOTATION not in (done["metadata"].get("annotations") or {})
    assert controller.rebalance_steps[0] == "execute" and controller.rebalance_steps[-1] == "verify"
    assert set(controller.rebalance_throttles) == {None}  # no spec.throttle: no rate
    placement = controller.placement[(ClusterKey(namespace, "demo"), "skewed")]
    assert Counter(b for reps in placement for b in reps) == {0: 4, 1: 4, 2: 4}


async def test_a_running_rebalance_stops_on_the_annotation(api, controller, namespace) -> None:
    controller.hold_moves = True
    await api.create(TS, PLURAL, rebalance("drain", mode="remove-brokers", brokers=[1], throttle=1048576))
    await api.wait_for(TS, PLURAL, "drain", state("ProposalReady"), timeout=30)
    await api.patch(TS, PLURAL, "drain", {"metadata": {"annotations": {ANNOTATION: "approve"}}})
    moving = await api.wait_for(TS, PLURAL, "drain", state("Rebalancing"), timeout=30)
    assert moving["status"]["throttle"] == 1048576 and "at 1048576 bytes/s" in moving["status"]["message"]
    await api.patch(TS, PLURAL, "drain", {"metadata": {"annotations": {ANNOTATION: "stop"}}})
    stopped = await api.wait_for(TS, PLURAL, "drain", state("Stopped"), timeout=30)
    assert "6 running move(s) cancelled" in stopped["status"]["message"]
    # the rate reaches execute, and the same rate every step after, so the controller can take it out
    assert controller.rebalance_steps[0] == "execute" and controller.rebalance_steps[-1] == "stop"
    assert set(controller.rebalance_throttles) == {1048576}
    assert controller.placement[(ClusterKey(namespace, "demo"), "skewed")] == [(0, 1), (1, 0)] * 3


async def test_a_plan_no_broker_set_can_meet_is_not_ready(api, controller) -> None:
    await api.create(TS, PLURAL, rebalance("too-far", mode="remove-brokers", brokers=[0, 1]))
    refused = await api.wait_for(TS, PLURAL, "too-far", state("NotReady"), timeout=30)
    assert "only 1 broker(s) would remain" in refused["status"]["message"]


def test_the_crd_refuses_a_broker_mode_without_brokers(control_plane, namespace) -> None:
    body = rebalance("bad", mode="add-brokers")
    body["metadata"]["namespace"] = namespace
    status, reply = control_plane.request("POST", f"/apis/tinystream.io/v1alpha1/namespaces/{namespace}/{PLURAL}",
                                          body)
    assert status == 422 and "need spec.brokers" in str(reply), reply


def test_the_crd_refuses_a_throttle_below_one_byte(control_plane, namespace) -> None:
    body = rebalance("slow", throttle=0)
    body["metadata"]["namespace"] = namespace
    status, reply = control_plane.request("POST", f"/apis/tinystream.io/v1alpha1/namespaces/{namespace}/{PLURAL}",
                                          body)
    assert status == 422 and "spec.throttle" in str(reply), reply
