"""Property tests of the server-side assignors (KIP-848 `uniform` and `range`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.broker.groups.assignors import AssignorInput, MemberSubscription, range_assign, uniform_assign

TOPICS = ["a", "b", "c"]

topic_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)
member_ids = st.lists(st.text("mnopq", min_size=1, max_size=3), min_size=1, max_size=7, unique=True)


def spec(members: dict[str, frozenset[str]], counts: dict[str, int], current=None) -> AssignorInput:
    return AssignorInput(
        members={m: MemberSubscription(topics=t) for m, t in members.items()},
        partition_counts=counts,
        current=current or {},
    )


def check_complete(result, members: dict[str, frozenset[str]], counts: dict[str, int]) -> None:
    """Every partition of a subscribed topic exactly once, only to a subscriber."""
    seen: list[tuple[str, int]] = []
    for member, topics in result.items():
        for topic, parts in topics.items():
            assert topic in members[member]
            seen.extend((topic, p) for p in parts)
    wanted = [(t, p) for t, n in counts.items() if any(t in s for s in members.values()) for p in range(n)]
    assert sorted(seen) == sorted(wanted)


def sizes(result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in topics.values()) for m, topics in result.items()}


@given(member_ids, topic_counts)
def test_uniform_equal_subscriptions_are_balanced_and_complete(ids: list[str], counts: dict[str, int]) -> None:
    members = {m: frozenset(counts) for m in ids}
    result = uniform_assign(spec(members, counts))
    check_complete(result, members, counts)
    n = sizes(result)
    assert max(n.values()) - min(n.values()) <= 1


@given(member_ids, topic_counts, st.data())
def test_uniform_mixed_subscriptions_are_complete(ids, counts, data) -> None:
    members = {m: frozenset(data.draw(st.sets(st.sampled_from(sorted(counts)), min_size=1))) for m in ids}
    result = uniform_assign(spec(members, counts))
    check_complete(result, members, counts)


@given(member_ids, topic_counts, st.data())
def test_uniform_is_stable_on_its_own_output(ids, counts, data) -> None:
    members = {m: frozenset(data.draw(st.sets(st.sampled_from(sorted(counts)), min_size=1))) for m in ids}
    first = uniform_assign(spec(members, counts))
    assert uniform_assign(spec(members, counts, first)) == first


@settings(max_examples=200)
@given(member_ids, topic_counts, st.text("xyz", min_size=1, max_size=2))
def test_uniform_is_sticky_when_a_member_joins(ids: list[str], counts: dict[str, int], newcomer: str) -> None:
    members = {m: frozenset(counts) for m in ids}
    before = uniform_assign(spec(members, counts))
    members[newcomer] = frozenset(counts)
    after = uniform_assign(spec(members, counts, before))
    check_complete(after, members, counts)
    n = sizes(after)
    assert max(n.values()) - min(n.values()) <= 1
    # Old members only give partitions away (to the newcomer); none moves between two old members.
    for m in ids:
        old = {(t, p) for t, ps in before[m].items() for p in ps}
        new = {(t, p) for t, ps in after[m].items() for p in ps}
        assert new <= old


@given(member_ids, topic_counts)
def test_uniform_is_sticky_when_a_member_leaves(ids: list[str], counts: dict[str, int]) -> None:
    members = {m: frozenset(counts) for m in ids}
    before = uniform_assign(spec(members, counts))
    gone = ids[0]
    del members[gone]
    if not members:
        return
    after = uniform_assign(spec(members, counts, {m: a for m, a in before.items() if m != gone}))
    check_complete(after, members, counts)
    for m in members:
        old = {(t, p) for t, ps in before[m].items() for p in ps}
        new = {(t, p) for t, ps in after[m].items() for p in ps}
        assert old <= new  # survivors keep everything they had


@given(member_ids, topic_counts, st.data())
def test_range_gives_consecutive_ranges(ids, counts, data) -> None:
    members = {m: frozenset(data.draw(st.sets(st.sampled_from(sorted(counts)), min_size=1))) for m in ids}
    result = range_assign(spec(members, counts))
    check_complete(result, members, counts)
    for topic, n in counts.items():
        subscribers = sorted(m for m in members if topic in members[m])
        if not subscribers:
            continue
        got = [sorted(result[m].get(topic, ())) for m in subscribers]
        assert [p for r in got for p in r] == list(range(n))  # in member order, consecutive
        assert max(map(len, got)) - min(map(len, got)) <= 1


def test_examples() -> None:
    counts = {"a": 3}
    members = {"m1": frozenset({"a"}), "m2": frozenset({"a"})}
    assert range_assign(spec(members, counts)) == {"m1": {"a": frozenset({0, 1})}, "m2": {"a": frozenset({2})}}
    assert sizes(uniform_assign(spec(members, counts))) in ({"m1": 2, "m2": 1}, {"m1": 1, "m2": 2})
    # A partition of a topic nobody subscribes to stays unassigned; a deleted topic's partitions are dropped.
    assert uniform_assign(spec({"m1": frozenset({"a"})}, {"a": 1, "b": 2}, {"m1": {"gone": frozenset({0})}})) == {
        "m1": {"a": frozenset({0})}
    }
