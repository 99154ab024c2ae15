"""Random runs of the KIP-848 group with well-behaved clients: no partition is ever owned twice, and the
group always converges to a balanced, complete assignment."""

from __future__ import annotations

from consumer_helpers import Topics, beat_request, join_request
from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.consumer_group import ConsumerGroup, ConsumerGroupState

MEMBERS = ["m1", "m2", "m3", "m4"]


class Client:
    """A consumer that does what the coordinator says: owns what its last assignment listed."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: dict[str, frozenset[int]] = {}
        self.joined = False

    def heartbeat(self, group: ConsumerGroup, topics: Topics, now: int) -> None:
        if not self.joined:
            request = join_request(self.member_id, ("a", "b"))
        else:
            request = beat_request(self.member_id, self.epoch, self.owned)
        result = group.heartbeat(request, topics=topics, now=now).result
        if result.error in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            self.joined, self.epoch, self.owned = False, 0, {}  # drop everything, rejoin
            return
        assert result.error is ErrorCode.none, result
        self.joined, self.epoch = True, result.member_epoch
        if result.assignment is not None:
            self.owned = dict(result.assignment)

    def leave(self, group: ConsumerGroup, topics: Topics, now: int) -> None:
        if self.joined:
            group.heartbeat(beat_request(self.member_id, -1), topics=topics, now=now)
        self.joined, self.epoch, self.owned = False, 0, {}


ops = st.lists(st.tuples(st.sampled_from(["beat", "leave", "grow", "expire"]), st.sampled_from(MEMBERS)),
               min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_no_partition_owned_twice_and_convergence(steps) -> None:
    topics = Topics(a=3, b=4)
    group = ConsumerGroup("g", session_timeout_ms=45_000)
    clients = {m: Client(m) for m in MEMBERS}
    now = 0
    for op, member in steps:
        now += 1000
        client = clients[member]
        if op == "beat":
            client.heartbeat(group, topics, now)
        elif op == "leave":
            client.leave(group, topics, now)
        elif op == "grow":
            topics.counts["b"] += 1
        elif op == "expire":
            # The client stops; its session runs out (it keeps nothing: a dead process).
            removed, _ = group.on_timer(topics, now + 45_000) if member in group.members else ([], False)
            for gone in removed:
                clients[gone].joined, clients[gone].owned = False, {}
            now += 45_000
        owned = [(t, p) for c in clients.values() if c.joined for t, ps in c.owned.items() for p in ps]
        assert len(owned) == len(set(owned)), f"a partition is owned twice after {op} {member}: {owned}"
        held = [(t, p) for m in group.members.values() for a in (m.assigned, m.pending_revocation)
                for t, ps in a.items() for p in ps]
        assert len(held) == len(set(held))
    # Whoever is still in converges: every partition owned once, balanced, group Stable.
    active = [c for c in clients.values() if c.joined]
    for _ in range(6):
        for c in active:
            now += 100
            c.heartbeat(group, topics, now)
    if active:
        assert group.state is ConsumerGroupState.STABLE
        owned = sorted((t, p) for c in active for t, ps in c.owned.items() for p in ps)
        assert owned == sorted([("a", p) for p in range(3)] + [("b", p) for p in range(topics.counts["b"])])
        sizes = [sum(len(ps) for ps in c.owned.values()) for c in active]
        assert max(sizes) - min(sizes) <= 1
