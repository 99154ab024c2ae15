"""A tiny test driver for the controller core: state, clock, and shortcuts."""

from __future__ import annotations

from collections import Counter

from tinystream.operator.controller import (
    AdvanceTime,
    AlterPartition,
    BrokerHeartbeat,
    ControllerConfig,
    ControllerState,
    CreateTopic,
    Decision,
    Event,
    PartitionRecord,
    RegisterBroker,
    apply,
)


class Cluster:
    """Applies events to one state; `apply` asserts success unless told otherwise."""

    def __init__(self, *, seed: int = 7, config: ControllerConfig | None = None) -> None:
        self.state = ControllerState.bootstrap(cluster_id="test-cluster", seed=seed, config=config)
        self.now = 0

    @property
    def image(self):
        return self.state.image

    def apply(self, event: Event, *, ok: bool = True) -> Decision:
        decision = apply(self.state, event, self.now)
        if ok:
            assert decision.error is None, f"{type(event).__name__} refused: {decision.error} {decision.message}"
        self.state = decision.state
        return decision

    def register(self, broker_id: int, *, incarnation: str | None = None, rack: str | None = None) -> Decision:
        return self.apply(
            RegisterBroker(
                broker_id=broker_id,
                incarnation_id=incarnation or f"inc-{broker_id}",
                host="127.0.0.1",
                port=9000 + broker_id,
                rack=rack,
            )
        )

    def heartbeat(self, broker_id: int, /, *, caught_up: bool = True, ok: bool = True, **overrides) -> Decision:
        record = self.image.brokers[broker_id]
        fields = dict(
            broker_id=broker_id,
            broker_epoch=record.epoch,
            metadata_version=self.image.version if caught_up else record.epoch - 1,
        )
        fields.update(overrides)
        return self.apply(BrokerHeartbeat(**fields), ok=ok)

    def start_brokers(self, ids, *, racks: dict[int, str] | None = None) -> None:
        for b in ids:
            self.register(b, rack=(racks or {}).get(b))
        for b in ids:
            self.heartbeat(b)
        assert all(not self.image.brokers[b].fenced for b in ids)

    def heartbeat_all(self) -> None:
        for b, record in self.image.brokers.items():
            if record.epoch <= self.image.version:
                self.heartbeat(b)

    def advance(self, ms: int) -> Decision:
        self.now += ms
        return self.apply(AdvanceTime())

    def create(self, topic: str, partitions: int = 1, rf: int = 1, **kwargs) -> Decision:
        return self.apply(CreateTopic(topic=topic, partitions=partitions, replication_factor=rf, **kwargs))

    def partition(self, topic: str, index: int = 0) -> PartitionRecord:
        record = self.image.partition(topic, index)
        assert record is not None
        return record

    def alter_isr(self, topic: str, index: int, isr, /, *, ok: bool = True, **overrides) -> Decision:
        """AlterPartition from the current leader with the current epochs, unless overridden."""
        p = self.partition(topic, index)
        leader = overrides.pop("broker_id", p.leader)
        record = self.image.brokers.get(leader)
        fields = dict(
            broker_id=leader,
            broker_epoch=record.epoch if record else 0,
            topic=topic,
            partition=index,
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
            isr=tuple(isr),
        )
        fields.update(overrides)
        return self.apply(AlterPartition(**fields), ok=ok)

    def replica_counts(self, brokers=None) -> Counter:
        counts = Counter({b: 0 for b in (brokers if brokers is not None else self.image.brokers)})
        for _, p in self.image.iter_partitions():
            counts.update(p.replicas)
        return counts

    def leader_counts(self, brokers=None) -> Counter:
        counts = Counter({b: 0 for b in (brokers if brokers is not None else self.image.brokers)})
        for _, p in self.image.iter_partitions():
            if p.leader >= 0:
                counts[p.leader] += 1
        return counts


def spread(counts: Counter) -> int:
    return max(counts.values()) - min(counts.values()) if counts else 0
