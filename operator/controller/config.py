"""The controller's own settings, kept in its state.

Names and defaults are Kafka's controller/broker settings; the dict form uses
the Kafka names, like every other layer of TinyStream's configuration. A
driver builds this from `ControllerSettings` / `OperatorSettings` and may
swap it in a loaded state with `dataclasses.replace(state, config=...)`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.operator.controller.codec import convert
from tinystream.operator.controller.errors import StateFormatError


class PreferredElection(enum.Enum):
    """When leadership returns to the preferred replica.

    ON_TICK is Kafka's auto.leader.rebalance.enable: the driver sends
    `ElectPreferredLeaders` every leader.imbalance.check.interval.seconds
    (Kafka: 300). IMMEDIATE moves it back within the step that made the
    preferred replica eligible again (e.g. the ISR expansion that re-added it).
    """

    ON_TICK = "on_tick"
    IMMEDIATE = "immediate"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    broker_session_timeout_ms: int = 9000  # broker.session.timeout.ms (Kafka: 9000)
    num_partitions: int = 1  # num.partitions (Kafka: 1)
    default_replication_factor: int = 1  # default.replication.factor (Kafka: 1)
    unclean_leader_election_enable: bool = False  # cluster default (Kafka: false)
    delete_topic_enable: bool = True  # delete.topic.enable (Kafka: true)
    preferred_leader_election: PreferredElection = PreferredElection.ON_TICK
    # Partitions in the whole cluster (KIP-578's max.partitions): one CreateTopics must not make
    # every broker open, replicate and hold more partitions than it can.
    max_partitions: int = 20_000

    def __post_init__(self) -> None:
        for name in ("broker_session_timeout_ms", "num_partitions", "default_replication_factor", "max_partitions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{_NAMES[name]} must be a positive integer, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr, key in _NAMES.items():
            value = getattr(self, attr)
            out[key] = value.value if isinstance(value, enum.Enum) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControllerConfig:
        if not isinstance(data, Mapping):
            raise StateFormatError("$.config: expected an object")
        by_key = {key: attr for attr, key in _NAMES.items()}
        unknown = sorted(set(data) - set(by_key))
        if unknown:
            raise StateFormatError(f"$.config: unknown setting(s) {unknown}")
        hints = {
            "broker_session_timeout_ms": int,
            "num_partitions": int,
            "default_replication_factor": int,
            "unclean_leader_election_enable": bool,
            "delete_topic_enable": bool,
            "preferred_leader_election": PreferredElection,
            "max_partitions": int,
        }
        kwargs = {by_key[k]: convert(hints[by_key[k]], v, path=f"$.config.{k}") for k, v in data.items()}
        try:
            return cls(**kwargs)
        except ValueError as exc:
            raise StateFormatError(f"$.config: {exc}") from exc


_NAMES = {
    "broker_session_timeout_ms": "broker.session.timeout.ms",
    "num_partitions": "num.partitions",
    "default_replication_factor": "default.replication.factor",
    "unclean_leader_election_enable": "unclean.leader.election.enable",
    "delete_topic_enable": "delete.topic.enable",
    "preferred_leader_election": "preferred.leader.election",
    "max_partitions": "max.partitions",
}


def overrides_from_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The ControllerConfig fields named (by Kafka name) among `settings`, typed; other keys are ignored.

    A TinyStreamCluster's spec.config holds broker settings and these cluster-wide ones together, values
    integer-or-string (booleans quoted). Found on a real cluster: `default.replication.factor: 3` there
    reached the brokers but not the controller, which created every RF -1 topic (KIP-464) with 1."""
    by_key = {key: attr for attr, key in _NAMES.items()}
    picked = {key: value for key, value in settings.items() if key in by_key}
    typed: dict[str, Any] = {}
    for key, value in picked.items():
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        typed[key] = value
    parsed = ControllerConfig.from_dict(typed)  # StateFormatError names a bad value
    return {by_key[key]: getattr(parsed, by_key[key]) for key in typed}

