"""GroupStats as the group state machine keeps it: one count per cause, exactly (no socket, no clock)."""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.group import CommittedOffset, GroupState
from tinystream.broker.groups.stats import HISTORY_LENGTH, GroupStats, RebalanceCause

from .test_group import DELAY, T0, join, new_group, stable_group


def causes(stats: GroupStats) -> dict[str, int]:
    return {cause.value: n for cause, n in stats.rebalances.items() if n}


def test_a_first_generation_is_one_join_rebalance_however_many_join_during_it() -> None:
    g = stable_group("a", "b", "c")
    assert (g.stats.joins, causes(g.stats)) == (3, {"join": 1})
    assert [(r.cause, r.generation, r.at_ms) for r in g.stats.history] == [(RebalanceCause.JOIN, 0, T0)]


def test_leave_session_timeout_and_sync_timeout_are_told_apart() -> None:
    g = stable_group("a", "b", "c")
    now = T0 + DELAY
    g.leave([("c", None)], now)
    assert (g.stats.leaves, causes(g.stats)) == (1, {"join": 1, "leave": 1})
    # a rejoins, b never does and its session runs out: removed, but the rebalance is already under way.
    join(g, "a", new_id="a", now=now, session=60_000)
    g.on_timer(now + 10_000)
    assert g.stats.expirations == 1 and causes(g.stats) == {"join": 1, "leave": 1}
    assert g.state is GroupState.COMPLETING_REBALANCE  # a alone completed the join
    # a got its JoinGroup answer but never syncs (its session is longer than the rebalance timeout):
    # the sync timeout removes it and starts a rebalance.
    g.on_timer(g.sync_deadline)
    assert g.stats.expirations == 2 and causes(g.stats) == {"join": 1, "leave": 1, "sync_timeout": 1}


def test_a_stable_member_whose_session_runs_out_starts_a_session_timeout_rebalance() -> None:
    g = stable_group("a", "b")
    now = T0 + DELAY
    g.heartbeat(member_id="a", group_instance_id=None, generation_id=1, now=now + 9_000)
    g.on_timer(now + 10_000)
    assert causes(g.stats) == {"join": 1, "session_timeout": 1}
    assert [r.generation for r in g.stats.history] == [0, 1]


def test_a_failed_assignment_store_is_its_own_cause() -> None:
    g = new_group()
    join(g, new_id="a")
    g.on_timer(T0 + DELAY)
    out = g.sync(member_id="a", group_instance_id=None, generation_id=1, protocol_type=None, protocol_name=None,
                 assignments=[("a", b"A")], now=T0)
    out.effects[0].on_done(ErrorCode.not_coordinator, T0)
    assert causes(g.stats) == {"join": 1, "assignment_error": 1}


def test_commits_count_offset_advances_and_a_rewind_counts_nothing() -> None:
    g = stable_group("a")
    g.apply_offsets({("t", 0): CommittedOffset(offset=100)})  # first commit: no earlier position to advance from
    g.apply_offsets({("t", 0): CommittedOffset(offset=130), ("t", 1): CommittedOffset(offset=5)})
    g.apply_offsets({("t", 0): CommittedOffset(offset=120)})  # reset backwards
    assert (g.stats.commits, g.stats.records_committed) == (3, 30)


def test_history_is_bounded_but_counters_keep_counting() -> None:
    stats = GroupStats()
    for i in range(HISTORY_LENGTH + 5):
        stats.rebalance_started(RebalanceCause.JOIN, i, T0 + i)
    assert stats.total_rebalances == HISTORY_LENGTH + 5
    assert len(stats.history) == HISTORY_LENGTH and stats.history[0].generation == 5
