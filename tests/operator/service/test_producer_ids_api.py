"""POST /v1/producer-ids (KIP-730): blocks are saved before they are answered."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_helpers import Controller

from tinystream.controller_client import ControllerRefused
from tinystream.operator.controller import AllocateProducerIds, ControllerState, RegisterBroker, apply
from tinystream.operator.service import must_persist


async def test_blocks_are_disjoint_and_survive_a_controller_restart(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    first = Controller(state_file)
    await first.start()
    try:
        await first.start_broker(1)
        await first.start_broker(2)
        a = await first.client.allocate_producer_ids(1, first.epochs[1])
        b = await first.client.allocate_producer_ids(2, first.epochs[2])
        assert (a.broker_id, a.producer_id_start, a.producer_id_len) == (1, 0, 1000)
        assert (b.broker_id, b.producer_id_start, b.producer_id_len) == (2, 1000, 1000)
        epochs = dict(first.epochs)
    finally:
        await first.stop()
    second = Controller(state_file)
    await second.start()
    try:
        c = await second.client.allocate_producer_ids(1, epochs[1])
        assert c.producer_id_start == 2000  # never a block handed out before the restart
    finally:
        await second.stop()


async def test_stale_epoch_and_unknown_broker_answer_kafka_errors(tmp_path: Path) -> None:
    controller = Controller(tmp_path / "state.json")
    await controller.start()
    try:
        await controller.start_broker(1)
        with pytest.raises(ControllerRefused) as stale:
            await controller.client.allocate_producer_ids(1, controller.epochs[1] - 1)
        assert (stale.value.error, stale.value.status) == ("STALE_BROKER_EPOCH", 409)
        with pytest.raises(ControllerRefused) as unknown:
            await controller.client.allocate_producer_ids(7, 0)
        assert (unknown.value.error, unknown.value.status) == ("BROKER_ID_NOT_REGISTERED", 404)
        status, body = await controller.request("POST", "/v1/producer-ids", {"broker_id": 1})
        assert status == 400 and body["error"] == "INVALID_REQUEST"
        doc = await controller.client.openapi()
        assert "/v1/producer-ids" in doc["paths"]
    finally:
        await controller.stop()


def test_an_allocation_must_be_persisted_although_the_image_is_unchanged() -> None:
    state = ControllerState.bootstrap(cluster_id="c", seed=1)
    state = apply(state, RegisterBroker(broker_id=1, incarnation_id="i", host="h", port=1), 0).state
    decision = apply(state, AllocateProducerIds(broker_id=1, broker_epoch=state.image.brokers[1].epoch), 0)
    assert decision.ok and not decision.image_changed
    assert must_persist(state, decision)
