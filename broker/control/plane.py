"""This broker under a controller (`controller.url` set): register, heartbeat, follow the metadata image.

Flow (operator/service/README.md, "For brokers"; KIP-631):

1. `start`: register with a fresh incarnation id (fenced), adopt the
   controller's cluster id (refusing log dirs of another cluster), pull the full
   image (`since=-1`) and apply it, then run three loops:
   - heartbeat every broker.heartbeat.interval.ms with the applied image
     version (the first one unfences us); STALE_BROKER_EPOCH /
     BROKER_ID_NOT_REGISTERED re-register with the same incarnation id;
   - metadata long-poll (`since=<applied>`), applying each newer image;
   - replication tick: ISR shrink / expand via AlterPartition (KIP-497) for
     partitions we lead, and the HW checkpoint.
2. `apply(image)`: the image is the truth. Cluster view (unfenced brokers
   and ourselves), the local topic store (a cache of the image), and for
   each partition with us among its replicas: open its log, become leader
   (fetchers stop, group coordinator loads __consumer_offsets partitions)
   or follower of the named leader (fetcher, truncation first). Partitions
   no longer ours are deleted; topics no longer in the image too.
3. Client admin requests are forwarded (`create_topic`, ...) and answered
   once the image holding the change is applied here (so a client that then
   asks for Metadata sees it), or with the controller's error.

`stop(fence=True)` sends a last heartbeat with want_fence so the controller
moves leadership away at once (Kafka's controlled shutdown); `fence=False`
behaves like a crash (tests use it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from tinystream.broker.metadata.cluster import BrokerEndpoint, ClusterView
from tinystream.broker.errors import ErrorCode
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.coordinators.producer_ids import ProducerIdsUnavailable
from tinystream.broker.replication.replica_fetcher import ReplicaFetcherManager
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.topics.manager import OFFSETS_TOPIC_CONFIG, TopicManager, TopicResult
from tinystream.broker.metadata.topics import OFFSETS_TOPIC, TopicSpec
from tinystream.config.settings import BrokerSettings
from tinystream.controller_client import (
    REREGISTER_ERRORS,
    ControllerClient,
    ControllerClientError,
    ControllerRefused,
    ControllerUnavailable,
)

log = logging.getLogger(__name__)

METADATA_WAIT_MS = 5000
RETRY_S = 0.2
#: How long an admin request waits for its change to reach this broker's image.
ADMIN_WAIT_S = 10.0


def _config_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error_code(exc: ControllerClientError) -> ErrorCode:
    name = (exc.error or "").lower()
    try:
        return ErrorCode[name]
    except KeyError:
        if exc.code is not None:
            with contextlib.suppress(ValueError):
                return ErrorCode(exc.code)
        return ErrorCode.unknown_server_error


class ControlPlane:
    def __init__(
        self,
        *,
        settings: BrokerSettings,
        controller: ControllerClient,
        cluster: ClusterView,
        topics: TopicManager,
        replicas: ReplicaManager,
        fetchers: ReplicaFetcherManager,
        groups: Any,
        clock: Callable[[], int],
        adopt_cluster_id: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.controller = controller
        self.cluster = cluster
        self.topics = topics
        self.replicas = replicas
        self.fetchers = fetchers
        self.groups = groups
        self.clock = clock
        self._adopt_cluster_id = adopt_cluster_id
        self._joined = False  # the controller's cluster id adopted
        self.broker_id = settings.broker_id
        self.incarnation_id = uuid.uuid4().hex
        self.broker_epoch = -1
        self.version = -1  # the applied image's version
        self.image: dict[str, Any] | None = None
        self.partition_epochs: dict[TopicPartition, int] = {}
        self._applied = asyncio.Condition()
        self._tasks: list[asyncio.Task[Any]] = []
        self._altering: set[TopicPartition] = set()
        self._group_tasks: set[asyncio.Task[Any]] = set()
        self._led_offsets: set[int] = set()
        topics.image_states = {}

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        cluster_id = await self._register()
        if self._adopt_cluster_id is not None:
            self._adopt_cluster_id(cluster_id)  # raises before any partition is opened
        else:
            self.cluster.cluster_id = cluster_id
        self._joined = True
        while True:
            try:
                reply = await self.controller.metadata(since=-1)
                break
            except ControllerUnavailable as exc:
                log.warning("controller unavailable (%s); retrying", exc)
                await asyncio.sleep(RETRY_S)
        assert reply.image is not None
        await self._apply(reply.image)
        self._tasks = [
            asyncio.ensure_future(self._heartbeat_loop()),
            asyncio.ensure_future(self._metadata_loop()),
            asyncio.ensure_future(self._replication_loop()),
        ]
        # One heartbeat now so we are unfenced before clients are told we are ready.
        with contextlib.suppress(ControllerClientError):
            await self._heartbeat()

    async def stop(self, *, fence: bool = True) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for task in list(self._group_tasks):
            task.cancel()
        await self.fetchers.stop()
        if fence and self.broker_epoch >= 0:
            with contextlib.suppress(ControllerClientError, asyncio.TimeoutError):
                await asyncio.wait_for(self.controller.heartbeat(
                    self.broker_id, broker_epoch=self.broker_epoch, metadata_version=self.version, want_fence=True,
                ), 2.0)
        await self.controller.close()

    async def _register(self) -> str:
        """Register (again); returns the controller's cluster id."""
        local = self.cluster.local
        while True:
            try:
                reply = await self.controller.register_broker(
                    broker_id=self.broker_id, incarnation_id=self.incarnation_id,
                    host=local.host, port=local.port, rack=local.rack,
                )
                self.broker_epoch = reply.broker_epoch
                log.info("broker %d registered with the controller, epoch %d", self.broker_id, self.broker_epoch)
                if self._joined and reply.cluster_id != self.cluster.cluster_id:
                    log.error("the controller now names cluster %s, this broker joined %s",
                              reply.cluster_id, self.cluster.cluster_id)
                return reply.cluster_id
            except ControllerUnavailable as exc:
                log.warning("controller unavailable (%s); retrying registration", exc)
                await asyncio.sleep(RETRY_S)

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """The next producer-id block from the controller (KIP-730): (start, length).

        A stale epoch is left to the heartbeat loop, which re-registers; the
        caller gets a retriable ProducerIdsUnavailable meanwhile.
        """
        try:
            block = await self.controller.allocate_producer_ids(self.broker_id, self.broker_epoch)
        except ControllerClientError as exc:
            raise ProducerIdsUnavailable(f"the controller gave no producer ids: {exc}") from exc
        return block.producer_id_start, block.producer_id_len

    # -- loops ------------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        try:
            reply = await self.controller.heartbeat(
                self.broker_id, broker_epoch=self.broker_epoch, metadata_version=self.version
            )
        except ControllerRefused as exc:
            if exc.error in REREGISTER_ERRORS:
                await self._register()
                return
            raise
        if reply.newer_image_available:
            await self._pull(wait_ms=0)

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.broker_heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._heartbeat()
            except ControllerClientError as exc:
                log.debug("heartbeat failed: %s", exc)

    async def _pull(self, *, wait_ms: int) -> None:
        reply = await self.controller.metadata(since=self.version, wait_ms=wait_ms)
        if reply.image is not None and reply.version > self.version:
            await self._apply(reply.image)

    async def _metadata_loop(self) -> None:
        while True:
            try:
                await self._pull(wait_ms=METADATA_WAIT_MS)
            except asyncio.CancelledError:
                raise
            except ControllerClientError as exc:
                log.debug("metadata pull failed: %s", exc)
                await asyncio.sleep(RETRY_S)
            except Exception:
                log.exception("applying a metadata image failed")
                await asyncio.sleep(RETRY_S)

    async def _replication_loop(self) -> None:
        lag = self.settings.replica_lag_time_max_ms
        period = min(max(lag / 4000, 0.1), 1.0)
        ticks = 0
        while True:
            await asyncio.sleep(period)
            ticks += 1
            now = self.clock()
            eligible = self._eligible_for_isr()
            for partition in self.replicas.partitions():
                if partition.tp in self._altering:
                    continue
                isr = partition.isr_change(now, lag, eligible)
                if isr is not None:
                    self._altering.add(partition.tp)
                    task = asyncio.ensure_future(self._alter_isr(partition.tp, isr))
                    self._group_tasks.add(task)
                    task.add_done_callback(self._group_tasks.discard)
            if ticks % max(int(5 / period), 1) == 0:
                self.replicas.write_hw_checkpoint()

    def _eligible_for_isr(self) -> frozenset[int] | None:
        """Brokers the controller accepts in an ISR (registered, unfenced, not drained: KIP-841), from the
        applied image; None before the first image."""
        if self.image is None:
            return None
        return frozenset(b["broker_id"] for b in self.image.get("brokers", ())
                         if not b.get("fenced") and not b.get("drained"))

    async def _alter_isr(self, tp: TopicPartition, isr: tuple[int, ...]) -> None:
        try:
            partition = self.replicas.get(tp)
            epoch = self.partition_epochs.get(tp)
            if partition is None or epoch is None or not partition.is_leader:
                return
            log.info("%s: asking the controller for ISR %s (was %s)", tp, list(isr), list(partition.state.isr))
            try:
                reply = await self.controller.alter_partition(
                    broker_id=self.broker_id, broker_epoch=self.broker_epoch, topic=tp.topic,
                    partition=tp.partition, leader_epoch=partition.leader_epoch, partition_epoch=epoch, isr=isr,
                )
            except ControllerClientError as exc:
                log.info("%s: AlterPartition refused (%s); waiting for newer metadata", tp, exc)
                await asyncio.sleep(RETRY_S)
                return
            new = reply.partition
            current = self.replicas.get(tp)
            if current is None or current.leader_epoch != new.leader_epoch or new.leader != self.broker_id:
                return
            state = PartitionState(new.leader, new.leader_epoch, tuple(new.replicas), tuple(new.isr))
            self.partition_epochs[tp] = new.partition_epoch
            self.topics.image_states[tp] = state
            current.update_state(state, now_ms=self.clock())
            self.replicas.purgatory.notify(tp)
        finally:
            self._altering.discard(tp)

    # -- applying an image --------------------------------------------------------------------

    async def _apply(self, image: dict[str, Any]) -> None:
        version = int(image["version"])
        if version <= self.version:
            return
        self.apply(image)
        async with self._applied:
            self._applied.notify_all()

    def apply(self, image: dict[str, Any]) -> None:
        """Make this broker what `image` says (synchronous: no request sees half of it)."""
        me = self.broker_id
        brokers = [
            BrokerEndpoint(b["broker_id"], b["host"], b["port"], b.get("rack"))
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
            spec = TopicSpec(
                name=name,
                topic_id=uuid.UUID(topic["topic_id"]),
                partitions=len(parts),
                replication_factor=len(parts[0]["replicas"]) if parts else 0,
                configs={k: _config_value(v) for k, v in (topic.get("config") or {}).items() if v is not None},
            )
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

    def _apply_partition(self, tp: TopicPartition, config: Any, state: PartitionState, now: int) -> None:
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
        else:
            if tp.topic == OFFSETS_TOPIC and tp.partition in self._led_offsets:
                self._group_partition(tp.partition, load=False)
            if state.leader >= 0:
                self.fetchers.follow(tp, leader=state.leader, leader_epoch=state.leader_epoch)
            else:
                self.fetchers.unfollow(tp)

    def _drop_partition(self, tp: TopicPartition) -> None:
        self.fetchers.unfollow(tp)
        if tp.topic == OFFSETS_TOPIC and tp.partition in self._led_offsets:
            self._group_partition(tp.partition, load=False)
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
        self._group_tasks.add(task)
        task.add_done_callback(self._group_tasks.discard)

    # -- forwarded admin requests -------------------------------------------------------------

    async def wait_for_version(self, version: int, timeout_s: float = ADMIN_WAIT_S) -> bool:
        async def reached() -> None:
            async with self._applied:
                await self._applied.wait_for(lambda: self.version >= version)

        if self.version >= version:
            return True
        with contextlib.suppress(ControllerClientError):
            await self._pull(wait_ms=0)
        try:
            await asyncio.wait_for(reached(), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    async def _forward(self, name: str, call: Any, *, validate_only: bool = False) -> TopicResult:
        try:
            reply = await call
        except ControllerClientError as exc:
            return TopicResult(_error_code(exc), exc.message)
        if not validate_only and not await self.wait_for_version(reply.metadata_version):
            return TopicResult(ErrorCode.request_timed_out, "the change did not reach this broker in time")
        spec = self.topics.get(name)
        if validate_only and getattr(reply, "topic", None) is not None:
            t = reply.topic
            spec = TopicSpec(name=t.name, topic_id=uuid.UUID(t.topic_id), partitions=len(t.partitions),
                             replication_factor=len(t.partitions[0].replicas) if t.partitions else 0,
                             configs={k: _config_value(v) for k, v in t.config.items()})
        return TopicResult(ErrorCode.none, spec=spec)

    async def create_topic(
        self,
        name: str,
        *,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        assignments: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicResult:
        replica_assignment = [assignments[i] for i in sorted(assignments)] if assignments else None
        return await self._forward(name, self.controller.create_topic(
            name,
            partitions=None if num_partitions == -1 or replica_assignment else num_partitions,
            replication_factor=None if replication_factor == -1 or replica_assignment else replication_factor,
            config={k: v for k, v in (configs or {}).items() if v is not None},
            replica_assignment=replica_assignment,
            validate_only=validate_only,
        ), validate_only=validate_only)

    async def auto_create(self, name: str) -> TopicResult:
        if name == OFFSETS_TOPIC:
            return await self.ensure_offsets_topic()
        result = await self.create_topic(name)
        if result.error == ErrorCode.topic_already_exists:
            await self._pull(wait_ms=0)
            return TopicResult(ErrorCode.none, spec=self.topics.get(name))
        return result

    async def ensure_offsets_topic(self) -> TopicResult:
        spec = self.topics.get(OFFSETS_TOPIC)
        if spec is not None:
            return TopicResult(ErrorCode.none, spec=spec)
        live = len(self.cluster.brokers())
        result = await self._forward(OFFSETS_TOPIC, self.controller.create_topic(
            OFFSETS_TOPIC,
            partitions=self.settings.offsets_topic_num_partitions,
            replication_factor=max(min(self.settings.offsets_topic_replication_factor, live), 1),
            config=OFFSETS_TOPIC_CONFIG,
        ))
        if result.error == ErrorCode.topic_already_exists:
            with contextlib.suppress(ControllerClientError):
                await self._pull(wait_ms=0)
            return TopicResult(ErrorCode.none, spec=self.topics.get(OFFSETS_TOPIC))
        return result

    async def delete_topic(self, name: str) -> TopicResult:
        spec = self.topics.get(name)
        result = await self._forward(name, self.controller.delete_topic(name))
        return TopicResult(result.error, result.message, spec if result.error == ErrorCode.none else None)

    async def create_partitions(
        self, name: str, count: int, *, assignments: list[list[int]] | None = None, validate_only: bool = False
    ) -> TopicResult:
        return await self._forward(name, self.controller.create_partitions(
            name, count=count, replica_assignment=assignments, validate_only=validate_only,
        ), validate_only=validate_only)

    async def set_configs(self, name: str, overrides: Mapping[str, str], *, validate_only: bool = False) -> TopicResult:
        """Replace the topic's overrides (AlterConfigs / IncrementalAlterConfigs computed the whole set)."""
        return await self._forward(name, self.controller.alter_topic_config(
            name, dict(overrides), replace=True, validate_only=validate_only,
        ), validate_only=validate_only)
