"""The pure group state machine: no asyncio, time passed in, effects checked."""

from __future__ import annotations

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.errors import IllegalTransition
from tinystream.broker.groups.group import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    Group,
    GroupEvent,
    GroupState,
    JoinReply,
    StoreGroup,
    SyncReply,
    next_state,
)
from tinystream.broker.groups.records import GroupMetadataValue, MemberMetadata

DELAY = 3000
T0 = 1_000_000


def new_group() -> Group:
    return Group("g", initial_rebalance_delay_ms=DELAY, now=T0)


def join(group: Group, member_id: str = "", *, new_id: str = "x", now: int = T0, protocols=None, instance=None,
         session: int = 10_000, rebalance: int = 20_000, require_known: bool = False, protocol_type: str = "consumer"):
    return group.join(
        member_id=member_id,
        group_instance_id=instance,
        client_id="client",
        client_host="/h",
        protocol_type=protocol_type,
        protocols=protocols if protocols is not None else [("range", b"R-" + new_id.encode())],
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        require_known_member_id=require_known,
        new_member_id=new_id,
        now=now,
    )


def replies(effects, kind=JoinReply):
    return {e.member_id: e.result for e in effects if isinstance(e, kind)}


def stable_group(*ids: str) -> Group:
    """A Stable group of generation 1 with members `ids` (first is leader)."""
    g = new_group()
    for mid in ids:
        assert join(g, new_id=mid).reply is None
    while g.state is GroupState.PREPARING_REBALANCE:
        g.on_timer(g.next_deadline())
    assert g.state is GroupState.COMPLETING_REBALANCE
    outcome = g.sync(member_id=ids[0], group_instance_id=None, generation_id=1, protocol_type="consumer",
                     protocol_name="range", assignments=[(m, m.encode()) for m in ids], now=T0 + DELAY)
    (store,) = outcome.effects
    store.on_done(ErrorCode.none, T0 + DELAY)
    for mid in ids[1:]:
        g.sync(member_id=mid, group_instance_id=None, generation_id=1, protocol_type=None, protocol_name=None,
               assignments=[], now=T0 + DELAY)
    assert g.state is GroupState.STABLE
    return g


# ------------------------------------------------------------------ the transition table


@pytest.mark.parametrize(
    ("state", "event", "expected"),
    [
        (GroupState.EMPTY, GroupEvent.PREPARE_REBALANCE, GroupState.PREPARING_REBALANCE),
        (GroupState.STABLE, GroupEvent.PREPARE_REBALANCE, GroupState.PREPARING_REBALANCE),
        (GroupState.COMPLETING_REBALANCE, GroupEvent.PREPARE_REBALANCE, GroupState.PREPARING_REBALANCE),
        (GroupState.PREPARING_REBALANCE, GroupEvent.JOIN_COMPLETED, GroupState.COMPLETING_REBALANCE),
        (GroupState.PREPARING_REBALANCE, GroupEvent.JOIN_COMPLETED_EMPTY, GroupState.EMPTY),
        (GroupState.COMPLETING_REBALANCE, GroupEvent.ASSIGNMENT_STORED, GroupState.STABLE),
        (GroupState.STABLE, GroupEvent.REMOVE, GroupState.DEAD),
        (GroupState.DEAD, GroupEvent.REMOVE, GroupState.DEAD),
    ],
)
def test_legal_transitions(state: GroupState, event: GroupEvent, expected: GroupState) -> None:
    assert next_state("g", state, event) is expected


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (GroupState.EMPTY, GroupEvent.ASSIGNMENT_STORED),
        (GroupState.STABLE, GroupEvent.JOIN_COMPLETED),
        (GroupState.PREPARING_REBALANCE, GroupEvent.PREPARE_REBALANCE),
        (GroupState.DEAD, GroupEvent.PREPARE_REBALANCE),
        (GroupState.EMPTY, GroupEvent.JOIN_COMPLETED),
    ],
)
def test_illegal_transition_names_group_state_and_event(state: GroupState, event: GroupEvent) -> None:
    with pytest.raises(IllegalTransition) as info:
        next_state("my-group", state, event)
    message = str(info.value)
    assert "my-group" in message and state.value in message and event.value in message


# ------------------------------------------------------------------ joining


def test_first_join_waits_for_the_initial_delay() -> None:
    g = new_group()
    out = join(g, new_id="a")
    assert out.reply is None and out.member_id == "a" and out.effects == []
    assert g.state is GroupState.PREPARING_REBALANCE
    assert g.next_deadline() == T0 + DELAY
    assert g.on_timer(T0 + DELAY - 1) == []
    effects = g.on_timer(T0 + DELAY)
    result = replies(effects)["a"]
    assert result.error is ErrorCode.none and result.generation_id == 1 and result.leader == "a"
    assert result.members == [("a", None, b"R-a")]
    assert g.state is GroupState.COMPLETING_REBALANCE


def test_initial_delay_stretches_while_members_keep_coming_but_not_past_rebalance_timeout() -> None:
    g = new_group()
    join(g, new_id="a", rebalance=10_000)  # remaining after the first delay: 7000
    join(g, new_id="b", now=T0 + 1000, rebalance=10_000)
    assert g.on_timer(T0 + DELAY) == []  # b came during the delay: wait another one
    assert g.next_deadline() == T0 + 2 * DELAY
    join(g, new_id="c", now=T0 + 4000, rebalance=10_000)
    assert g.on_timer(T0 + 2 * DELAY) == []
    join(g, new_id="d", now=T0 + 7000, rebalance=10_000)
    # remaining is now 1000: the last stretch is short, then the join completes.
    assert g.next_deadline() == T0 + 3 * DELAY
    assert g.on_timer(T0 + 3 * DELAY) == []
    assert g.next_deadline() == T0 + 3 * DELAY + 1000
    effects = g.on_timer(T0 + 3 * DELAY + 1000)
    assert set(replies(effects)) == {"a", "b", "c", "d"}


def test_member_id_required_hands_out_an_id_and_keeps_it_pending() -> None:
    g = new_group()
    out = join(g, new_id="fresh", require_known=True)
    assert out.reply.error is ErrorCode.member_id_required and out.reply.member_id == "fresh"
    assert g.pending_members == {"fresh": T0 + 10_000}
    assert g.state is GroupState.EMPTY
    out = join(g, "fresh", new_id="unused")
    assert out.reply is None and out.member_id == "fresh" and "fresh" in g.members and not g.pending_members


def test_pending_member_id_expires_after_a_session() -> None:
    g = new_group()
    join(g, new_id="fresh", require_known=True)
    g.on_timer(T0 + 10_000)
    assert g.pending_members == {}
    assert join(g, "fresh").reply.error is ErrorCode.unknown_member_id


def test_unknown_member_and_inconsistent_protocols() -> None:
    g = stable_group("a")
    assert join(g, "nobody").reply.error is ErrorCode.unknown_member_id
    assert join(g, new_id="b", protocols=[("roundrobin", b"")]).reply.error is ErrorCode.inconsistent_group_protocol
    assert join(g, new_id="b", protocol_type="connect").reply.error is ErrorCode.inconsistent_group_protocol
    assert join(new_group(), new_id="b", protocols=[]).reply.error is ErrorCode.inconsistent_group_protocol


def test_protocol_is_chosen_by_vote_among_protocols_everyone_supports() -> None:
    g = new_group()
    join(g, new_id="a", protocols=[("range", b"a1"), ("sticky", b"a2")])
    join(g, new_id="b", protocols=[("sticky", b"b2"), ("range", b"b1")])
    join(g, new_id="c", protocols=[("sticky", b"c2"), ("roundrobin", b"c3"), ("range", b"c1")])
    g.on_timer(T0 + DELAY)
    effects = g.on_timer(T0 + 2 * DELAY)
    result = replies(effects)["a"]
    assert result.protocol_name == "sticky"
    assert result.members == [("a", None, b"a2"), ("b", None, b"b2"), ("c", None, b"c2")]
    assert replies(effects)["b"].members == []  # followers get no member list


def test_stable_follower_rejoining_unchanged_gets_current_generation_without_rebalance() -> None:
    g = stable_group("a", "b")
    out = join(g, "b", new_id="b")
    assert out.reply is not None and out.reply.generation_id == 1 and out.reply.members == []
    assert g.state is GroupState.STABLE


def test_stable_leader_rejoining_triggers_a_rebalance() -> None:
    g = stable_group("a", "b")
    out = join(g, "a", new_id="a")
    assert out.reply is None and g.state is GroupState.PREPARING_REBALANCE
    assert g.heartbeat(member_id="b", group_instance_id=None, generation_id=1, now=T0 + DELAY) is ErrorCode.rebalance_in_progress
    effects = join(g, "b", new_id="b").effects  # the last member rejoins: the join completes at once
    assert {mid: r.generation_id for mid, r in replies(effects).items()} == {"a": 2, "b": 2}


# ------------------------------------------------------------------ sync


def test_sync_parks_until_the_leader_assignment_is_stored() -> None:
    g = new_group()
    join(g, new_id="a")
    join(g, new_id="b")
    g.on_timer(T0 + DELAY)
    g.on_timer(T0 + 2 * DELAY)
    follower = g.sync(member_id="b", group_instance_id=None, generation_id=1, protocol_type="consumer",
                      protocol_name="range", assignments=[], now=T0)
    assert follower.reply is None and follower.effects == []
    leader = g.sync(member_id="a", group_instance_id=None, generation_id=1, protocol_type="consumer",
                    protocol_name="range", assignments=[("a", b"A"), ("b", b"B"), ("ghost", b"G")], now=T0)
    (store,) = leader.effects
    assert isinstance(store, StoreGroup)
    assert {m.member_id: m.assignment for m in store.value.members} == {"a": b"A", "b": b"B"}
    assert g.state is GroupState.COMPLETING_REBALANCE  # not before the store is durable
    effects = store.on_done(ErrorCode.none, T0)
    assert {mid: r.assignment for mid, r in replies(effects, SyncReply).items()} == {"a": b"A", "b": b"B"}
    assert g.state is GroupState.STABLE


def test_failed_assignment_store_fails_the_syncs_and_rebalances() -> None:
    g = new_group()
    join(g, new_id="a")
    g.on_timer(T0 + DELAY)
    out = g.sync(member_id="a", group_instance_id=None, generation_id=1, protocol_type=None, protocol_name=None,
                 assignments=[("a", b"A")], now=T0)
    effects = out.effects[0].on_done(ErrorCode.not_coordinator, T0)
    assert replies(effects, SyncReply)["a"].error is ErrorCode.not_coordinator
    assert g.state is GroupState.PREPARING_REBALANCE


def test_sync_errors() -> None:
    g = stable_group("a")
    kwargs = dict(group_instance_id=None, protocol_type=None, protocol_name=None, assignments=[], now=T0)
    assert g.sync(member_id="zz", generation_id=1, **kwargs).reply.error is ErrorCode.unknown_member_id
    assert g.sync(member_id="a", generation_id=0, **kwargs).reply.error is ErrorCode.illegal_generation
    bad_name = dict(kwargs, protocol_name="roundrobin")
    assert g.sync(member_id="a", generation_id=1, **bad_name).reply.error is ErrorCode.inconsistent_group_protocol
    assert g.sync(member_id="a", generation_id=1, **kwargs).reply.assignment == b"a"


# ------------------------------------------------------------------ time


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    g = stable_group("a", "b")
    now = T0 + DELAY
    assert g.heartbeat(member_id="a", group_instance_id=None, generation_id=1, now=now + 9_000) is ErrorCode.none
    g.on_timer(now + 10_000)  # b's session ran out, a heartbeated in time
    assert list(g.members) == ["a"] and g.state is GroupState.PREPARING_REBALANCE


def test_parked_members_do_not_expire_but_new_ones_do_after_the_join_timeout() -> None:
    g = stable_group("a", "c")
    now = T0 + DELAY
    g.members["c"].heartbeat_deadline = now + 10 * NEW_MEMBER_JOIN_TIMEOUT_MS  # c stays alive, never rejoins
    assert join(g, "a", new_id="a", now=now, rebalance=10 * NEW_MEMBER_JOIN_TIMEOUT_MS).reply is None
    assert join(g, new_id="b", now=now).reply is None
    g.on_timer(now + 60_000)  # a (parked, not new) is far past its session: still a member
    assert set(g.members) == {"a", "b", "c"}
    effects = g.on_timer(now + NEW_MEMBER_JOIN_TIMEOUT_MS)  # b (new) hit the KIP-394 join timeout
    assert replies(effects)["b"].error is ErrorCode.unknown_member_id
    assert set(g.members) == {"a", "c"} and g.state is GroupState.PREPARING_REBALANCE


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    g = new_group()
    join(g, new_id="a")
    join(g, new_id="b")
    g.on_timer(T0 + DELAY)
    g.on_timer(T0 + 2 * DELAY)
    g.sync(member_id="a", group_instance_id=None, generation_id=1, protocol_type=None, protocol_name=None,
           assignments=[("a", b"A"), ("b", b"B")], now=T0)
    assert g.pending_sync == {"b"} and g.sync_deadline == T0 + 2 * DELAY + 20_000
    g.on_timer(T0 + 2 * DELAY + 20_000)
    assert "b" not in g.members and g.state is GroupState.PREPARING_REBALANCE


def test_join_completes_when_the_rebalance_timeout_passes_without_everyone() -> None:
    g = stable_group("a", "b")
    now = T0 + DELAY
    g.members["b"].session_timeout_ms = 60_000
    join(g, "a", new_id="a", now=now)
    # b keeps heartbeating (told to rejoin) but never does.
    assert g.heartbeat(member_id="b", group_instance_id=None, generation_id=1, now=now + 5_000) is ErrorCode.rebalance_in_progress
    assert g.next_deadline() == now + 20_000  # a's rebalance timeout
    effects = g.on_timer(now + 20_000)
    assert set(replies(effects)) == {"a"} and list(g.members) == ["a"] and g.generation_id == 2


# ------------------------------------------------------------------ leave, static members, offsets


def test_last_member_leaving_empties_the_group_and_stores_it() -> None:
    g = stable_group("a")
    out = g.leave([("a", None), ("ghost", None)], T0)
    assert [e for _, _, e in out.members] == [ErrorCode.none, ErrorCode.unknown_member_id]
    # Nobody is left to wait for: the join phase ends at once, in the Empty state.
    assert g.state is GroupState.EMPTY and g.generation_id == 2
    (store,) = out.effects
    assert store.value.members == () and store.value.generation == 2 and store.value.protocol is None


def test_static_member_replacement_in_stable_group_needs_no_rebalance() -> None:
    g = new_group()
    join(g, new_id="a1", instance="ia")
    join(g, new_id="b1", instance="ib")
    g.on_timer(T0 + DELAY)
    g.on_timer(T0 + 2 * DELAY)
    out = g.sync(member_id="a1", group_instance_id="ia", generation_id=1, protocol_type=None, protocol_name=None,
                 assignments=[("a1", b"A"), ("b1", b"B")], now=T0)
    out.effects[0].on_done(ErrorCode.none, T0)
    assert g.state is GroupState.STABLE
    # b restarts: same instance id, no member id, same protocols.
    out = join(g, new_id="b2", instance="ib", protocols=[("range", b"R-b1")])
    assert out.reply is None and g.state is GroupState.STABLE
    (store,) = out.effects
    assert [m.member_id for m in store.value.members] == ["a1", "b2"]
    result = replies(store.on_done(ErrorCode.none, T0))["b2"]
    assert result.error is ErrorCode.none and result.generation_id == 1 and result.leader == "a1"
    assert g.members["b2"].assignment == b"B"
    # The old id is fenced.
    assert g.heartbeat(member_id="b1", group_instance_id="ib", generation_id=1, now=T0) is ErrorCode.fenced_instance_id


def test_failed_static_replacement_store_reverts_to_the_old_member() -> None:
    g = stable_group("a")
    g.members["a"].group_instance_id = "ia"
    g.static_members["ia"] = "a"
    out = join(g, new_id="a2", instance="ia", protocols=[("range", b"R-a")])
    effects = out.effects[0].on_done(ErrorCode.coordinator_not_available, T0)
    assert replies(effects)["a2"].error is ErrorCode.coordinator_not_available
    assert list(g.members) == ["a"] and g.static_members == {"ia": "a"} and g.leader_id == "a"


def test_commit_validation() -> None:
    empty = new_group()
    assert empty.validate_commit(member_id="", group_instance_id=None, generation_id=-1, now=T0) is ErrorCode.none
    g = stable_group("a")
    assert g.validate_commit(member_id="", group_instance_id=None, generation_id=-1, now=T0) is ErrorCode.unknown_member_id
    assert g.validate_commit(member_id="a", group_instance_id=None, generation_id=7, now=T0) is ErrorCode.illegal_generation
    assert g.validate_commit(member_id="a", group_instance_id=None, generation_id=1, now=T0) is ErrorCode.none


def test_deletion_and_dead_group() -> None:
    g = stable_group("a", "b")
    assert g.deletion_error() is ErrorCode.non_empty_group
    assert new_group().deletion_error() is ErrorCode.none
    assert join(g, "a", new_id="a").reply is None  # parked: b has not rejoined
    effects = g.mark_dead(ErrorCode.not_coordinator, T0)
    assert replies(effects)["a"].error is ErrorCode.not_coordinator
    assert g.state is GroupState.DEAD and g.next_deadline() is None
    assert join(g, "a").reply.error is ErrorCode.coordinator_not_available
    assert g.deletion_error() is ErrorCode.group_id_not_found


def test_loaded_group_is_stable_with_its_members_and_fresh_sessions() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer", generation=6, protocol="range", leader="b", current_state_timestamp=5,
        members=(
            MemberMetadata(member_id="a", group_instance_id="ia", client_id="c", client_host="/h",
                           rebalance_timeout=20_000, session_timeout=10_000, subscription=b"SA", assignment=b"AA"),
            MemberMetadata(member_id="b", client_id="c", client_host="/h", rebalance_timeout=20_000,
                           session_timeout=10_000, subscription=b"SB", assignment=b"BB"),
        ),
    )
    g = Group.from_metadata("g", value, initial_rebalance_delay_ms=DELAY, now=T0)
    assert g.state is GroupState.STABLE and g.generation_id == 6 and g.leader_id == "b"
    assert g.static_members == {"ia": "a"} and g.members["a"].assignment == b"AA"
    assert g.next_deadline() == T0 + 10_000
    assert g.metadata_value(T0) == value  # what we load is what we would write
    empty = Group.from_metadata("g", GroupMetadataValue(protocol_type="consumer", generation=2, protocol=None, leader=None),
                                initial_rebalance_delay_ms=DELAY, now=T0)
    assert empty.state is GroupState.EMPTY and empty.generation_id == 2 and empty.protocol_type == "consumer"
