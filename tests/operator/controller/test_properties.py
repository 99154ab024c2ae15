"""Property tests: random event sequences keep every rule of the controller.

A hypothesis state machine throws registrations, restarts, heartbeats,
session expiries, drains, topic create/grow/delete, config flips, AlterPartition
requests (valid and stale), preferred-leader ticks, reassignments and
controller restarts at `apply`, and after every step checks:

* the image invariants (invariants.violations): leaders are live ISR members,
  ISR ⊆ replicas, a fenced broker is in an ISR only as the last member of an
  offline partition, a drained one only as the sole member;
* per partition, across the step: leader epoch never decreases, grows by
  exactly one when the leader changed and not otherwise; partition epoch
  grows by exactly one when anything in the partition changed;
* image versions grow by exactly one on change, never otherwise; a refused
  event returns the very same state and no actions;
* every partition is at the settle fixpoint;
* to_dict / from_dict (through JSON) gives back an equal state;
* at the end, replaying the same events from the start gives the same state.
"""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tinystream.operator.controller import (
    NO_LEADER,
    AdvanceTime,
    AlterPartition,
    AlterTopicConfig,
    BrokerHeartbeat,
    ControllerActivated,
    ControllerConfig,
    ControllerState,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    DrainBroker,
    ElectPreferredLeaders,
    ExpireSession,
    LeaderChanged,
    LeaderRecoveryState,
    PreferredElection,
    ReassignPartitions,
    RegisterBroker,
    ReplicaAssignment,
    UndrainBroker,
    UnregisterBroker,
    apply,
    violations,
)
from tinystream.operator.controller.liveness import ClusterView
from tinystream.operator.controller.settle import settle_partition
from tinystream.operator.controller.topic_config import unclean_election_enabled

BROKERS = st.integers(0, 5)
TOPICS = st.sampled_from(["t0", "t1", "t2"])


def _shape(p):
    return (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas, p.leader_recovery_state)


class ControllerMachine(RuleBasedStateMachine):
    @initialize(
        seed=st.integers(0, 2**32),
        immediate=st.booleans(),
        unclean=st.booleans(),
        racks=st.booleans(),
        brokers=st.integers(2, 5),
        topics=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 3)), min_size=1, max_size=2),
    )
    def setup(self, seed, immediate, unclean, racks, brokers, topics) -> None:
        config = ControllerConfig(
            broker_session_timeout_ms=5000,
            unclean_leader_election_enable=unclean,
            preferred_leader_election=PreferredElection.IMMEDIATE if immediate else PreferredElection.ON_TICK,
        )
        self.initial = ControllerState.bootstrap(cluster_id="prop", seed=seed, config=config)
        self.state = self.initial
        self.now = 0
        self.racks = racks
        self.incarnation = 0
        self.log: list[tuple[object, int]] = []
        # Start from a working cluster, so steps explore failures, not bootstrap.
        for broker in range(brokers):
            self.register(broker, restart=False, catch_up=False)
        self.heartbeat_all()
        for i, (partitions, rf) in enumerate(topics):
            self._apply(CreateTopic(topic=f"t{i}", partitions=partitions, replication_factor=min(rf, brokers)))

    # -- driving ---------------------------------------------------------------

    def _apply(self, event):
        before = self.state
        decision = apply(before, event, self.now)
        self.log.append((event, self.now))
        if decision.error is not None:
            assert decision.state is before and not decision.image_changed and decision.actions == ()
        if decision.image_changed:
            assert decision.state.image.version == before.image.version + 1
        else:
            assert decision.state.image is before.image
        self._check_partition_epochs(before.image, decision.state.image, decision.actions)
        self.state = decision.state
        return decision

    def _check_partition_epochs(self, old, new, actions) -> None:
        leader_actions = {(a.topic, a.partition): a for a in actions if isinstance(a, LeaderChanged)}
        for name, topic in old.topics.items():
            after = new.topics.get(name)
            if after is None or after.topic_id != topic.topic_id:
                continue
            for p in topic.partitions:
                q = after.partitions[p.partition]
                if q.leader != p.leader:
                    assert q.leader_epoch == p.leader_epoch + 1
                    action = leader_actions[(name, p.partition)]
                    assert (action.leader, action.leader_epoch) == (q.leader, q.leader_epoch)
                else:
                    assert q.leader_epoch == p.leader_epoch
                    assert (name, p.partition) not in leader_actions
                expected = p.partition_epoch + (1 if _shape(q) != _shape(p) else 0)
                assert q.partition_epoch == expected

    def _registered(self):
        return sorted(self.state.image.brokers)

    def _broker(self, data) -> int:
        """Mostly a registered broker, sometimes any id (unknown ones must be refused)."""
        if self._registered() and data.draw(st.integers(0, 4)):
            return data.draw(st.sampled_from(self._registered()))
        return data.draw(BROKERS)

    def _topic(self, data) -> str:
        """Mostly an existing topic, sometimes any name."""
        if self.state.image.topics and data.draw(st.integers(0, 4)):
            return data.draw(st.sampled_from(sorted(self.state.image.topics)))
        return data.draw(TOPICS)

    # -- brokers ---------------------------------------------------------------

    @rule(broker=BROKERS, restart=st.booleans(), catch_up=st.booleans())
    def register(self, broker, restart, catch_up) -> None:
        existing = self.state.image.brokers.get(broker)
        if existing is None or restart:
            self.incarnation += 1
            incarnation = f"inc-{self.incarnation}"
        else:
            incarnation = existing.incarnation_id
        rack = f"rack-{broker % 3}" if self.racks else None
        self._apply(RegisterBroker(broker_id=broker, incarnation_id=incarnation, host="h", port=9092, rack=rack))
        if catch_up:
            self._heartbeat(broker, caught_up=True)

    def _heartbeat(self, broker, *, caught_up, stale=False, want_fence=False):
        record = self.state.image.brokers[broker]
        decision = self._apply(
            BrokerHeartbeat(
                broker_id=broker,
                broker_epoch=record.epoch - 1 if stale else record.epoch,
                metadata_version=self.state.image.version if caught_up else record.epoch - 1,
                want_fence=want_fence,
            )
        )
        assert decision.ok != stale
        if caught_up and not stale and not want_fence:
            assert not self.state.image.brokers[broker].fenced

    @rule(data=st.data(), caught_up=st.booleans(), stale=st.booleans(), want_fence=st.booleans())
    def heartbeat(self, data, caught_up, stale, want_fence) -> None:
        if self._registered():
            broker = data.draw(st.sampled_from(self._registered()))
            self._heartbeat(broker, caught_up=caught_up, stale=stale, want_fence=want_fence)

    @rule()
    def heartbeat_all(self) -> None:
        for broker in self._registered():
            self._heartbeat(broker, caught_up=True)

    @rule(ms=st.integers(0, 8000))
    def advance(self, ms) -> None:
        self.now += ms
        self._apply(AdvanceTime())

    @rule(data=st.data())
    def expire(self, data) -> None:
        broker = self._broker(data)
        decision = self._apply(ExpireSession(broker_id=broker))
        assert decision.ok == (broker in self.state.image.brokers)

    @rule(data=st.data(), drain=st.booleans())
    def drain(self, data, drain) -> None:
        broker = self._broker(data)
        self._apply(DrainBroker(broker_id=broker) if drain else UndrainBroker(broker_id=broker))

    @rule(data=st.data())
    def unregister(self, data) -> None:
        broker = self._broker(data)
        self._apply(UnregisterBroker(broker_id=broker))

    # -- topics ----------------------------------------------------------------

    @rule(topic=TOPICS, partitions=st.integers(1, 6), rf=st.integers(1, 3), unclean=st.none() | st.booleans())
    def create(self, topic, partitions, rf, unclean) -> None:
        config = {} if unclean is None else {"unclean.leader.election.enable": unclean}
        placeable = ClusterView.of(self.state.image.brokers).placeable()
        existed = topic in self.state.image.topics
        decision = self._apply(CreateTopic(topic=topic, partitions=partitions, replication_factor=rf, config=config))
        assert decision.ok == (not existed and rf <= len(placeable))
        if decision.ok:
            created = self.state.image.topics[topic].partitions
            counts = Counter({b: 0 for b in placeable})
            counts.update(b for p in created for b in p.replicas)
            leaders = Counter({b: 0 for b in placeable})
            leaders.update(p.leader for p in created)
            assert set(counts) == set(placeable)  # only live, undrained brokers get replicas
            assert max(leaders.values()) - min(leaders.values()) <= 1
            if partitions % len(placeable) == 0 and not self.racks:
                assert max(counts.values()) - min(counts.values()) <= 1

    @rule(data=st.data(), extra=st.integers(1, 3))
    def grow(self, data, extra) -> None:
        topic = self._topic(data)
        record = self.state.image.topics.get(topic)
        count = len(record.partitions) + extra if record else extra
        self._apply(CreatePartitions(topic=topic, count=count))

    @rule(data=st.data())
    def delete(self, data) -> None:
        topic = self._topic(data)
        self._apply(DeleteTopic(topic=topic))

    @rule(data=st.data(), value=st.none() | st.booleans())
    def flip_unclean(self, data, value) -> None:
        topic = self._topic(data)
        self._apply(AlterTopicConfig(topic=topic, config={"unclean.leader.election.enable": value}))

    # -- partitions --------------------------------------------------------------

    def _some_partition(self, data):
        parts = list(self.state.image.iter_partitions())
        if not parts:
            return None, None
        return data.draw(st.sampled_from(parts))

    @rule(
        data=st.data(),
        tamper=st.sampled_from(["none", "none", "none", "old_leader_epoch", "old_partition_epoch", "other_broker"]),
        recovery=st.sampled_from(list(LeaderRecoveryState)),
    )
    def alter_partition(self, data, tamper, recovery) -> None:
        topic, p = self._some_partition(data)
        if p is None:
            return
        sender = p.leader
        if tamper == "other_broker" or sender == NO_LEADER:
            sender = self._broker(data)
        record = self.state.image.brokers.get(sender)
        isr = data.draw(st.lists(st.sampled_from(p.replicas), unique=True, max_size=len(p.replicas)))
        if p.leader != NO_LEADER and p.leader not in isr and data.draw(st.booleans()):
            isr = [p.leader] + isr
        event = AlterPartition(
            broker_id=sender,
            broker_epoch=record.epoch if record else 0,
            topic=topic,
            partition=p.partition,
            leader_epoch=p.leader_epoch - (tamper == "old_leader_epoch"),
            partition_epoch=p.partition_epoch - (tamper == "old_partition_epoch"),
            isr=tuple(isr),
            leader_recovery_state=recovery,
        )
        view = ClusterView.of(self.state.image.brokers)
        decision = self._apply(event)
        if tamper in ("old_leader_epoch", "old_partition_epoch") or sender != p.leader:
            assert not decision.ok
        if decision.ok:  # KIP-841: only live, undrained brokers may join an ISR
            assert all(view.isr_eligible(b) for b in isr if b not in p.isr)
            assert p.leader in isr and set(isr) <= set(p.replicas)

    @rule(data=st.data())
    def leader_catches_followers_up(self, data) -> None:
        """What a healthy leader does: add every eligible, lagging replica."""
        topic, p = self._some_partition(data)
        if p is None or p.leader == NO_LEADER:
            return
        view = ClusterView.of(self.state.image.brokers)
        isr = p.isr + tuple(r for r in p.replicas if r not in p.isr and view.isr_eligible(r))
        record = self.state.image.brokers[p.leader]
        recovered = LeaderRecoveryState.RECOVERED
        decision = self._apply(
            AlterPartition(broker_id=p.leader, broker_epoch=record.epoch, topic=topic, partition=p.partition,
                           leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch, isr=isr,
                           leader_recovery_state=recovered)
        )
        assert decision.ok, decision.message

    @rule(data=st.data())
    def elect_preferred(self, data) -> None:
        self._apply(ElectPreferredLeaders())

    @rule(data=st.data(), cancel=st.sampled_from([False, False, False, True]))
    def reassign(self, data, cancel) -> None:
        topic, p = self._some_partition(data)
        if p is None:
            return
        registered = self._registered()
        pool = st.sampled_from(registered) if registered and data.draw(st.integers(0, 3)) else BROKERS
        replicas = None if cancel else tuple(data.draw(st.lists(pool, unique=True, min_size=1, max_size=3)))
        self._apply(ReassignPartitions(assignments=(ReplicaAssignment(topic=topic, partition=p.partition,
                                                                      replicas=replicas),)))

    @rule()
    def controller_restart(self) -> None:
        """The driver persists, dies, reloads and reactivates."""
        plain = json.loads(json.dumps(self.state.to_dict()))
        self.state = ControllerState.from_dict(plain)
        self._apply(ControllerActivated())

    # -- invariants ----------------------------------------------------------------

    @invariant()
    def image_is_sound(self) -> None:
        if hasattr(self, "state"):
            assert violations(self.state.image) == []

    @invariant()
    def fenced_brokers_lead_nothing(self) -> None:
        if not hasattr(self, "state"):
            return
        image = self.state.image
        for _, p in image.iter_partitions():
            if p.leader != NO_LEADER:
                assert not image.brokers[p.leader].fenced and p.leader in p.isr
            for b in p.isr:
                if b not in image.brokers or image.brokers[b].fenced:
                    assert p.isr == (b,) and p.leader == NO_LEADER

    @invariant()
    def partitions_are_settled(self) -> None:
        if not hasattr(self, "state"):
            return
        image, config = self.state.image, self.state.config
        view = ClusterView.of(image.brokers)
        immediate = config.preferred_leader_election is PreferredElection.IMMEDIATE
        for _name, topic in image.topics.items():
            unclean = unclean_election_enabled(topic.config, cluster_default=config.unclean_leader_election_enable)
            for p in topic.partitions:
                settled, _ = settle_partition(p, view=view, unclean_allowed=unclean, preferred=immediate)
                assert settled == p

    @invariant()
    def round_trips(self) -> None:
        if hasattr(self, "state"):
            assert ControllerState.from_dict(json.loads(json.dumps(self.state.to_dict()))) == self.state

    def teardown(self) -> None:
        if not hasattr(self, "state"):
            return
        replay = self.initial
        for event, now in self.log:
            if isinstance(event, ControllerActivated):
                replay = ControllerState.from_dict(json.loads(json.dumps(replay.to_dict())))
            replay = apply(replay, event, now).state
        assert replay == self.state


TestControllerMachine = ControllerMachine.TestCase
TestControllerMachine.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 6), rounds=st.integers(1, 4), rf_seed=st.integers(0, 99), seed=st.integers(0, 2**32))
def test_create_on_even_cluster_is_balanced(n, rounds, rf_seed, seed) -> None:
    state = ControllerState.bootstrap(cluster_id="c", seed=seed)
    for b in range(n):
        state = apply(state, RegisterBroker(broker_id=b, incarnation_id="i", host="h", port=1), 0).state
    for b in range(n):
        epoch = state.image.brokers[b].epoch
        state = apply(state, BrokerHeartbeat(broker_id=b, broker_epoch=epoch, metadata_version=state.image.version), 0).state
    rf = 1 + rf_seed % n
    decision = apply(state, CreateTopic(topic="t", partitions=n * rounds, replication_factor=rf), 0)
    assert decision.ok
    replicas = Counter(b for _, p in decision.image.iter_partitions() for b in p.replicas)
    leaders = Counter(p.leader for _, p in decision.image.iter_partitions())
    assert set(replicas.values()) == {rounds * rf} and set(leaders.values()) == {rounds}
