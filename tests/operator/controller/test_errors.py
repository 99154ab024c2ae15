"""Error codes are Kafka's: checked against the protocol library's table."""

from __future__ import annotations

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.operator.controller import ControllerError, PlacementError


@pytest.mark.parametrize("error", list(ControllerError))
def test_every_code_matches_kafka(error: ControllerError) -> None:
    assert getattr(ErrorCode, error.name.lower()).value == error.code


def test_lookup_by_code_and_name() -> None:
    assert ControllerError.from_code(74) is ControllerError.FENCED_LEADER_EPOCH
    assert ControllerError.from_name("INELIGIBLE_REPLICA").code == 107
    with pytest.raises(ValueError, match="9999"):
        ControllerError.from_code(9999)
    with pytest.raises(ValueError, match="NOPE"):
        ControllerError.from_name("NOPE")


def test_placement_error_carries_the_code() -> None:
    exc = PlacementError(ControllerError.INVALID_REPLICATION_FACTOR, "too few brokers")
    assert exc.error is ControllerError.INVALID_REPLICATION_FACTOR
    assert "INVALID_REPLICATION_FACTOR" in str(exc) and "too few brokers" in str(exc)
