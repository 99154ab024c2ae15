"""Apply the controller's metadata image to this broker: the image is the truth.

`ImageApplier.apply(image)` is synchronous, so no request sees half of an
image: the cluster view (unfenced brokers and ourselves), the local topic
store (a cache of the image), and for each partition with us among its
replicas: open its log, become leader (fetchers stop, the group coordinator
loads its __consumer_offsets partitions, Kafka's onElection) or follower of
the named leader (fetcher, truncation first). Partitions no longer ours are
deleted; topics no longer in the image too. The image's ACLs replace the
authorizer's, its SCRAM credentials the user store's replicated ones and its
client quotas the ones enforced here, in the same synchronous step, so every
broker authorizes and throttles as the image says. Its dynamic broker configs
(the default and this broker's layer) are applied first, so the partitions it
opens get LogConfigs made from them.

The image's JSON layout is the controller's (operator/service/README.md,
"GET /v1/metadata"); `partition_epochs` keeps each partition's epoch for the
AlterPartition requests `session.py` sends (KIP-497).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from tinystream.broker.control.broker_configs import BrokerConfigs
from tinystream.broker.control.quotas import ClientQuotas
from tinystream.broker.coordinators.group_service import GroupService
from tinystream.broker.coordinators.txn_service import TransactionService
from tinystream.broker.metadata.cluster import BrokerEndpoint, ClusterView, ListenerAddress
from tinystream.broker.metadata.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicSpec
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.replication.replica_fetcher import ReplicaFetcherManager
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.security.access_records import apply_access
from tinystream.broker.security.authorizer import Authorizer
from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.topics.manager import TopicManager
from tinystream.scram_users import UserStore

log = logging.getLogger(__name__)


def config_value(value: Any) -> str:
    """A topic config value from the image's JSON, as Kafka's string form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_spec(*, name: str, topic_id: str, replicas: list[list[int]], config: dict[str, Any]) -> TopicSpec:
    """The local topic store's record of a topic the controller describes (replicas per partition)."""
    return TopicSpec(
        name=name,
        topic_id=uuid.UUID(topic_id),
        partitions=len(replicas),
        replication_factor=len(replicas[0]) if replicas else 0,
        configs={k: config_value(v) for k, v in config.items() if v is not None},
    )


class ImageApplier:
    """Makes this broker what the applied metadata image says."""

    def __init__(
        self,
        *,
        broker_id: int,
        cluster: ClusterView,
        topics: TopicManager,
        replicas: ReplicaManager,
        fetchers: ReplicaFetcherManager,
        groups: GroupService | None,
        clock: Callable[[], int],
        transactions: TransactionService | None = None,
        authorizer: Authorizer | None = None,
        users: UserStore | None = None,
        quotas: ClientQuotas | None = None,
        broker_configs: BrokerConfigs | None = None,
    ) -> None:
        self.authorizer = authorizer
        self.broker_configs = broker_configs
        self.quotas = quotas
        self.users = users
        self.broker_id = broker_id
        self.cluster = cluster
        self.topics = topics
        self.replicas = replicas
        self.fetchers = fetchers
        self.groups = groups
        self.transactions = transactions
        self.clock = clock
        self.version = -1  # the applied image's version
        self.image: dict[str, Any] | None = None
        self.partition_epochs: dict[TopicPartition, int] = {}
        self._led_offsets: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        topics.image_states = {}

    def eligible_for_isr(self) -> frozenset[int] | None:
        """Brokers the controller accepts in an ISR (registered, unfenced, not drained: KIP-841), from the
        applied image; None before the first image."""
        if self.image is None:
            return None
        return frozenset(b["broker_id"] for b in self.image.get("brokers", ())
                         if not b.get("fenced") and not b.get("drained"))

    def cancel(self) -> None:
        """Stop the offsets loads and unloads still running (the broker is stopping)."""
        for task in list(self._tasks):
            task.cancel()

    def apply(self, image: dict[str, Any]) -> None:
        """Make this broker what `image` says (synchronous: no request sees half of it)."""
        me = self.broker_id
        if self.broker_configs is not None:  # first: the LogConfigs made below are made from them
            self.broker_configs.use_image(image.get("broker_configs") or {})
        brokers = [
            BrokerEndpoint(b["broker_id"], b["host"], b["port"], b.get("rack"), tuple(
                ListenerAddress(e["name"], e["host"], e["port"], e.get("security_protocol", "PLAINTEXT"))
                for e in b.get("endpoints", ())))
            for b in image.get("brokers", ()) if not b.get("fenced") and b["broker_id"] != me
        ]
        self.cluster.update_brokers(brokers)
        now = self.clock()
        states: dict[TopicPartition, PartitionState] = {}
        wanted: set[TopicPartition] = set()
        seen_topics: set[str] = set()
        for topic in image.get("topics", ()):
            name = topic["name"]
            seen_topics.add(name)
            parts = topic.get("partitions", ())
            spec = topic_spec(name=name, topic_id=topic["topic_id"], replicas=[p["replicas"] for p in parts],
                              config=topic.get("config") or {})
            self._store_topic(spec)
            config = self.topics.log_config(spec)
            for p in parts:
                tp = TopicPartition(name, p["partition"])
                state = PartitionState(p["leader"], p["leader_epoch"], tuple(p["replicas"]), tuple(p["isr"]))
                states[tp] = state
                self.partition_epochs[tp] = p["partition_epoch"]
                if me in state.replicas:
                    wanted.add(tp)
                    self._apply_partition(tp, config, state, now)
        self.topics.image_states = states
        for partition in self.replicas.partitions():
            if partition.tp not in wanted:
                self._drop_partition(partition.tp)
        for spec in list(self.topics.store):
            if spec.name not in seen_topics:
                self.topics.store.remove(spec.name)
                for listener in self.topics.on_topic_deleted:
                    listener(spec)
        apply_access(image, authorizer=self.authorizer, users=self.users)
        if self.quotas is not None:
            self.quotas.use_image(image.get("client_quotas", ()))
        self.image = image
        self.version = int(image["version"])


    def _store_topic(self, spec: TopicSpec) -> None:
        store = self.topics.store
        old = store.get(spec.name)
        if old is None:
            store.add(spec)
            return
        if old.topic_id != spec.topic_id:  # deleted and created again: the old logs go
            for index in range(old.partitions):
                self._drop_partition(TopicPartition(old.name, index))
            store.remove(old.name)
            store.add(spec)
        elif old != spec:
            store.update(spec.name, partitions=spec.partitions, replication_factor=spec.replication_factor,
                         configs=spec.configs)

    def _apply_partition(self, tp: TopicPartition, config: LogConfig, state: PartitionState, now: int) -> None:
        existing = self.replicas.get(tp)
        was_leader = existing is not None and existing.is_leader
        old_epoch = existing.leader_epoch if existing is not None else None
        if existing is not None and existing.log.config != config:
            self.replicas.update_config(tp, config)
        if existing is None or existing.state != state:
            partition = self.replicas.open_partition(tp, config, state)
            if existing is None:
                partition.update_state(state, now_ms=now)
        partition = self.replicas.get(tp)
        assert partition is not None
        if state.leader == self.broker_id:
            self.fetchers.unfollow(tp)
            if tp.topic == OFFSETS_TOPIC and (not was_leader or old_epoch != state.leader_epoch):
                self._group_partition(tp.partition, load=True)
            if tp.topic == TRANSACTION_STATE_TOPIC and self.transactions is not None and (
                not was_leader or old_epoch != state.leader_epoch
            ):
                self.transactions.leadership_changed(tp.partition, leader=True, leader_epoch=state.leader_epoch)
        else:
            if tp.topic == OFFSETS_TOPIC and tp.partition in self._led_offsets:
                self._group_partition(tp.partition, load=False)
            if tp.topic == TRANSACTION_STATE_TOPIC and self.transactions is not None and was_leader:
                self.transactions.leadership_changed(tp.partition, leader=False, leader_epoch=state.leader_epoch)
            if state.leader >= 0:
                self.fetchers.follow(tp, leader=state.leader, leader_epoch=state.leader_epoch)
            else:
                self.fetchers.unfollow(tp)

    def _drop_partition(self, tp: TopicPartition) -> None:
        self.fetchers.unfollow(tp)
        if tp.topic == OFFSETS_TOPIC and tp.partition in self._led_offsets:
            self._group_partition(tp.partition, load=False)
        if tp.topic == TRANSACTION_STATE_TOPIC and self.transactions is not None:
            self.transactions.leadership_changed(tp.partition, leader=False, leader_epoch=-1)
        self.replicas.delete_partition(tp)
        self.partition_epochs.pop(tp, None)

    def _group_partition(self, index: int, *, load: bool) -> None:
        """__consumer_offsets: the coordinator follows leadership (Kafka's onElection / onResignation)."""
        if self.groups is None:
            return
        coordinator = self.groups.coordinator
        if load:
            self._led_offsets.add(index)
            work = coordinator.load_partition(index)
        else:
            self._led_offsets.discard(index)
            work = coordinator.unload_partition(index)

        async def run() -> None:
            try:
                await work
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s __consumer_offsets-%d failed", "loading" if load else "unloading", index)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
