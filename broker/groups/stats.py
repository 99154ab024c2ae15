"""What happened to one consumer group: joins, leaves, rebalances and their causes, commits.

Kept by the group state machine itself (plain integers, no Prometheus) so the
counting is tested with the transitions; the broker's metrics read it when
scraped and the dashboard draws `history` as rebalances over time.

Counters start at zero when the group is loaded on a coordinator (after a
failover the new coordinator counts from its load), as Prometheus counters of
a restarted process do.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

__all__ = ["HISTORY_LENGTH", "GroupStats", "Rebalance", "RebalanceCause"]

#: Rebalances kept per group for the dashboard's timeline (the counters keep counting past it).
HISTORY_LENGTH = 100


class RebalanceCause(enum.Enum):
    """Why a group entered PreparingRebalance (Kafka logs the same reasons as strings)."""

    JOIN = "join"  # a new member, or a known member rejoining with new metadata
    LEAVE = "leave"  # LeaveGroup
    SESSION_TIMEOUT = "session_timeout"  # no heartbeat within session.timeout.ms
    SYNC_TIMEOUT = "sync_timeout"  # joined but never sent SyncGroup within the rebalance timeout
    ASSIGNMENT_ERROR = "assignment_error"  # the leader's assignment could not be stored


@dataclass(frozen=True, slots=True)
class Rebalance:
    at_ms: int
    cause: RebalanceCause
    generation: int  # the generation that was running when it started


@dataclass(slots=True)
class GroupStats:
    joins: int = 0  # members added to the group
    leaves: int = 0  # members removed by LeaveGroup
    expirations: int = 0  # members removed by a session or sync timeout
    rebalances: dict[RebalanceCause, int] = field(default_factory=lambda: dict.fromkeys(RebalanceCause, 0))
    commits: int = 0  # OffsetCommit requests that stored at least one offset
    records_committed: int = 0  # sum of committed-offset advances: records the group consumed, as far as the broker can see
    history: deque[Rebalance] = field(default_factory=lambda: deque(maxlen=HISTORY_LENGTH))

    def rebalance_started(self, cause: RebalanceCause, generation: int, now: int) -> None:
        self.rebalances[cause] += 1
        self.history.append(Rebalance(now, cause, generation))

    def member_removed(self, cause: RebalanceCause) -> None:
        if cause is RebalanceCause.LEAVE:
            self.leaves += 1
        else:
            self.expirations += 1

    def offsets_committed(self, advances: list[int]) -> None:
        """One commit; `advances` are new - previous offsets per partition (a rewind counts as 0)."""
        self.commits += 1
        self.records_committed += sum(max(a, 0) for a in advances)

    @property
    def total_rebalances(self) -> int:
        return sum(self.rebalances.values())
