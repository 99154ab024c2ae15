"""overrides_from_settings: a TinyStreamCluster's spec.config to the controller's own settings."""

from __future__ import annotations

import pytest

from tinystream.operator.controller import ControllerConfig, StateFormatError
from tinystream.operator.controller.config import overrides_from_settings


def test_cluster_wide_settings_are_picked_and_typed_broker_ones_ignored() -> None:
    settings = {"default.replication.factor": 3, "num.partitions": "6", "unclean.leader.election.enable": "true",
                "min.insync.replicas": 2, "log.retention.ms": 1000}
    overrides = overrides_from_settings(settings)
    assert overrides == {"default_replication_factor": 3, "num_partitions": 6, "unclean_leader_election_enable": True}
    assert ControllerConfig(**overrides).default_replication_factor == 3


def test_nothing_set_changes_nothing() -> None:
    assert overrides_from_settings({"min.insync.replicas": 2}) == {}


def test_a_bad_value_is_named() -> None:
    with pytest.raises(StateFormatError, match="default.replication.factor"):
        overrides_from_settings({"default.replication.factor": 0})
