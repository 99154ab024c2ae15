"""Leader election for one partition: who leads, given who is alive.

The rules are KRaft's PartitionChangeBuilder, without ELR (KIP-966 is not
followed on purpose; this is Kafka's pre-ELR behaviour):

* A new leader comes only from the ISR, and only a live (unfenced) broker
  may lead. Candidates are tried in *replica* order, so the preferred
  replica wins whenever it can.
* A valid leader is kept (elections move leadership only when they must);
  a drained leader is replaced when another live, undrained ISR member
  exists (controlled shutdown, KIP-841), and kept otherwise: a drained
  broker that is the only in-sync copy keeps serving instead of taking its
  partition offline (TinyStream's drain is persistent, and the new replicas
  of a scale-down reassignment must be able to fetch from it).
* With no live ISR member the partition is offline (leader -1) unless the
  topic allows unclean election, which picks the first live replica outside
  the ISR and makes it the whole ISR, in the RECOVERING state of KIP-704.
* Preferred-leader election moves leadership to replicas[0] when it is in
  the ISR, live and not drained.

Epochs are not touched here: the image builder bumps the leader epoch on
every leader change and the partition epoch on every change (KIP-380/KRaft).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from tinystream.operator.controller.image import NO_LEADER
from tinystream.operator.controller.liveness import ClusterView


class ElectionReason(enum.Enum):
    """Why a partition's leader changed."""

    LEADER_FENCED = "LEADER_FENCED"  # the leader lost its session, restarted or was unregistered
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"  # the leader was drained
    REASSIGNMENT = "REASSIGNMENT"  # the leader left the replica set
    PREFERRED = "PREFERRED"  # preferred-leader election
    UNCLEAN = "UNCLEAN"  # elected from outside the ISR
    ONLINE = "ONLINE"  # an offline partition has a leader again
    OFFLINE = "OFFLINE"  # nobody may lead: leader -1
    NEW = "NEW"  # a partition was created


@dataclass(frozen=True, slots=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def elect_leader(
    *,
    replicas: Sequence[int],
    isr: Sequence[int],
    leader: int,
    view: ClusterView,
    unclean_allowed: bool,
) -> Election:
    """The leader (and ISR) a partition should have; keeps a valid leader."""
    isr = tuple(isr)
    in_sync_live = [r for r in replicas if r in isr and view.can_lead(r)]
    undrained = [r for r in in_sync_live if r not in view.drained]
    if leader in in_sync_live and (leader not in view.drained or not undrained):
        return Election(leader, isr)
    if undrained:
        return Election(undrained[0], isr)
    if in_sync_live:
        return Election(in_sync_live[0], isr)
    if unclean_allowed:
        outside = [r for r in replicas if r not in isr and view.can_lead(r)]
        if outside:
            pick = next((r for r in outside if r not in view.drained), outside[0])
            return Election(pick, (pick,), unclean=True)
    return Election(NO_LEADER, isr)


def preferred_leader(*, replicas: Sequence[int], isr: Sequence[int], leader: int, view: ClusterView) -> int | None:
    """replicas[0] if a preferred-leader election should move leadership to it."""
    preferred = replicas[0]
    if preferred != leader and preferred in isr and view.isr_eligible(preferred):
        return preferred
    return None
