"""Broker liveness: sessions, fencing, and who may lead or join an ISR.

KRaft's rules (KIP-500, KIP-631):

* A broker registers with an incarnation id and gets a broker epoch. It is
  *fenced* from then on, and unfenced only once a heartbeat reports that it
  has applied the image that holds its own registration (it has "caught up").
* Every heartbeat renews its session. A broker silent for longer than
  `broker.session.timeout.ms` (default 9000) is fenced.
* A registration with a new incarnation id is a restarted process: its old
  session ends at once (the broker is fenced) and the new one starts fenced.
* A fenced broker leaves every ISR (except as the last member, see isr.py)
  and leads nothing.

Draining is TinyStream's persistent form of KRaft's controlled shutdown
(KIP-841): a drained broker stays live but gets no new replicas, may not
*join* an ISR, and hands its leaderships to other ISR members.

Sessions are controller memory, not metadata: they live in the state (so a
driver may persist them) but never in the image, and a driver that reloads a
state sends `ControllerActivated` so downtime does not fence everyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tinystream.operator.controller.image import BrokerRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSession:
    """When the controller last heard from a broker, and what image it had."""

    last_contact_ms: int
    metadata_version: int = -1


def session_expired(session: BrokerSession | None, *, now_ms: int, timeout_ms: int) -> bool:
    """KRaft's BrokerHeartbeatManager: valid while last contact + timeout >= now."""
    if session is None:
        return True
    return session.last_contact_ms + timeout_ms < now_ms


def expired_brokers(
    brokers: Mapping[int, BrokerRecord],
    sessions: Mapping[int, BrokerSession],
    *,
    now_ms: int,
    timeout_ms: int,
) -> list[int]:
    """Unfenced brokers whose session has expired, by id (fenced ones need nothing)."""
    return sorted(
        b
        for b, record in brokers.items()
        if not record.fenced and session_expired(sessions.get(b), now_ms=now_ms, timeout_ms=timeout_ms)
    )


def caught_up(broker: BrokerRecord, *, metadata_version: int) -> bool:
    """KIP-631: a broker is caught up once it has applied its own registration."""
    return metadata_version >= broker.epoch


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Who may do what, derived from the broker records of one image."""

    live: frozenset[int]  # registered and unfenced
    drained: frozenset[int]  # registered and drained (live or not)

    @classmethod
    def of(cls, brokers: Mapping[int, BrokerRecord]) -> ClusterView:
        return cls(
            live=frozenset(b for b, r in brokers.items() if not r.fenced),
            drained=frozenset(b for b, r in brokers.items() if r.drained),
        )

    def can_lead(self, broker_id: int) -> bool:
        return broker_id in self.live

    def isr_eligible(self, broker_id: int) -> bool:
        """May join (or stay in a non-singleton) ISR: live and not drained (KIP-841)."""
        return broker_id in self.live and broker_id not in self.drained

    def placeable(self) -> list[int]:
        """Brokers that may receive new replicas, by id."""
        return sorted(self.live - self.drained)
