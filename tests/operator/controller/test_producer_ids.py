"""AllocateProducerIds (KIP-730): disjoint blocks, only for a registered broker of the current epoch."""

from __future__ import annotations

from controller_helpers import Cluster

from tinystream.operator.controller import (
    AllocateProducerIds,
    ControllerError,
    ControllerState,
    ProducerIdsAllocated,
)
from tinystream.operator.controller.core import PRODUCER_ID_BLOCK_SIZE


def _block(decision) -> tuple[int, int]:
    (action,) = [a for a in decision.actions if isinstance(a, ProducerIdsAllocated)]
    return action.producer_id_start, action.producer_id_len


def test_blocks_are_disjoint_across_brokers_and_the_image_does_not_change() -> None:
    c = Cluster()
    c.register(1)
    c.register(2)
    version = c.image.version
    blocks = []
    for broker_id in (1, 2, 1):
        decision = c.apply(AllocateProducerIds(broker_id=broker_id, broker_epoch=c.image.brokers[broker_id].epoch))
        assert not decision.image_changed
        blocks.append(_block(decision))
    assert blocks == [(0, PRODUCER_ID_BLOCK_SIZE), (1000, 1000), (2000, 1000)]
    assert c.image.version == version
    assert c.state.next_producer_id_start == 3000


def test_stale_epoch_and_unknown_broker_are_refused_with_kafkas_errors() -> None:
    c = Cluster()
    c.register(1)
    epoch = c.image.brokers[1].epoch
    stale = c.apply(AllocateProducerIds(broker_id=1, broker_epoch=epoch - 1), ok=False)
    assert stale.error is ControllerError.STALE_BROKER_EPOCH
    unknown = c.apply(AllocateProducerIds(broker_id=9, broker_epoch=epoch), ok=False)
    assert unknown.error is ControllerError.BROKER_ID_NOT_REGISTERED
    assert c.state.next_producer_id_start == 0  # refusals hand out nothing


def test_the_counter_survives_to_dict_and_old_states_load_with_zero() -> None:
    c = Cluster()
    c.register(1)
    c.apply(AllocateProducerIds(broker_id=1, broker_epoch=c.image.brokers[1].epoch))
    data = c.state.to_dict()
    assert data["next_producer_id_start"] == 1000
    assert ControllerState.from_dict(data) == c.state
    del data["next_producer_id_start"]  # a state saved before KIP-730 support
    assert ControllerState.from_dict(data).next_producer_id_start == 0
