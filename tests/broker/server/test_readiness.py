"""Readiness of a replicated broker (the pod's readiness probe): pure decisions from the image."""

from __future__ import annotations

from tinystream.broker.server.readiness import replicated_readiness


def image(*, fenced: bool = False, isr=(0, 1), leader: int = 1, brokers=(0, 1)) -> dict:
    return {
        "version": 7,
        "brokers": [{"broker_id": b, "fenced": fenced and b == 0} for b in brokers],
        "topics": [{"name": "orders", "partitions": [
            {"partition": 0, "leader": leader, "replicas": [0, 1], "isr": list(isr)},
            {"partition": 1, "leader": 1, "replicas": [1], "isr": [1]},  # not ours
        ]}],
    }


def test_ready_when_registered_unfenced_and_in_every_isr():
    state = replicated_readiness(image(), 0)
    assert state.ready and "image v7" in state.reason


def test_not_ready_before_any_image_or_registration():
    assert not replicated_readiness(None, 0).ready
    assert "not registered" in replicated_readiness(image(brokers=(1,)), 0).reason


def test_not_ready_while_fenced():
    state = replicated_readiness(image(fenced=True), 0)
    assert not state.ready and "fenced" in state.reason


def test_not_ready_while_catching_up_names_the_partitions():
    state = replicated_readiness(image(isr=(1,)), 0)
    assert not state.ready and state.lagging == ["orders-0"] and "1 partition" in state.reason


def test_offline_partition_does_not_hold_readiness_back():
    assert replicated_readiness(image(isr=(1,), leader=-1), 0).ready
