"""Topic lifecycle on this broker: create, grow, reconfigure, delete, auto-create.

Each operation checks its request the way Kafka's controller does (error
codes named inline). Creating and growing open the new partition logs first
and save the `TopicStore` after, so a failure halfway (too many open files)
is rolled back and answered, and a restart never meets a topic whose
partitions cannot open; reconfiguring and deleting change the store first.
A partition that cannot open at start is logged and left closed: the broker
starts and serves the others.

What one broker hosts is bounded (`check_room`): `max.broker.partitions`
(KIP-578's name) and the open-file limit (one descriptor per partition, the
active segment's log, measured, plus one for each sealed segment hosted now),
so that no request can leave a broker that cannot restart. `create_async`
makes a new topic's files on worker threads, a slice of partitions at a time,
so other clients are served meanwhile.

Local mode (no controller yet): this broker leads every partition at leader
epoch 0 with itself as the only replica, so the replication factor cannot
exceed one broker. With a controller, placement and partition state come from
its metadata image instead and these methods become its callers' fallbacks.

Listeners (`on_partitions_opened`, `on_topic_deleted`) let the group
coordinator learn about __consumer_offsets partitions and metrics forget
deleted topics without this module knowing either.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from tinystream.broker.errors import ErrorCode
from tinystream.broker.metadata.cluster import ClusterView
from tinystream.broker.metadata.topics import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    InvalidTopicName,
    TopicSpec,
    TopicStore,
    validate_topic_name,
)
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.topics.config import InvalidConfig, log_config, validate
from tinystream.config.settings import BrokerSettings
from tinystream.config.topic_configs import KEY_SCHEMA_VALIDATION, VALUE_SCHEMA_VALIDATION

log = logging.getLogger(__name__)

#: Largest partition count one request may ask for. Kafka has no hard limit;
#: every partition costs open files and memory here, and num.partitions is
#: capped at the same value in BrokerSettings.
MAX_PARTITIONS_PER_TOPIC = 10_000
#: Descriptors a hosted partition keeps open at least: its active segment's log (indexes open only to write).
#: Every sealed segment keeps its log open too, as Kafka's do; `check_room` counts those it finds. A Fetch adds
#: none: its file ranges share the segments' descriptors (storage/file_range.py).
FDS_PER_PARTITION = 1
#: Descriptors kept for everything else beyond max.connections (listeners, files being written, the loop).
FD_RESERVE = 256
#: Partitions of a new topic whose files are made at once, each on a worker thread (create_async).
OPEN_SLICE = 8
#: Kafka's offsets.topic.segment.bytes default; the offsets topic is compacted.
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
#: Kafka's transaction.state.log.segment.bytes default; compacted like the offsets topic.
TRANSACTION_STATE_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}


@dataclass(frozen=True, slots=True)
class TopicResult:
    error: ErrorCode
    message: str | None = None
    spec: TopicSpec | None = None


class TopicManager:
    def __init__(
        self,
        *,
        settings: BrokerSettings,
        store: TopicStore,
        replicas: ReplicaManager,
        cluster: ClusterView,
    ) -> None:
        self.settings = settings
        self.store = store
        self.replicas = replicas
        self.cluster = cluster
        self.on_partitions_opened: list[Callable[[TopicSpec, range], None]] = []
        self.on_topic_deleted: list[Callable[[TopicSpec], None]] = []
        self._creating: dict[str, int] = {}  # topics whose partitions are being opened (create_async): their count
        # With a controller: every partition's state from the applied metadata image
        # (`control/image.py` keeps it), hosted here or not. None in local mode.
        self.image_states: dict[TopicPartition, PartitionState] | None = None

    # -- reading ------------------------------------------------------------------------

    def get(self, name: str) -> TopicSpec | None:
        return self.store.get(name)

    def topics(self) -> list[TopicSpec]:
        return sorted(self.store, key=lambda s: s.name)

    def log_config(self, spec: TopicSpec) -> LogConfig:
        return log_config(self.settings, spec.configs)

    def use_settings(self, settings: BrokerSettings) -> None:
        """New broker settings (dynamic broker configs): every open log gets its LogConfig again at once."""
        self.settings = settings
        for spec in self.topics():
            config = self.log_config(spec)
            for index in range(spec.partitions):
                self.replicas.update_config(TopicPartition(spec.name, index), config)

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        if self.image_states is not None:
            state = self.image_states.get(tp)
            return state if state is not None else PartitionState(leader=-1, leader_epoch=-1, replicas=(), isr=())
        partition = self.replicas.get(tp)
        if partition is not None:
            return partition.state
        me = self.cluster.broker_id
        return PartitionState(leader=me, leader_epoch=0, replicas=(me,), isr=(me,))

    # -- start ------------------------------------------------------------------------------

    def open_all(self) -> None:
        """Open every partition of every stored topic (broker start); one that cannot open is logged, not fatal."""
        for spec in self.topics():
            config = self.log_config(spec)
            for index in range(spec.partitions):
                try:
                    self._open_one(spec, index, config)
                except OSError:
                    log.exception("partition %s-%d could not be opened; it stays offline on this broker",
                                  spec.name, index)
            self._opened(spec, range(spec.partitions))

    def _led_here(self) -> PartitionState:
        """Local mode: this broker leads every partition, epoch 0, the only replica."""
        me = self.cluster.broker_id
        return PartitionState(leader=me, leader_epoch=0, replicas=(me,), isr=(me,))

    def _open_one(self, spec: TopicSpec, index: int, config: LogConfig) -> None:
        self.replicas.open_partition(TopicPartition(spec.name, index), config, self._led_here())

    def _opened(self, spec: TopicSpec, indexes: range) -> None:
        for listener in self.on_partitions_opened:
            listener(spec, indexes)

    def _open_new(self, spec: TopicSpec, indexes: range) -> TopicResult | None:
        """Open new partitions; on a failure close and delete those opened, and say why (None: all open)."""
        config = self.log_config(spec)
        done = []
        try:
            for index in indexes:
                self._open_one(spec, index, config)
                done.append(index)
        except OSError as exc:
            self._roll_back(spec, done)
            return self._open_failed(spec, indexes.start + len(done), exc)
        return None

    def _roll_back(self, spec: TopicSpec, opened: Iterable[int]) -> None:
        """Close and delete new partitions (one that never opened is a no-op)."""
        for index in opened:
            self.replicas.delete_partition(TopicPartition(spec.name, index))

    @staticmethod
    def _open_failed(spec: TopicSpec, index: int, exc: OSError) -> TopicResult:
        log.error("opening partition %s-%d failed (%s); the new partitions rolled back", spec.name, index, exc)
        return TopicResult(ErrorCode.unknown_server_error, f"partition {spec.name}-{index} could not be opened: {exc}")

    # -- limits -------------------------------------------------------------------------------

    def hosted_partitions(self) -> int:
        return sum(spec.partitions for spec in self.store) + sum(self._creating.values())

    def check_room(self, adding: int) -> TopicResult | None:
        """POLICY_VIOLATION (the controller's answer to its max.partitions) when `adding` more partitions
        would pass max.broker.partitions or what the open-file limit leaves for partitions."""
        total = self.hosted_partitions() + adding
        if total > self.settings.max_broker_partitions:
            return TopicResult(ErrorCode.policy_violation, f"this broker would host {total} partitions, more than "
                                                           f"max.broker.partitions={self.settings.max_broker_partitions}")
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY:
            connections = min(self.settings.max_connections, soft // 2)  # a low limit still leaves partitions some
            sealed = self.sealed_segments()
            room = (soft - connections - FD_RESERVE - sealed) // FDS_PER_PARTITION
            if total > room:
                return TopicResult(ErrorCode.policy_violation,
                                   f"this broker would host {total} partitions, more than its open-file limit allows "
                                   f"({room}: RLIMIT_NOFILE {soft} less {connections} for connections, "
                                   f"{sealed} for sealed segments and {FD_RESERVE} kept)")
        return None

    def sealed_segments(self) -> int:
        """Segments beyond each open partition's active one: each holds its log file open. A partition with
        a long retention adds one a segment.bytes; the limit must carry them (Kafka asks for a high ulimit)."""
        return sum(max(p.log.segment_count() - 1, 0) for p in self.replicas.partitions())

    # -- create -----------------------------------------------------------------------------

    def create(
        self,
        name: str,
        *,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        assignments: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
        internal_allowed: bool = False,
    ) -> TopicResult:
        refused = self._check_name(name, internal_allowed=internal_allowed)
        if refused is not None:
            return refused
        sized = self._size(num_partitions, replication_factor, assignments)
        if isinstance(sized, TopicResult):
            return sized
        num_partitions, replication_factor = sized
        refused = self._check_size(num_partitions, replication_factor) or self.check_room(num_partitions)
        if refused is not None:
            return refused
        try:
            overrides = validate(configs or {})
        except InvalidConfig as exc:
            return TopicResult(ErrorCode.invalid_config, str(exc))
        refused = self._check_registry(overrides)
        if refused is not None:
            return refused
        spec = TopicSpec(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=num_partitions,
            replication_factor=replication_factor,
            configs=overrides,
        )
        if validate_only:
            return TopicResult(ErrorCode.none, spec=spec)
        return self._created(spec, self._open_new(spec, range(num_partitions)))

    def _check_registry(self, overrides: Mapping[str, str]) -> TopicResult | None:
        """Schema-id validation needs this broker's confluent.schema.registry.url (else every produce is refused)."""
        on = [k for k in (VALUE_SCHEMA_VALIDATION, KEY_SCHEMA_VALIDATION) if overrides.get(k, "").lower() == "true"]
        if on and not self.settings.confluent_schema_registry_url:
            return TopicResult(ErrorCode.invalid_config,
                               f"{on[0]}=true needs confluent.schema.registry.url on the broker, which is not set")
        return None

    def _check_name(self, name: str, *, internal_allowed: bool) -> TopicResult | None:
        """Kafka's name rules, then a name not taken (also by a topic being created, or one that differs
        only in '.' vs '_', which collide in metric names); '__' names are the broker's own."""
        try:
            validate_topic_name(name)
        except InvalidTopicName as exc:
            return TopicResult(ErrorCode.invalid_topic_exception, str(exc))
        if name in self.store or name in self._creating:
            return TopicResult(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        if name.startswith("__") and not internal_allowed:
            return TopicResult(ErrorCode.invalid_request, f"{name!r}: names starting with '__' are reserved")
        other = self.store.colliding(name)
        if other is not None:
            return TopicResult(
                ErrorCode.invalid_topic_exception, f"topic {name!r} collides with existing topic {other!r} ('.' vs '_')"
            )
        return None

    def _size(
        self, num_partitions: int, replication_factor: int, assignments: Mapping[int, list[int]] | None
    ) -> tuple[int, int] | TopicResult:
        """(partitions, replication factor): from explicit assignments (checked), else as asked, with -1
        meaning the broker's num.partitions / default.replication.factor (KIP-464)."""
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                return TopicResult(
                    ErrorCode.invalid_request, "set either num_partitions/replication_factor or assignments, not both"
                )
            error = self._check_assignments(assignments, first_partition=0)
            if error is not None:
                return error
            num_partitions = len(assignments)
            replication_factor = len(next(iter(assignments.values())))
        if num_partitions == -1:
            num_partitions = self.settings.num_partitions
        if replication_factor == -1:
            replication_factor = self.settings.default_replication_factor
        return num_partitions, replication_factor

    def _check_size(self, num_partitions: int, replication_factor: int) -> TopicResult | None:
        """Positive counts, no more partitions than a topic may have here, no more replicas than brokers."""
        if num_partitions <= 0:
            return TopicResult(ErrorCode.invalid_partitions, f"number of partitions must be positive, got {num_partitions}")
        if num_partitions > MAX_PARTITIONS_PER_TOPIC:
            return TopicResult(
                ErrorCode.invalid_partitions,
                f"{num_partitions} partitions is more than this broker allows per topic ({MAX_PARTITIONS_PER_TOPIC})",
            )
        if replication_factor <= 0:
            return TopicResult(
                ErrorCode.invalid_replication_factor, f"replication factor must be positive, got {replication_factor}"
            )
        available = len(self.cluster.brokers())
        if replication_factor > available:
            return TopicResult(
                ErrorCode.invalid_replication_factor,
                f"replication factor {replication_factor} is larger than the {available} available broker(s)",
            )
        return None

    async def create_async(self, name: str, **kwargs: object) -> TopicResult:
        """`create`, with each partition's files made on a worker thread, OPEN_SLICE partitions at once, so
        the event loop serves other clients meanwhile (a new log is several fsyncs)."""
        planned = self.create(name, **{**kwargs, "validate_only": True})  # type: ignore[arg-type]
        spec = planned.spec
        if planned.error != ErrorCode.none or kwargs.get("validate_only") or spec is None:
            return planned
        self._creating[name] = spec.partitions  # counted by check_room; the name is taken meanwhile
        try:
            failed = await self._open_new_off_loop(spec)
        finally:
            del self._creating[name]
        return self._created(spec, failed)

    async def _open_new_off_loop(self, spec: TopicSpec) -> TopicResult | None:
        config, state = self.log_config(spec), self._led_here()
        for start in range(0, spec.partitions, OPEN_SLICE):
            indexes = range(start, min(start + OPEN_SLICE, spec.partitions))
            results = await asyncio.gather(
                *(self.replicas.open_partition_off_loop(TopicPartition(spec.name, i), config, state) for i in indexes),
                return_exceptions=True)
            errors = [(i, r) for i, r in zip(indexes, results, strict=True) if isinstance(r, BaseException)]
            if errors:
                self._roll_back(spec, range(indexes.stop))  # every partition this topic opened so far
                index, exc = errors[0]
                if not isinstance(exc, OSError):
                    raise exc
                return self._open_failed(spec, index, exc)
        return None

    def _created(self, spec: TopicSpec, failed: TopicResult | None) -> TopicResult:
        """Save a topic whose partitions are all open, and tell the listeners (or answer the failure)."""
        if failed is not None:
            return failed
        self.store.add(spec)
        self._opened(spec, range(spec.partitions))
        log.info("created topic %s (%d partitions, id %s)", spec.name, spec.partitions, spec.topic_id)
        return TopicResult(ErrorCode.none, spec=spec)

    def auto_create(self, name: str) -> TopicResult:
        """Metadata-triggered creation with the broker defaults (auto.create.topics.enable)."""
        if name == OFFSETS_TOPIC:
            return self.ensure_offsets_topic()
        if name == TRANSACTION_STATE_TOPIC:
            return self.ensure_transaction_state_topic()
        return self.create(name)

    def ensure_offsets_topic(self) -> TopicResult:
        spec = self.store.get(OFFSETS_TOPIC)
        if spec is not None:
            return TopicResult(ErrorCode.none, spec=spec)
        return self.create(
            OFFSETS_TOPIC,
            num_partitions=self.settings.offsets_topic_num_partitions,
            replication_factor=min(self.settings.offsets_topic_replication_factor, len(self.cluster.brokers())),
            configs=OFFSETS_TOPIC_CONFIG,
            internal_allowed=True,
        )

    def ensure_transaction_state_topic(self) -> TopicResult:
        spec = self.store.get(TRANSACTION_STATE_TOPIC)
        if spec is not None:
            return TopicResult(ErrorCode.none, spec=spec)
        return self.create(
            TRANSACTION_STATE_TOPIC,
            num_partitions=self.settings.transaction_state_log_num_partitions,
            replication_factor=min(self.settings.transaction_state_log_replication_factor, len(self.cluster.brokers())),
            configs=TRANSACTION_STATE_TOPIC_CONFIG,
            internal_allowed=True,
        )

    def _check_assignments(self, assignments: Mapping[int, list[int]], *, first_partition: int) -> TopicResult | None:
        expected = list(range(first_partition, first_partition + len(assignments)))
        if sorted(assignments) != expected:
            return TopicResult(ErrorCode.invalid_replica_assignment, f"partitions must be numbered {expected}")
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) != 1 or 0 in sizes:
            return TopicResult(ErrorCode.invalid_replica_assignment, "every partition needs the same number of replicas")
        for index, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                return TopicResult(ErrorCode.invalid_replica_assignment, f"partition {index} repeats a replica")
            unknown = [b for b in replicas if self.cluster.broker(b) is None]
            if unknown:
                return TopicResult(ErrorCode.invalid_replica_assignment, f"partition {index}: unknown broker(s) {unknown}")
            if self.cluster.broker_id not in replicas:
                return TopicResult(
                    ErrorCode.invalid_replica_assignment, f"partition {index}: only broker {self.cluster.broker_id} exists"
                )
        return None

    # -- grow ---------------------------------------------------------------------------------

    def create_partitions(
        self, name: str, count: int, *, assignments: list[list[int]] | None = None, validate_only: bool = False
    ) -> TopicResult:
        spec = self.store.get(name)
        if spec is None:
            return TopicResult(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if spec.internal:
            # Group ids map to __consumer_offsets partitions by hash modulo the count.
            return TopicResult(ErrorCode.invalid_request, f"{name!r} is internal; its partition count is fixed")
        if count < spec.partitions:
            return TopicResult(
                ErrorCode.invalid_partitions, f"topic {name!r} has {spec.partitions} partitions; cannot shrink to {count}"
            )
        if count == spec.partitions:
            return TopicResult(ErrorCode.invalid_partitions, f"topic {name!r} already has {count} partitions")
        if count > MAX_PARTITIONS_PER_TOPIC:
            return TopicResult(ErrorCode.invalid_partitions, f"{count} partitions is more than {MAX_PARTITIONS_PER_TOPIC}")
        if assignments is not None:
            if len(assignments) != count - spec.partitions:
                return TopicResult(
                    ErrorCode.invalid_replica_assignment,
                    f"{len(assignments)} assignments for {count - spec.partitions} new partitions",
                )
            error = self._check_assignments(
                {spec.partitions + i: list(r) for i, r in enumerate(assignments)}, first_partition=spec.partitions
            )
            if error is not None:
                return error
        room = self.check_room(count - spec.partitions)
        if room is not None:
            return room
        if validate_only:
            return TopicResult(ErrorCode.none, spec=spec)
        old = spec.partitions
        failed = self._open_new(spec, range(old, count))
        if failed is not None:
            return failed
        spec = self.store.update(name, partitions=count)
        self._opened(spec, range(old, count))
        log.info("topic %s grew from %d to %d partitions", name, old, count)
        return TopicResult(ErrorCode.none, spec=spec)

    # -- configure ----------------------------------------------------------------------------

    def set_configs(self, name: str, overrides: Mapping[str, str], *, validate_only: bool = False) -> TopicResult:
        """Replace the topic's overrides with `overrides` and apply them to its open logs."""
        spec = self.store.get(name)
        if spec is None:
            return TopicResult(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        try:
            clean = validate(overrides)
        except InvalidConfig as exc:
            return TopicResult(ErrorCode.invalid_config, str(exc))
        refused = self._check_registry(clean)
        if refused is not None:
            return refused
        if validate_only:
            return TopicResult(ErrorCode.none, spec=spec)
        spec = self.store.update(name, configs=clean)
        config = self.log_config(spec)
        for index in range(spec.partitions):
            self.replicas.update_config(TopicPartition(name, index), config)
        log.info("topic %s configs now %s", name, dict(clean))
        return TopicResult(ErrorCode.none, spec=spec)

    # -- delete -------------------------------------------------------------------------------

    def delete(self, name: str) -> TopicResult:
        spec = self.store.get(name)
        if spec is None:
            return TopicResult(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if not self.settings.delete_topic_enable:
            return TopicResult(ErrorCode.topic_deletion_disabled, "delete.topic.enable is false")
        if spec.internal:
            return TopicResult(ErrorCode.invalid_topic_exception, f"{name!r} is an internal topic")
        self.store.remove(name)
        for index in range(spec.partitions):
            self.replicas.delete_partition(TopicPartition(name, index))
        for listener in self.on_topic_deleted:
            listener(spec)
        log.info("deleted topic %s", name)
        return TopicResult(ErrorCode.none, spec=spec)
