"""Settling one partition: the fixpoint every partition is kept at.

After any change to brokers, configs or a partition, the core settles every
partition against the current cluster view, in this order:

1. clean the ISR (fenced, drained, unregistered members leave; the last
   member stays) — isr.py;
2. complete a reassignment whose new replicas are all in sync — reassignment.py;
3. elect a leader if the current one may not lead (or is drained and can
   hand over) — election.py;
4. optionally, preferred-leader election.

The steps repeat until nothing changes (an unclean election can let a
reassignment complete, which can move the leader), so settling a settled
partition is a no-op: the image is always at this fixpoint after `apply`.
Epochs are left alone; the image builder bumps them once per event.
"""

from __future__ import annotations

import dataclasses

from tinystream.operator.controller.election import ElectionReason, elect_leader, preferred_leader
from tinystream.operator.controller.image import NO_LEADER, LeaderRecoveryState, PartitionRecord
from tinystream.operator.controller.isr import clean_isr
from tinystream.operator.controller.liveness import ClusterView
from tinystream.operator.controller.reassignment import complete_reassignment

_MAX_ROUNDS = 4


def settle_partition(
    partition: PartitionRecord,
    *,
    view: ClusterView,
    unclean_allowed: bool,
    preferred: bool = False,
) -> tuple[PartitionRecord, ElectionReason | None]:
    """The settled partition and, if its leader changed, why."""
    current = partition
    reason: ElectionReason | None = None
    for _ in range(_MAX_ROUNDS):
        updated, round_reason = _settle_once(current, view=view, unclean_allowed=unclean_allowed, preferred=preferred)
        if round_reason is not None:
            reason = round_reason
        if updated == current:
            break
        current = updated
    if current.leader == partition.leader:
        reason = None
    return current, reason


def _settle_once(
    p: PartitionRecord, *, view: ClusterView, unclean_allowed: bool, preferred: bool
) -> tuple[PartitionRecord, ElectionReason | None]:
    isr = clean_isr(p.isr, leader=p.leader, view=view)
    if isr != p.isr:
        p = dataclasses.replace(p, isr=isr)
    completed = complete_reassignment(p)
    if completed is not None:
        p = completed
    election = elect_leader(
        replicas=p.replicas, isr=p.isr, leader=p.leader, view=view, unclean_allowed=unclean_allowed
    )
    leader = election.leader
    by_preference = False
    if preferred and leader != NO_LEADER:
        choice = preferred_leader(replicas=p.replicas, isr=election.isr, leader=leader, view=view)
        if choice is not None:
            leader, by_preference = choice, True
    if leader == p.leader and election.isr == p.isr:
        return p, None
    recovery = LeaderRecoveryState.RECOVERING if election.unclean else p.leader_recovery_state
    reason = None
    if leader != p.leader:
        reason = _reason(p, leader, view=view, unclean=election.unclean, by_preference=by_preference)
    return dataclasses.replace(p, leader=leader, isr=election.isr, leader_recovery_state=recovery), reason


def _reason(
    p: PartitionRecord, leader: int, *, view: ClusterView, unclean: bool, by_preference: bool
) -> ElectionReason:
    if leader == NO_LEADER:
        return ElectionReason.OFFLINE
    if unclean:
        return ElectionReason.UNCLEAN
    if by_preference:
        return ElectionReason.PREFERRED
    if p.leader == NO_LEADER:
        return ElectionReason.ONLINE
    if p.leader not in p.replicas:
        return ElectionReason.REASSIGNMENT
    if not view.can_lead(p.leader):
        return ElectionReason.LEADER_FENCED
    if p.leader in view.drained:
        return ElectionReason.CONTROLLED_SHUTDOWN
    return ElectionReason.REASSIGNMENT  # the leader left the ISR when a reassignment completed
