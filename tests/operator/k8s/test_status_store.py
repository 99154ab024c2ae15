"""The controller state in a TinyStreamCluster's status: encoding, size limits, round trip."""

from __future__ import annotations

import pytest

from tinystream.operator.controller import BrokerHeartbeat, ControllerState, CreateTopic, RegisterBroker, apply
from tinystream.operator.k8s import status_store
from tinystream.operator.k8s.status_store import decode_state, encode_state
from tinystream.operator.service.errors import StateFileError


def state_with(partitions: int) -> ControllerState:
    state = ControllerState.bootstrap(cluster_id="c1", seed=1)
    state = apply(state, RegisterBroker(broker_id=0, incarnation_id="i0", host="h", port=9092), 0).state
    epoch = state.image.brokers[0].epoch
    state = apply(state, BrokerHeartbeat(broker_id=0, broker_epoch=epoch, metadata_version=state.image.version), 0).state
    decision = apply(state, CreateTopic(topic="t", partitions=partitions, replication_factor=1), 0)
    assert decision.error is None, decision.message
    return decision.state


def test_small_state_is_plain_json_and_round_trips():
    state = state_with(2)
    stored = encode_state(state)
    assert stored["encoding"] == "json" and stored["metadataVersion"] == state.image.version
    assert decode_state(stored, where="x").to_dict() == state.to_dict()


def test_large_state_is_compressed_and_round_trips(monkeypatch):
    monkeypatch.setattr(status_store, "COMPRESS_ABOVE", 4096)
    state = state_with(500)
    stored = encode_state(state)
    assert stored["encoding"] == "zlib+base64"
    assert stored["bytes"] > status_store.COMPRESS_ABOVE > len(stored["data"])
    assert decode_state(stored, where="x").image.topic("t").topic_id == state.image.topic("t").topic_id


def test_state_over_the_limit_is_refused_as_a_storage_error(monkeypatch):
    monkeypatch.setattr(status_store, "MAX_STORED_BYTES", 100)
    with pytest.raises(OSError, match="over the 100-byte limit"):  # the service answers KAFKA_STORAGE_ERROR
        encode_state(state_with(2))


def test_garbage_in_status_is_a_clear_error():
    with pytest.raises(StateFileError, match="not a controller state"):
        decode_state({"encoding": "json", "data": "{}"}, where="TinyStreamCluster a/b")
    with pytest.raises(StateFileError, match="no data string"):
        decode_state({"data": 3}, where="TinyStreamCluster a/b")
