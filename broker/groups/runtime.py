"""CoordinatorRuntime: which __consumer_offsets partitions are coordinated here, and the appends to them.

The asyncio part both managers share (Kafka's new group coordinator has a CoordinatorRuntime in
the same place): the load state of each partition (loading or loaded), the check every request
starts with (`status`, Kafka's validateGroupStatus), and the appends. Every append starts a task
at once, so appends reach the OffsetsTopic in the order the state machines produced them (a
delete's tombstones never overtake an earlier commit of the same group); `stop` drains them.

A load is identified by a token: an unload (or a reload) while the partition is being read
makes the older load's token stale, and that load then installs nothing.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.errors import append_failure_code
from tinystream.broker.groups.persistence import OffsetsTopic, Record

__all__ = ["CoordinatorRuntime", "PartitionLoad", "partition_for_group"]

log = logging.getLogger(__name__)

_OK = ErrorCode.none


def _java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition of a group: Kafka's
    Utils.abs(groupId.hashCode) % offsets.topic.num.partitions, where
    Utils.abs(Integer.MIN_VALUE) is 0."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = _java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


class PartitionLoad(enum.Enum):
    LOADING = "loading"
    LOADED = "loaded"


class CoordinatorRuntime:
    """Partition ownership, the request gate and ordered appends of one group coordinator."""

    def __init__(self, *, offsets_topic: OffsetsTopic, num_partitions: int, clock: Callable[[], int]) -> None:
        if num_partitions < 1:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        self.offsets_topic = offsets_topic
        self.num_partitions = num_partitions
        self.clock = clock
        self.active = False
        self._partitions: dict[int, PartitionLoad] = {}
        self._load_tokens: dict[int, int] = {}
        self._tokens = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()

    # ----------------------------------------------------------------- partitions

    def check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition {partition} is not in [0, {self.num_partitions})")

    def partition(self, group_id: str) -> int:
        return partition_for_group(group_id, self.num_partitions)

    def status(self, group_id: str, *, allow_empty_id: bool) -> ErrorCode:
        """Kafka validateGroupStatus: id, coordinator active, loading, ours."""
        if not group_id and not allow_empty_id:
            return ErrorCode.invalid_group_id
        if not self.active:
            return ErrorCode.coordinator_not_available
        status = self._partitions.get(self.partition(group_id))
        if status is None:
            return ErrorCode.not_coordinator
        if status is PartitionLoad.LOADING:
            return ErrorCode.coordinator_load_in_progress
        return _OK

    def is_loaded(self, partition: int) -> bool:
        return self._partitions.get(partition) is PartitionLoad.LOADED

    def is_loading(self, partition: int) -> bool:
        return self._partitions.get(partition) is PartitionLoad.LOADING

    def loading_partitions(self) -> frozenset[int]:
        return frozenset(p for p, s in self._partitions.items() if s is PartitionLoad.LOADING)

    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._partitions)

    def partitions(self) -> list[int]:
        """Loaded or loading partitions in the order their loads began (`stop` unloads in this order)."""
        return list(self._partitions)

    def begin_load(self, partition: int) -> int | None:
        """Mark `partition` loading and return the load's token; None if it is loaded or loading already."""
        if partition in self._partitions:
            return None
        token = next(self._tokens)
        self._partitions[partition] = PartitionLoad.LOADING
        self._load_tokens[partition] = token
        return token

    def load_current(self, partition: int, token: int) -> bool:
        """Is this load still the partition's? (False once it was unloaded or reloaded meanwhile.)"""
        return self._load_tokens.get(partition) == token

    def abandon_load(self, partition: int, token: int) -> None:
        """A load that failed: the partition is dropped (NOT_COORDINATOR) unless a newer load owns it."""
        if self.load_current(partition, token):
            del self._partitions[partition]
            del self._load_tokens[partition]

    def finish_load(self, partition: int) -> None:
        self._partitions[partition] = PartitionLoad.LOADED

    def forget(self, partition: int) -> None:
        self._partitions.pop(partition, None)
        self._load_tokens.pop(partition, None)

    # ----------------------------------------------------------------- appends

    def append(self, partition: int, records: list[Record]) -> asyncio.Task[ErrorCode]:
        """Start the append now (appends reach the topic in call order); the task
        yields the partition-level error code (NONE on success)."""

        async def run() -> ErrorCode:
            try:
                await self.offsets_topic.append(partition, records)
            except Exception as exc:  # translated at the boundary, never raised to a request
                return self._failed(exc, partition, "append failed")
            return _OK

        return self.spawn(run())

    def append_transactional(
        self, partition: int, records: list[Record], *, producer_id: int, producer_epoch: int
    ) -> asyncio.Task[ErrorCode]:
        """As `append`, inside the producer's transaction (TxnOffsetCommit)."""

        async def run() -> ErrorCode:
            try:
                await self.offsets_topic.append(partition, records, producer_id=producer_id,
                                                producer_epoch=producer_epoch)
            except Exception as exc:
                return self._failed(exc, partition, "transactional append failed")
            return _OK

        return self.spawn(run())

    @staticmethod
    def _failed(exc: Exception, partition: int, what: str) -> ErrorCode:
        """The code a request gets; only an unexpected failure (a bug) is logged with its traceback."""
        code = append_failure_code(exc)
        if code is ErrorCode.unknown_server_error:
            log.exception("__consumer_offsets-%d: " + what, partition)
        return code

    @staticmethod
    async def await_append(task: asyncio.Task[ErrorCode]) -> ErrorCode:
        """Await an append on behalf of a request. The append itself survives the
        request being cancelled (client gone); if `stop` cancelled the append,
        the request gets NOT_COORDINATOR."""
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and (current is None or not current.cancelling()):
                return ErrorCode.not_coordinator
            raise

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self, timeout_s: float) -> None:
        """Give in-flight appends `timeout_s`, then cancel what is left."""
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=timeout_s)
            for task in still:
                task.cancel()
            if still:
                await asyncio.gather(*still, return_exceptions=True)
