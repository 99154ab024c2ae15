"""The partitions this broker hosts, and the produce and fetch paths over them.

- `append`: one batch per partition from a Produce request, appended in
  request order with no await in between (so requests pipelined on one
  connection land in order); acks=all then waits in the purgatory until the
  high watermark passes each batch or the request's timeout ends
  (REQUEST_TIMED_OUT).
- `fetch`: reads whole stored batches (never decoded) partition by partition
  under the response's and each partition's byte limits, at least one whole
  batch for the first partition with data even past the limits (KIP-74). If
  fewer than min_bytes are ready the request waits in the purgatory until
  min_bytes or max_wait (Kafka's DelayedFetch). Each waiter is woken only by
  what can satisfy it: a follower reads to the log end, so its fetch waits in
  `follower_purgatory` for appends; a consumer reads to the HW, so its fetch
  waits in `purgatory` for HW moves; an acks=all produce waits in
  `acks_waiters` for the HW move that passes its own batch (Kafka's
  DelayedProduce); a change of leadership or state wakes them all
  (`notify_changed`). Consumers read from the leader, or (`leader_only=False`:
  Fetch v11+, KIP-392) from a follower, up to the high watermark it knows:
  an offset between that HW and its log end reads nothing yet, one past its
  log end is OFFSET_OUT_OF_RANGE (Kafka's LocalLog.read). A fetch from a
  follower records the follower's position, which may move the high
  watermark and release waiting acks=all produces, and is served within the
  leader's replication throttle (`throttle`, KIP-73).
- Producer state (`idempotence`) is restored when a partition opens, from the
  snapshot next to its log plus a replay of batch headers after it, and
  snapshotted again by `write_snapshots` (periodically and at shutdown).
- Transactions: `append_markers` writes the coordinator's COMMIT/ABORT
  markers as leader; a read_committed `fetch` stops at each partition's last
  stable offset and carries the aborted transactions of the range read.
- Maintenance passes: retention (never past the high watermark), time-based
  roll, flush.ms (the log applies flush.messages itself on append), producer
  expiry, compaction. The file-backed log serialises its writers, so these
  may run in a worker thread (see `maintenance`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tinystream.atomic_file import write_atomically
from tinystream.broker.errors import ErrorCode, code_for_log_error
from tinystream.broker.replication.hw_checkpoint import HighWatermarkCheckpoint
from tinystream.broker.replication.idempotence import ProducerStateTable
from tinystream.broker.replication.partition import AppendOutcome, Partition, PartitionState
from tinystream.broker.replication.purgatory import OffsetWaiters, Purgatory
from tinystream.broker.replication.throttle import ReplicationQuota, ReplicationThrottles
from tinystream.broker.storage.base import LogConfig, LogError, OffsetOutOfRangeError, PartitionLog, ReadResult
from tinystream.broker.storage.file_range import FileRange
from tinystream.broker.storage.log_manager import LogManager
from tinystream.broker.storage.log_scan import scan_batches
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.storage.txn_index import FILE_NAME as TXN_INDEX_FILE
from tinystream.broker.storage.txn_index import AbortedTxn, TxnIndex

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class FetchPartition:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # a follower's, as its Fetch says (-1: a consumer's, or not said)


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    tp: TopicPartition
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview | FileRange | None = None  # a FileRange only for a fetch that asked (as_ranges)
    aborted: tuple[AbortedTxn, ...] | None = None  # read_committed only: aborted transactions in the range read
    from_follower: bool = False  # read from this broker as a follower of the partition (KIP-392)

    @property
    def size(self) -> int:
        return len(self.records) if self.records is not None else 0


def close_ranges(results: list[FetchedPartition]) -> None:
    """Close the file ranges of results that will not be sent."""
    for r in results:
        if isinstance(r.records, FileRange):
            r.records.close()


class ReplicaManager:
    def __init__(
        self,
        *,
        broker_id: int,
        log_manager: LogManager,
        clock: Callable[[], int] = wall_clock_ms,
        purgatory: Purgatory | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.logs = log_manager
        self.clock = clock
        self.purgatory = purgatory or Purgatory()  # consumers' fetches: HW moves
        self.follower_purgatory = Purgatory()  # followers' fetches: records appended
        self.acks_waiters = OffsetWaiters()  # acks=all produces: the HW passing their batch
        self._partitions: dict[TopicPartition, Partition] = {}
        self._snapshotted: dict[TopicPartition, tuple[int, int]] = {}  # (table changes, log end) last written
        # Replicated mode only (`use_hw_checkpoint`): HWs read at start, applied as partitions open.
        self._hw_checkpoint: HighWatermarkCheckpoint | None = None
        self._checkpointed_hws: dict[TopicPartition, int] = {}
        self.throttles: ReplicationThrottles | None = None  # KIP-73; set by the broker's assembly
        # Consumer fetches that read a partition this broker follows (KIP-392); read by /metrics.
        self.follower_fetches = 0

    # -- partitions ---------------------------------------------------------------------

    def get(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def __len__(self) -> int:
        return len(self._partitions)

    def use_hw_checkpoint(self, checkpoint: HighWatermarkCheckpoint) -> None:
        """Replicated mode: restore HWs from `checkpoint` as partitions open, write it on close."""
        self._hw_checkpoint = checkpoint
        self._checkpointed_hws = checkpoint.read()

    def write_hw_checkpoint(self) -> None:
        if self._hw_checkpoint is None:
            return
        hws = {p.tp: p.high_watermark for p in self._partitions.values()}
        try:
            self._hw_checkpoint.write(hws)
        except OSError:
            log.exception("writing the high-watermark checkpoint failed")

    def open_partition(self, tp: TopicPartition, config: LogConfig, state: PartitionState) -> Partition:
        """Open (or create) the partition's log and restore its producer state."""
        existing = self._partitions.get(tp)
        now = self.clock()
        if existing is not None:
            existing.update_state(state, now_ms=now)
            self.notify_changed(tp)  # acks=all waiters re-check leadership
            return existing
        return self._register(tp, self.logs.open(tp, config, now), state, now)

    async def open_partition_off_loop(self, tp: TopicPartition, config: LogConfig, state: PartitionState) -> Partition:
        """`open_partition` with the log's files made on a worker thread: a new log is several fsyncs,
        which on a busy disk stall the event loop for seconds (measured: 1.6 s for one partition)."""
        if tp in self._partitions:
            return self.open_partition(tp, config, state)
        directory = self.logs.partition_dir(tp)  # chosen here: the log manager's bookkeeping stays on the loop
        try:
            partition_log = await asyncio.to_thread(self.logs.open_in, directory, config, self.clock())
        except BaseException:
            self.logs.forget_unopened(tp)  # what the failed open made is removed
            raise
        if tp in self._partitions:  # opened meanwhile by another caller: keep theirs
            partition_log.close()
            return self.open_partition(tp, config, state)
        return self._register(tp, partition_log, state, self.clock())

    def _register(self, tp: TopicPartition, partition_log: PartitionLog, state: PartitionState, now: int) -> Partition:
        directory = self.logs.partition_dir(tp)
        txn_index = TxnIndex(directory / TXN_INDEX_FILE if directory is not None else None)
        partition = Partition(tp, partition_log, broker_id=self.broker_id, state=state, txn_index=txn_index)
        hw = self._checkpointed_hws.pop(tp, None)
        if hw is not None:
            partition.restore_high_watermark(hw)
        self._restore_producers(partition, now)
        self._partitions[tp] = partition
        return partition

    # -- follower side ------------------------------------------------------------------

    def append_replicated(self, tp: TopicPartition, records: bytes | memoryview, leader_hw: int) -> int:
        """A follower copies the leader's batches (offsets and epochs kept) and takes its HW.

        Producer state follows the copied batch headers, so this replica can
        deduplicate idempotent retries once it leads.
        """
        partition = self._partitions[tp]
        before, hw = partition.log_end_offset, partition.high_watermark
        view = records if isinstance(records, memoryview) else memoryview(records)
        if len(view):
            partition.append_as_follower(view, leader_hw)
            if partition.log_end_offset > before:
                self._replay(partition, before, self.clock())
        else:
            partition.follow_high_watermark(leader_hw)
        if partition.high_watermark != hw:
            self.purgatory.notify(tp)  # consumers long-polling this follower (KIP-392) read up to its HW
        return partition.log_end_offset

    def truncate(self, tp: TopicPartition, offset: int) -> None:
        """Drop the log from `offset` (follower divergence, KIP-101) and rebuild producer state."""
        partition = self._partitions[tp]
        if offset >= partition.log_end_offset:
            return
        log.info("%s: truncating from %d to %d", tp, partition.log_end_offset, offset)
        partition.log.truncate_to(offset)
        partition.after_log_truncation()
        self._snapshotted.pop(tp, None)
        self._restore_producers(partition, self.clock())

    def delete_partition(self, tp: TopicPartition) -> None:
        partition = self._partitions.pop(tp, None)
        self._snapshotted.pop(tp, None)
        if partition is not None:
            self.logs.delete(tp, partition.log)
            self.notify_changed(tp)

    def update_config(self, tp: TopicPartition, config: LogConfig) -> None:
        partition = self._partitions.get(tp)
        if partition is not None:
            partition.log.update_config(config)

    def close(self) -> None:
        """Snapshot producer state and HWs, flush and close every log."""
        self.write_snapshots()
        self.write_hw_checkpoint()
        for partition in self._partitions.values():
            try:
                partition.log.close()
            except Exception:  # one bad disk must not stop the others from closing
                log.exception("closing the log of %s failed", partition.tp)
        self._partitions.clear()
        self.purgatory.notify_all()
        self.follower_purgatory.notify_all()
        self.acks_waiters.notify_all()

    # -- produce ------------------------------------------------------------------------

    def append(
        self, batches: Iterable[tuple[TopicPartition, memoryview, tuple]], *, required_acks: int
    ) -> dict[TopicPartition, AppendOutcome]:
        """Append each (tp, batch, its BatchHeader); synchronous, so pipelined requests keep their order."""
        now = self.clock()
        out: dict[TopicPartition, AppendOutcome] = {}
        for tp, batch, header in batches:
            partition = self._partitions.get(tp)
            if partition is None:
                out[tp] = AppendOutcome(ErrorCode.unknown_topic_or_partition)
                continue
            outcome = partition.append_as_leader(batch, header, required_acks=required_acks, now_ms=now)
            out[tp] = outcome
            self._appended(partition, outcome)
        return out

    def append_markers(
        self, markers: Iterable[tuple[TopicPartition, int, int, bool, int]]
    ) -> dict[TopicPartition, AppendOutcome]:
        """WriteTxnMarkers as leader: each (tp, producer id, epoch, commit, coordinator epoch) gets a marker."""
        now = self.clock()
        out: dict[TopicPartition, AppendOutcome] = {}
        for tp, producer_id, epoch, commit, coordinator_epoch in markers:
            partition = self._partitions.get(tp)
            if partition is None:
                out[tp] = AppendOutcome(ErrorCode.unknown_topic_or_partition)
                continue
            outcome = partition.append_marker(
                producer_id=producer_id, producer_epoch=epoch, commit=commit,
                coordinator_epoch=coordinator_epoch, now_ms=now,
            )
            out[tp] = outcome
            self._appended(partition, outcome)
        return out

    def _appended(self, partition: Partition, outcome: AppendOutcome) -> None:
        """Wake the followers' fetches for new records; consumers and acks=all only when the HW moved too
        (an ISR of the leader alone)."""
        if outcome.appended_bytes:
            self.follower_purgatory.notify(partition.tp)
        if outcome.hw_moved:
            self._hw_moved(partition)

    def _hw_moved(self, partition: Partition) -> None:
        """Wake the consumers' fetches, and the acks=all produces whose batch the HW now passes."""
        self.purgatory.notify(partition.tp)
        self.acks_waiters.advanced(partition.tp, partition.high_watermark)

    def settle_isr_change(self, partition: Partition) -> None:
        """No ISR change is in flight for `partition` any more; its waiters are woken if that moved the HW."""
        if partition.isr_change_settled():
            self.notify_changed(partition.tp)

    def notify_changed(self, tp: TopicPartition) -> None:
        """Leadership, state or ISR changed, or the partition went: every waiter on it re-checks."""
        self.purgatory.notify(tp)
        self.follower_purgatory.notify(tp)
        self.acks_waiters.notify(tp)

    async def wait_replicated(self, outcomes: dict[TopicPartition, AppendOutcome], timeout_ms: int) -> dict[
        TopicPartition, AppendOutcome
    ]:
        """acks=all: wait until the HW passes every appended batch, up to timeout_ms."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        while True:
            lost = [
                tp for tp, o in outcomes.items()
                if o.error == ErrorCode.none and ((p := self._partitions.get(tp)) is None or not p.is_leader)
            ]
            if lost:  # leadership moved while waiting: the batch may be truncated away (Kafka answers the same)
                outcomes = {
                    tp: AppendOutcome(ErrorCode.not_leader_or_follower, message="leadership moved") if tp in lost else o
                    for tp, o in outcomes.items()
                }
            waiting = [
                tp for tp, o in outcomes.items()
                if o.error == ErrorCode.none and (p := self._partitions.get(tp)) is not None
                and p.high_watermark <= o.last_offset
            ]
            if not waiting:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {
                    tp: AppendOutcome(ErrorCode.request_timed_out, message="acks=all timed out") if tp in waiting else o
                    for tp, o in outcomes.items()
                }
            # One partition at a time: all must pass (or fail) before the answer, so waiting on the first
            # that has not is as quick as waiting on all, and only that one's HW moves wake this request.
            await self.acks_waiters.wait(waiting[0], outcomes[waiting[0]].last_offset, remaining)
        return outcomes

    # -- fetch --------------------------------------------------------------------------

    async def fetch(
        self,
        requests: list[FetchPartition],
        *,
        replica_id: int,
        min_bytes: int,
        max_bytes: int,
        max_wait_ms: int,
        read_committed: bool = False,
        as_ranges: bool = False,
        leader_only: bool = True,
        later: Callable[[], list[FetchPartition]] | None = None,
        later_keys: Sequence[TopicPartition] = (),
    ) -> list[FetchedPartition]:
        """Read; wait for min_bytes up to max_wait_ms (replica_id >= 0: an authorised follower;
        read_committed: up to the last stable offset, with the aborted transactions read; as_ranges:
        records from segment files as FileRanges, which the caller closes; leader_only=False: a
        consumer that may read from a follower, Fetch v11+). `later_keys`: partitions known to have
        nothing now (a session's idle ones, handlers/fetch_idle.py): a wait also waits on them, and
        `later()` makes their requests, read with the rest after a wake-up."""
        deadline = time.monotonic() + max(max_wait_ms, 0) / 1000.0
        for_replica = replica_id >= 0
        quota = self.throttles.leader if for_replica and self.throttles is not None else None
        held: frozenset[TopicPartition] = frozenset()
        if for_replica:
            self._record_follower(requests, replica_id)
            if quota is not None:
                held = self._held_back(requests, replica_id, quota)
        keys = [r.tp for r in requests]
        keys.extend(later_keys)
        while True:
            results = self._read_all(requests, for_replica=for_replica, max_bytes=max_bytes,
                                     read_committed=read_committed and not for_replica, as_ranges=as_ranges,
                                     held=held, leader_only=leader_only or for_replica)
            ready = sum(r.size for r in results)
            errors = any(r.error != ErrorCode.none for r in results)
            remaining = deadline - time.monotonic()
            if max_wait_ms <= 0 or not keys or ready >= min_bytes or errors or remaining <= 0:
                if quota is not None:  # KafkaApis: the leader quota records the throttled partitions' bytes
                    quota.record(sum(r.size for r in results if r.size and quota.throttled(r.tp)), self.clock())
                if not leader_only and not for_replica and any(r.from_follower for r in results):
                    self.follower_fetches += 1
                return results
            close_ranges(results)  # read again after the wait
            await (self.follower_purgatory if for_replica else self.purgatory).wait(keys, remaining)
            if later is not None:  # woken: the idle partitions may have news now
                requests, later = requests + later(), None
                if quota is not None:
                    held = self._held_back(requests, replica_id, quota)

    def _record_follower(self, requests: list[FetchPartition], replica_id: int) -> None:
        self.record_follower(replica_id, ((r.tp, r.fetch_offset, r.log_start_offset) for r in requests))

    def record_follower(self, replica_id: int, positions: Iterable[tuple[TopicPartition, int, int]]) -> None:
        """A follower fetched these partitions from (fetch offset, its log start offset): its position, and so
        its caught-up time and the HW, on each this broker leads. `fetch` records the partitions it reads;
        a fetch session's idle partitions, which it does not read, come here from the handler."""
        now = self.clock()
        for tp, fetch_offset, log_start_offset in positions:
            partition = self._partitions.get(tp)
            if partition is not None and partition.is_leader and replica_id in partition.state.replicas:
                if partition.record_follower_fetch(replica_id, fetch_offset, now, log_start_offset):
                    self._hw_moved(partition)

    def _held_back(self, requests: list[FetchPartition], replica_id: int,
                   quota: ReplicationQuota) -> frozenset[TopicPartition]:
        """The partitions this follower gets no records for now (Kafka's shouldLeaderThrottle)."""
        now = self.clock()
        held = []
        for r in requests:
            partition = self._partitions.get(r.tp)
            if partition is not None and partition.is_leader and quota.should_throttle(
                    r.tp, in_sync=replica_id in partition.state.isr, now_ms=now):
                held.append(r.tp)
        return frozenset(held)

    def _read_all(
        self, requests: list[FetchPartition], *, for_replica: bool, max_bytes: int, read_committed: bool = False,
        as_ranges: bool = False, held: frozenset[TopicPartition] = frozenset(), leader_only: bool = True,
    ) -> list[FetchedPartition]:
        remaining = max(max_bytes, 0)
        min_one = True  # KIP-74: the first partition with data returns a whole batch regardless
        out = []
        for r in requests:
            if r.tp in held:  # throttled: its epoch and high watermark, no records
                out.append(self._read_one(r, for_replica=for_replica, limit=0, min_one=False))
                continue
            fetched = self._read_one(r, for_replica=for_replica, limit=min(r.max_bytes, remaining), min_one=min_one,
                                     read_committed=read_committed, as_range=as_ranges, leader_only=leader_only)
            if fetched.size:
                min_one = False
                remaining = max(remaining - fetched.size, 0)
            out.append(fetched)
        return out

    def _read_one(
        self, r: FetchPartition, *, for_replica: bool, limit: int, min_one: bool, read_committed: bool = False,
        as_range: bool = False, leader_only: bool = True,
    ) -> FetchedPartition:
        partition = self._partitions.get(r.tp)
        if partition is None:
            return FetchedPartition(r.tp, ErrorCode.unknown_topic_or_partition)
        following = not partition.is_leader
        if leader_only and following:  # followers, and consumers before Fetch v11 (KAFKA-9004)
            return FetchedPartition(r.tp, ErrorCode.not_leader_or_follower)
        epoch_error = partition.check_leader_epoch(r.current_leader_epoch)
        hw = partition.high_watermark
        lso = partition.last_stable_offset
        no_aborts = () if read_committed else None
        if epoch_error != ErrorCode.none:
            return FetchedPartition(r.tp, epoch_error, hw, lso, partition.log_start_offset)
        if limit <= 0 and not min_one:
            return FetchedPartition(r.tp, ErrorCode.none, hw, lso, partition.log_start_offset, b"", no_aborts)
        end = partition.log_end_offset if for_replica else lso if read_committed else hw
        if r.fetch_offset == end and partition.log_start_offset <= end:
            # Caught up: nothing to read. The common case of a fetch session's idle partitions; skipping the
            # segment and index lookups halves an idle 1000-partition fetch (`tinystream bench fetch-sessions`).
            return FetchedPartition(r.tp, ErrorCode.none, hw, lso, partition.log_start_offset, b"", no_aborts,
                                    following)
        try:
            result: ReadResult = partition.read(
                r.fetch_offset, max(limit, 0), for_replica=for_replica, min_one=min_one, read_committed=read_committed,
                as_range=as_range,
            )
        except OffsetOutOfRangeError:
            return FetchedPartition(r.tp, ErrorCode.offset_out_of_range, hw, lso, partition.log_start_offset)
        except LogError as exc:
            return FetchedPartition(r.tp, code_for_log_error(exc), hw, lso, partition.log_start_offset)
        except OSError:
            log.exception("reading %s failed", r.tp)
            return FetchedPartition(r.tp, ErrorCode.kafka_storage_error, hw, lso, partition.log_start_offset)
        aborted = no_aborts
        if read_committed and len(result.data):
            aborted = tuple(partition.aborted_transactions(r.fetch_offset, result.next_offset))
        return FetchedPartition(r.tp, ErrorCode.none, hw, lso, result.log_start_offset, result.data, aborted,
                                following)

    # -- producer state -------------------------------------------------------------------

    def _restore_producers(self, partition: Partition, now: int) -> None:
        path = self.logs.snapshot_path(partition.tp)
        start = partition.log_start_offset
        table = ProducerStateTable()
        if path is not None and path.exists():
            try:
                restored, end = ProducerStateTable.restore(path.read_bytes())
                if start <= end <= partition.log_end_offset:
                    table, start = restored, end
            except (OSError, ValueError) as exc:
                log.warning("ignoring producer snapshot of %s: %s", partition.tp, exc)
        partition.producers = table
        current = start == partition.log_end_offset and path is not None and path.exists()
        replayed = self._replay(partition, start, now)
        if replayed:
            log.info("%s: rebuilt producer state from %d batches after offset %d", partition.tp, replayed, start)
        if current:  # the snapshot on disk already says all there is
            self._snapshotted[partition.tp] = (table.changes, partition.log_end_offset)

    @staticmethod
    def _replay(partition: Partition, offset: int, now: int) -> int:
        """Feed stored batches from `offset` to the log end into producer and transaction state."""
        seen = 0
        for header, batch in scan_batches(partition.log, offset):
            partition.observe(header, batch, now)
            seen += 1
        return seen

    def write_snapshots(self) -> int:
        """Snapshot the producer state of partitions that changed since their last snapshot.

        Not fsynced: a snapshot lost in a crash only makes the next start
        replay more batch headers (see `idempotence`).
        """
        written = 0
        for partition in list(self._partitions.values()):
            mark = (partition.producers.changes, partition.log_end_offset)
            if self._snapshotted.get(partition.tp) == mark:
                continue
            path = self.logs.snapshot_path(partition.tp)
            if path is None or not path.parent.exists():
                continue
            try:
                write_atomically(path, partition.producers.snapshot(partition.log_end_offset), durable=False, parents=True)
            except OSError:
                log.exception("writing the producer snapshot of %s failed", partition.tp)
                continue
            self._snapshotted[partition.tp] = mark
            written += 1
        return written

    # -- maintenance ----------------------------------------------------------------------

    def enforce_retention(self) -> int:
        now = self.clock()
        deleted = 0
        for partition in self.partitions():
            try:
                deleted += partition.enforce_retention(now)
            except (LogError, OSError):
                log.exception("retention on %s failed", partition.tp)
        return deleted

    def roll_segments(self) -> int:
        now = self.clock()
        rolled = 0
        for partition in self.partitions():
            try:
                rolled += bool(partition.log.maybe_roll(now))
            except (LogError, OSError):
                log.exception("rolling %s failed", partition.tp)
        return rolled

    def flush_due(self) -> int:
        """flush.ms: fsync logs whose last flush is older than it (flush.messages is the log's own)."""
        now = self.clock()
        flushed = 0
        for partition in self.partitions():
            maybe_flush = getattr(partition.log, "maybe_flush", None)
            if maybe_flush is None:
                continue
            try:
                flushed += bool(maybe_flush(now))
            except (LogError, OSError):
                log.exception("flushing %s failed", partition.tp)
        return flushed

    def expire_producers(self) -> int:
        now = self.clock()
        return sum(p.producers.expire(now) for p in self.partitions())

    def compact(self) -> int:
        now = self.clock()
        cleaned = 0
        for partition in self.partitions():
            try:
                aborted = [(a.producer_id, a.first_offset, a.last_offset) for a in partition.txn_index.entries()]
                cleaned += self.logs.clean(partition.log, now, max_offset=partition.last_stable_offset,
                                           aborted=aborted)
            except (LogError, OSError):
                log.exception("compacting %s failed", partition.tp)
        return cleaned
