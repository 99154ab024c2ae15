"""The controller's whole state: image, settings, sessions, id sources.

Everything `apply` needs and nothing else, frozen, and round-tripping
through plain JSON-able dicts so the local driver can keep it in a file and
the operator in a CR status. Dict shape::

    {"schema_version": 1,
     "config": {"broker.session.timeout.ms": 9000, ...},
     "ids": {"seed": 42, "counter": 3},
     "sessions": [{"broker_id": 1, "last_contact_ms": ..., "metadata_version": 7}],
     "next_producer_id_start": 3000,
     "image": <MetadataImage.to_dict()>}

Sessions change on every heartbeat while the image does not; a driver may
persist only when `Decision.image_changed` (or the id sources moved) and
send `ControllerActivated` after loading (KRaft keeps heartbeats in memory
only, for the same reason). `next_producer_id_start` is the first producer id
no broker has been given yet (Kafka's ProducerIdsRecord, KIP-730); a state
saved before it existed loads with 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tinystream.operator.controller.codec import (
    SCHEMA_VERSION,
    check_schema_version,
    convert,
    from_plain,
    frozen_mapping,
    to_plain,
)
from tinystream.operator.controller.config import ControllerConfig
from tinystream.operator.controller.errors import StateFormatError
from tinystream.operator.controller.ids import IdSource
from tinystream.operator.controller.image import MetadataImage
from tinystream.operator.controller.invariants import violations
from tinystream.operator.controller.liveness import BrokerSession


@dataclass(frozen=True, slots=True, kw_only=True)
class _SessionEntry:
    broker_id: int
    last_contact_ms: int
    metadata_version: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerState:
    image: MetadataImage
    ids: IdSource
    config: ControllerConfig = field(default_factory=ControllerConfig)
    sessions: Mapping[int, BrokerSession] = field(default_factory=dict)
    next_producer_id_start: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "sessions", frozen_mapping(self.sessions))

    @classmethod
    def bootstrap(cls, *, cluster_id: str, seed: int, config: ControllerConfig | None = None) -> ControllerState:
        """An empty cluster. `seed` fixes topic ids and placement (see ids.py)."""
        return cls(
            image=MetadataImage.empty(cluster_id=cluster_id),
            ids=IdSource(seed=seed),
            config=config or ControllerConfig(),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "config": self.config.to_dict(),
            "ids": self.ids.to_dict(),
            "sessions": [
                to_plain(_SessionEntry(broker_id=b, last_contact_ms=s.last_contact_ms, metadata_version=s.metadata_version))
                for b, s in sorted(self.sessions.items())
            ],
            "next_producer_id_start": self.next_producer_id_start,
            "image": self.image.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, check: bool = True) -> ControllerState:
        """Rebuild a state; with `check`, refuse an image that breaks an invariant."""
        check_schema_version(data, what="controller state")
        unknown = sorted(set(data) - {"schema_version", "config", "ids", "sessions", "next_producer_id_start", "image"})
        if unknown:
            raise StateFormatError(f"$: unknown field(s) {unknown} for ControllerState")
        image = MetadataImage.from_dict(data.get("image"))  # type: ignore[arg-type]
        if check:
            problems = violations(image)
            if problems:
                raise StateFormatError("$.image: " + "; ".join(problems[:5]))
        sessions = {}
        for i, item in enumerate(convert(tuple[Any, ...], data.get("sessions", []), path="$.sessions")):
            entry = from_plain(_SessionEntry, item, path=f"$.sessions[{i}]")
            sessions[entry.broker_id] = BrokerSession(
                last_contact_ms=entry.last_contact_ms, metadata_version=entry.metadata_version
            )
        next_pid = convert(int, data.get("next_producer_id_start", 0), path="$.next_producer_id_start")
        if next_pid < 0:
            raise StateFormatError(f"$.next_producer_id_start: {next_pid} is negative")
        return cls(
            image=image,
            ids=from_plain(IdSource, data.get("ids"), path="$.ids"),
            config=ControllerConfig.from_dict(data.get("config", {})),
            sessions=sessions,
            next_producer_id_start=next_pid,
        )
