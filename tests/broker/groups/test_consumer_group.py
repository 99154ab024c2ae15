"""The KIP-848 consumer group state machine, without sockets: joins, reconciliation, fencing, leaves, expiry."""

from __future__ import annotations

import pytest
from consumer_helpers import Topics, beat_request, join_request

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
)

OK = ErrorCode.none
T0 = 1_000_000


def join(group: ConsumerGroup, topics: Topics, member: str, subscribed: tuple[str, ...] = ("t",), *,
         now: int = T0, instance_id: str | None = None, assignor: str | None = None,
         regex: str | None = None) -> HeartbeatResult:
    request = join_request(member, subscribed, instance_id=instance_id, assignor=assignor, regex=regex)
    return group.heartbeat(request, topics=topics, now=now).result


def beat(group: ConsumerGroup, topics: Topics, member: str, epoch: int, owned: dict[str, frozenset[int]] | None = None,
         *, now: int = T0, instance_id: str | None = None) -> HeartbeatResult:
    return group.heartbeat(beat_request(member, epoch, owned, instance_id=instance_id), topics=topics, now=now).result


def parts(result: HeartbeatResult, topic: str = "t") -> set[int]:
    assert result.assignment is not None
    return set(result.assignment.get(topic, frozenset()))


def test_first_member_gets_every_partition_at_epoch_1() -> None:
    topics = Topics(t=4)
    g = ConsumerGroup("g")
    r = join(g, topics, "a")
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (OK, "a", 1, 5000)
    assert parts(r) == {0, 1, 2, 3}
    assert g.state is ConsumerGroupState.STABLE
    assert (g.group_epoch, g.assignment_epoch) == (1, 1)
    # A heartbeat with nothing changed carries no assignment.
    again = beat(g, topics, "a", 1)
    assert (again.error, again.member_epoch, again.assignment) == (OK, 1, None)


def test_second_member_waits_for_revocation_then_gets_its_half() -> None:
    topics = Topics(t=4)
    g = ConsumerGroup("g")
    join(g, topics, "a")
    b = join(g, topics, "b")
    # b is at the new epoch but its partitions are still a's: nothing yet.
    assert (b.error, b.member_epoch) == (OK, 2)
    assert parts(b) == set()
    assert g.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert g.state is ConsumerGroupState.RECONCILING
    # a is told to keep only its half (same epoch until it revokes).
    a = beat(g, topics, "a", 1)
    assert a.member_epoch == 1
    kept = parts(a)
    assert len(kept) == 2
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # Still owning everything: nothing moves, b still waits.
    assert beat(g, topics, "a", 1, {"t": frozenset({0, 1, 2, 3})}).assignment is None
    assert beat(g, topics, "b", 2, {}).assignment is None
    # a revokes: it moves to epoch 2, then b gets the rest.
    a2 = beat(g, topics, "a", 1, {"t": frozenset(kept)})
    assert (a2.error, a2.member_epoch) == (OK, 2)
    b2 = beat(g, topics, "b", 2, {})
    assert parts(b2) == {0, 1, 2, 3} - kept
    assert g.state is ConsumerGroupState.STABLE


def test_no_partition_is_ever_owned_by_two_members() -> None:
    topics = Topics(t=6)
    g = ConsumerGroup("g")
    owned: dict[str, set[int]] = {}
    epochs: dict[str, int] = {}

    def step(member: str) -> None:
        r = beat(g, topics, member, epochs[member], {"t": frozenset(owned[member])})
        assert r.error == OK, r
        epochs[member] = r.member_epoch
        if r.assignment is not None:
            owned[member] = set(r.assignment.get("t", frozenset()))
        seen: list[int] = [p for ps in owned.values() for p in ps]
        assert len(seen) == len(set(seen)), owned

    for m in ("a", "b", "c"):
        r = join(g, topics, m)
        epochs[m], owned[m] = r.member_epoch, parts(r)
        for _ in range(3):
            for other in list(owned):
                step(other)
    assert sorted(p for ps in owned.values() for p in ps) == list(range(6))
    assert sorted(len(ps) for ps in owned.values()) == [2, 2, 2]
    assert g.state is ConsumerGroupState.STABLE


def test_leave_gives_the_partitions_to_the_others() -> None:
    topics = Topics(t=4)
    g = ConsumerGroup("g")
    join(g, topics, "a")
    join(g, topics, "b")
    a = beat(g, topics, "a", 1)
    beat(g, topics, "a", 1, {"t": frozenset(parts(a))})
    leave = beat(g, topics, "b", -1)
    assert (leave.error, leave.member_epoch) == (OK, -1)
    assert "b" not in g.members
    a2 = beat(g, topics, "a", 2)
    assert (a2.member_epoch, parts(a2)) == (g.group_epoch, {0, 1, 2, 3})


def test_fenced_member_epoch_and_unknown_member() -> None:
    topics = Topics(t=2)
    g = ConsumerGroup("g")
    join(g, topics, "a")
    assert beat(g, topics, "a", 7).error is ErrorCode.fenced_member_epoch
    assert beat(g, topics, "zz", 1).error is ErrorCode.unknown_member_id
    # An unknown group (a coordinator that failed over) answers UNKNOWN_MEMBER_ID too: rejoin.
    assert beat(ConsumerGroup("fresh"), topics, "a", 3).error is ErrorCode.unknown_member_id
    # The fenced member rejoins with epoch 0 and the same id.
    r = join(g, topics, "a")
    assert (r.error, parts(r)) == (OK, {0, 1})


def test_previous_epoch_is_accepted_when_the_answer_was_lost() -> None:
    topics = Topics(t=2, u=2)
    g = ConsumerGroup("g")
    join(g, topics, "a", ("t",))
    # Subscribing to more topics bumps the epoch; the member moves to 2 with more partitions.
    r = g.heartbeat(HeartbeatRequest(member_id="a", member_epoch=1, subscribed_topic_names=("t", "u")),
                    topics=topics, now=T0).result
    assert r.member_epoch == 2
    # Its next heartbeat still says 1 (the answer was lost) while owning a subset: accepted.
    again = beat(g, topics, "a", 1, {"t": frozenset({0, 1})})
    assert (again.error, again.member_epoch) == (OK, 2)
    # The previous epoch with partitions it is not assigned, or with none reported, is fenced.
    assert beat(g, topics, "a", 1, {"t": frozenset({0}), "v": frozenset({0})}).error is ErrorCode.fenced_member_epoch
    assert beat(g, topics, "a", 1, None).error is ErrorCode.fenced_member_epoch


def test_epoch_bumps_when_subscribed_topics_grow() -> None:
    topics = Topics(t=2)
    g = ConsumerGroup("g")
    join(g, topics, "a")
    assert g.group_epoch == 1
    topics.counts["t"] = 4
    r = beat(g, topics, "a", 1)
    assert (r.member_epoch, parts(r)) == (2, {0, 1, 2, 3})
    # An unrelated topic does not move the epoch.
    topics.counts["other"] = 3
    assert beat(g, topics, "a", 2).member_epoch == 2


def test_session_timeout_removes_member_and_bumps_epoch() -> None:
    topics = Topics(t=2)
    g = ConsumerGroup("g", session_timeout_ms=45_000)
    join(g, topics, "a", now=T0)
    join(g, topics, "b", now=T0 + 1000)
    assert g.next_deadline() == T0 + 45_000
    removed, changed = g.on_timer(topics, T0 + 45_000)
    assert (removed, changed) == (["a"], True)
    r = beat(g, topics, "b", 2, {}, now=T0 + 45_001)
    assert parts(r) == {0, 1}
    assert g.stats.expirations == 1


def test_revocation_timeout_fences_a_member_that_does_not_revoke() -> None:
    topics = Topics(t=2)
    g = ConsumerGroup("g")
    join(g, topics, "a", now=T0)
    join(g, topics, "b", now=T0)
    beat(g, topics, "a", 1, now=T0)  # told to revoke; rebalance timeout 60 s
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    beat(g, topics, "b", 2, {}, now=T0 + 30_000)
    removed, _ = g.on_timer(topics, T0 + 60_000)
    assert removed == ["a"]


def test_static_member_leaves_and_comes_back_with_its_partitions() -> None:
    topics = Topics(t=2)
    g = ConsumerGroup("g")
    join(g, topics, "a1", instance_id="i-a")
    epoch = g.group_epoch
    r = beat(g, topics, "a1", -2, instance_id="i-a")
    assert (r.error, r.member_epoch) == (OK, -2)
    assert g.group_epoch == epoch  # no rebalance for a static member's temporary leave
    back = join(g, topics, "a2", instance_id="i-a")
    assert (back.error, parts(back)) == (OK, {0, 1})
    assert set(g.members) == {"a2"}
    # Another incarnation while the instance id is in use: refused.
    assert join(g, topics, "a3", instance_id="i-a").error is ErrorCode.unreleased_instance_id
    assert beat(g, topics, "a3", 1, instance_id="i-a").error is ErrorCode.fenced_instance_id


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (HeartbeatRequest(member_id="", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), owned={}),
         ErrorCode.invalid_request),
        (HeartbeatRequest(member_id="m", member_epoch=0, subscribed_topic_names=("t",), owned={}),
         ErrorCode.invalid_request),
        (HeartbeatRequest(member_id="m", member_epoch=0, rebalance_timeout_ms=1, owned={}), ErrorCode.invalid_request),
        (HeartbeatRequest(member_id="m", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=("t",),
                          owned={"t": frozenset({0})}), ErrorCode.invalid_request),
        (HeartbeatRequest(member_id="m", member_epoch=-2), ErrorCode.invalid_request),
        (HeartbeatRequest(member_id="m", member_epoch=-3), ErrorCode.invalid_request),
        (HeartbeatRequest(member_id="m", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=("t",),
                          owned={}, server_assignor="sticky"), ErrorCode.unsupported_assignor),
        (HeartbeatRequest(member_id="m", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_regex="(",
                          owned={}), ErrorCode.invalid_regular_expression),
    ],
)
def test_bad_requests_are_refused_with_a_message(request_: HeartbeatRequest, error: ErrorCode) -> None:
    g = ConsumerGroup("g")
    r = g.heartbeat(request_, topics=Topics(t=1), now=T0).result
    assert r.error is error
    assert r.error_message
    assert not g.members


def test_regex_subscription_matches_whole_names_and_skips_internal_topics() -> None:
    topics = Topics(**{"orders-eu": 1, "orders-us": 1, "xorders-eu": 1, "__consumer_offsets": 50})
    g = ConsumerGroup("g")
    r = join(g, topics, "a", (), regex="orders-.*")
    assert set(r.assignment or {}) == {"orders-eu", "orders-us"}
    topics.counts["orders-asia"] = 2
    r2 = beat(g, topics, "a", 1)
    assert r2.member_epoch == 2
    assert set(r2.assignment or {}) == {"orders-eu", "orders-us", "orders-asia"}


def test_range_assignor_is_chosen_by_the_members() -> None:
    topics = Topics(t=4)
    g = ConsumerGroup("g")
    join(g, topics, "a", assignor="range")
    join(g, topics, "b", assignor="range")
    assert g.last_assignor == "range"
    assert g.target == {"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({2, 3})}}


def test_offset_commit_checks_the_member_epoch() -> None:
    topics = Topics(t=1)
    g = ConsumerGroup("g")
    join(g, topics, "a")
    assert g.validate_commit(member_id="a", member_epoch=1, api_version=9) is OK
    assert g.validate_commit(member_id="a", member_epoch=0, api_version=9) is ErrorCode.stale_member_epoch
    assert g.validate_commit(member_id="x", member_epoch=1, api_version=9) is ErrorCode.unknown_member_id
    assert g.validate_commit(member_id="a", member_epoch=1, api_version=8) is ErrorCode.unsupported_version
    # No member (admin tool): only while the group is empty.
    assert g.validate_commit(member_id="", member_epoch=-1, api_version=9) is ErrorCode.unknown_member_id
    # A transaction (TxnOffsetCommit) need not name the member; when it does, its epoch is checked.
    assert g.validate_commit(member_id="", member_epoch=-1, api_version=9, transactional=True) is OK
    assert g.validate_commit(member_id="a", member_epoch=0, api_version=3,
                             transactional=True) is ErrorCode.stale_member_epoch
    assert g.validate_commit(member_id="a", member_epoch=1, api_version=3, transactional=True) is OK
    beat(g, topics, "a", -1)
    assert g.validate_commit(member_id="", member_epoch=-1, api_version=9) is OK
    assert g.deletion_error() is OK


def test_describe_shows_members_assignment_and_target() -> None:
    topics = Topics(t=2)
    g = ConsumerGroup("g")
    join(g, topics, "a")
    join(g, topics, "b")
    d = g.describe()
    assert (d.state, d.group_epoch, d.assignment_epoch, d.assignor) == ("Reconciling", 2, 2, "uniform")
    by_id = {m.member_id: m for m in d.members}
    assert by_id["a"].assignment == {"t": frozenset({0, 1})}
    assert len(by_id["a"].target_assignment["t"]) == 1
    assert by_id["b"].assignment == {}
    assert g.listing() == ("g", "consumer", "Reconciling")


def test_a_regex_matches_only_the_topics_its_member_may_describe() -> None:
    """Issue 21, item 8: a regex never reveals a topic DESCRIBE hides (its assignment would name its id)."""
    from dataclasses import replace

    topics = Topics(**{"orders-eu": 1, "orders-secret": 1})
    g = ConsumerGroup("g")
    hidden = lambda topic: topic != "orders-secret"  # noqa: E731 - the principal's DESCRIBE
    r = g.heartbeat(replace(join_request("a", (), regex="orders-.*"), may_describe=hidden), topics=topics,
                    now=T0).result
    assert set(r.assignment or {}) == {"orders-eu"}
    assert g.subscription_metadata == {"orders-eu": 1}
    topics.counts["orders-new-secret"] = 1  # created later: still filtered by the member's view
    r2 = g.heartbeat(replace(beat_request("a", r.member_epoch, owned={"orders-eu": frozenset({0})}),
                             may_describe=lambda t: "secret" not in t), topics=topics, now=T0 + 1).result
    assert r2.assignment is None and set(g.target["a"]) == {"orders-eu"}  # nothing new to assign
    g.heartbeat(replace(beat_request("a", r2.member_epoch), may_describe=lambda t: True),
                topics=topics, now=T0 + 2)  # DESCRIBE granted: the next heartbeat sees them
    assert set(g.target["a"]) == {"orders-eu", "orders-secret", "orders-new-secret"}
