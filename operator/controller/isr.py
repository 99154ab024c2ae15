"""ISR rules: what the controller removes, and which AlterPartition it accepts.

The ISR is the leader's to grow and shrink (KIP-497 AlterPartition); the
controller only checks the request and fences stale ones. Checks follow
KRaft's ReplicationControlManager, in its order, with its error codes:

1. unknown topic or partition            -> UNKNOWN_TOPIC_OR_PARTITION
2. leader epoch newer than ours          -> NOT_CONTROLLER (we are stale)
3. partition epoch newer than ours       -> NOT_CONTROLLER
4. leader epoch older than ours          -> FENCED_LEADER_EPOCH
5. sender is not the current leader      -> INVALID_REQUEST
6. partition epoch older than ours       -> INVALID_UPDATE_VERSION
7. ISR empty, duplicated or not a subset of the replicas -> INVALID_REQUEST
8. ISR without the leader                -> INVALID_REQUEST
9. KIP-704: RECOVERING with more than one member, or RECOVERED back to
   RECOVERING                            -> INVALID_REQUEST
10. a broker *added* to the ISR is fenced, drained or unregistered
   (KIP-841)                             -> INELIGIBLE_REPLICA

(The broker epoch is checked before all of these, as KRaft does per
request.) TinyStream checks eligibility only for added members, where KRaft
checks the whole new ISR: a drained leader that is its partition's only
in-sync copy must still be able to add the new replicas of a scale-down.

On fencing and draining the controller removes the broker from every ISR,
except when it is the last member: the ISR is never emptied (pre-ELR KRaft
behaviour, KIP-966 not followed), so the last in-sync copy can lead again
when it comes back.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinystream.operator.controller.errors import ControllerError
from tinystream.operator.controller.image import LeaderRecoveryState, PartitionRecord
from tinystream.operator.controller.liveness import ClusterView


def clean_isr(isr: Sequence[int], *, leader: int, view: ClusterView) -> tuple[int, ...]:
    """Drop ISR members that are not eligible, never emptying the ISR."""
    isr = tuple(isr)
    kept = tuple(b for b in isr if view.isr_eligible(b))
    if kept or len(isr) <= 1:
        return kept or isr
    # Several members, none eligible (only reachable if several brokers change
    # at once): keep one, the one best placed to lead again.
    live = [b for b in isr if view.can_lead(b)]
    if leader in live:
        return (leader,)
    if live:
        return (live[0],)
    return (leader,) if leader in isr else (isr[0],)


def check_alter_partition(
    *,
    partition: PartitionRecord,
    broker_id: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[int],
    recovery_state: LeaderRecoveryState,
    view: ClusterView,
) -> tuple[ControllerError, str] | None:
    """Why this AlterPartition must be refused, or None to accept it."""
    p = partition
    if leader_epoch > p.leader_epoch:
        return ControllerError.NOT_CONTROLLER, f"leader epoch {leader_epoch} is newer than the controller's {p.leader_epoch}"
    if partition_epoch > p.partition_epoch:
        return (
            ControllerError.NOT_CONTROLLER,
            f"partition epoch {partition_epoch} is newer than the controller's {p.partition_epoch}",
        )
    if leader_epoch < p.leader_epoch:
        return ControllerError.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} is older than {p.leader_epoch}"
    if broker_id != p.leader:
        return ControllerError.INVALID_REQUEST, f"broker {broker_id} is not the leader (the leader is {p.leader})"
    if partition_epoch < p.partition_epoch:
        return (
            ControllerError.INVALID_UPDATE_VERSION,
            f"partition epoch {partition_epoch} is older than {p.partition_epoch}",
        )
    isr = tuple(new_isr)
    if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(p.replicas):
        return ControllerError.INVALID_REQUEST, f"ISR {list(isr)} is not a non-empty set of replicas {list(p.replicas)}"
    if p.leader not in isr:
        return ControllerError.INVALID_REQUEST, f"ISR {list(isr)} does not contain the leader {p.leader}"
    if recovery_state is LeaderRecoveryState.RECOVERING and len(isr) > 1:
        return ControllerError.INVALID_REQUEST, "a RECOVERING leader must be the only ISR member (KIP-704)"
    if p.leader_recovery_state is LeaderRecoveryState.RECOVERED and recovery_state is LeaderRecoveryState.RECOVERING:
        return ControllerError.INVALID_REQUEST, "leader recovery state cannot go from RECOVERED to RECOVERING"
    added = [b for b in isr if b not in p.isr]
    ineligible = [b for b in added if not view.isr_eligible(b)]
    if ineligible:
        return ControllerError.INELIGIBLE_REPLICA, f"broker(s) {ineligible} are fenced, drained or unregistered"
    return None
