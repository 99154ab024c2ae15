"""One partition replica on this broker: its log, role, leader epoch and high watermark.

A Partition is a leader or a follower (Kafka's Partition.scala, reduced):

- The leader appends client batches (`append_as_leader`): it checks the
  producer's sequence first (`idempotence`), lets the log validate and assign
  offsets, and moves the high watermark (HW) to the smallest log end offset
  among the in-sync replicas it knows. With itself the only ISR member the HW
  is its log end offset right after the append.
- Followers' fetch offsets (`record_follower_fetch`) are their log end offsets;
  each one may move the HW.
- A follower refuses client produce with NOT_LEADER_OR_FOLLOWER and copies
  the leader's batches with `append_as_follower`, taking the leader's HW
  (capped at its own log end); consumers may read it below that HW (KIP-392,
  see `replica_manager`).
- Requests that name a leader epoch are checked against ours
  (`check_leader_epoch`, KIP-320): older is FENCED_LEADER_EPOCH, newer
  UNKNOWN_LEADER_EPOCH.

Transactions (KIP-98): transactional batches open a producer's transaction
in this partition (`producers.ongoing`); a COMMIT/ABORT marker written by
`append_marker` (leader, on the coordinator's WriteTxnMarkers) or copied by
a follower closes it (`observe`). The last stable offset (LSO) is the first
offset of the earliest transaction not yet decided *and replicated*, else the
HW: read_committed fetches stop there. Aborted transactions go to the
partition's `TxnIndex`, which answers a fetch's `aborted_transactions`.

No asyncio here: callers get a result that says whether the HW moved, and
wake whoever waits (the purgatory) themselves. Time comes in as `now_ms`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from tinystream.broker.errors import ErrorCode, code_for_log_error
from tinystream.broker.replication.idempotence import SEQUENCE_MODULUS, ProducerStateTable, Verdict
from tinystream.broker.storage.base import AppendResult, LogError, PartitionLog, ReadResult
from tinystream.broker.storage.batch import (
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    check_batch,
    count_records,
    read_header,
)
from tinystream.broker.storage.control_records import ControlType, build_marker, control_type
from tinystream.broker.storage.file_range import FileRange
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.storage.txn_index import AbortedTxn, TxnIndex


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What the controller (or the local topic store) says about a partition."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    error: ErrorCode
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    hw_moved: bool = False
    appended_bytes: int = 0
    record_errors: tuple[tuple[int, str], ...] = ()  # (index in the batch, why): Produce v8+ record_errors


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        log: PartitionLog,
        *,
        broker_id: int,
        state: PartitionState,
        producers: ProducerStateTable | None = None,
        txn_index: TxnIndex | None = None,
    ) -> None:
        self.tp = tp
        self.log = log
        self.broker_id = broker_id
        self.producers = producers if producers is not None else ProducerStateTable()
        self.txn_index = txn_index if txn_index is not None else TxnIndex()
        # Decided transactions whose marker is not below the HW yet: (first offset, marker offset).
        self._unreplicated: list[tuple[int, int]] = []
        self._coordinator_epochs: dict[int, int] = {}  # producer id -> epoch of the last marker's coordinator
        self._state = state
        self._follower_leo: dict[int, int] = {}
        self._follower_seen_ms: dict[int, int] = {}  # last caught-up time (Kafka's lastCaughtUpTimeMs)
        self._follower_last_fetch: dict[int, tuple[int, int]] = {}  # (time, leader LEO then)
        self._follower_start: dict[int, int] = {}  # log start offsets followers reported (KIP-392's candidates)
        self._epoch_start_offset = log.log_end_offset  # our LEO when we became leader of this epoch
        self._pending_isr: tuple[int, tuple[int, ...]] | None = None  # (leader epoch, ISR asked for)
        # A sole replica has nothing to wait for. With followers, the HW restarts
        # at the log start and rises as they report their positions.
        self._hw = log.log_end_offset if state.isr == (broker_id,) else log.log_start_offset
        # Counters for /metrics (read when scraped; zero again when the broker restarts).
        self.records_appended = 0  # by produce, as leader
        self.records_read = 0  # returned to clients (followers' fetches are not counted)
        self.records_expired = 0  # offsets removed from the log's start by retention

    # -- state ----------------------------------------------------------------------

    @property
    def state(self) -> PartitionState:
        return self._state

    @property
    def role(self) -> Role:
        return Role.LEADER if self._state.leader == self.broker_id else Role.FOLLOWER

    @property
    def is_leader(self) -> bool:
        return self._state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self._state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: min(first offset of every undecided or unreplicated transaction, HW)."""
        hw = self._hw
        if self._unreplicated:
            self._unreplicated = [(f, m) for f, m in self._unreplicated if m >= hw]
        lso = hw
        ongoing = self.producers.ongoing
        if ongoing:  # most partitions have no open transaction: no view, no loop (read per partition per fetch)
            lso = min(lso, *ongoing.values())
        for first, _ in self._unreplicated:
            lso = min(lso, first)
        return lso

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def update_state(self, state: PartitionState, *, now_ms: int | None = None) -> None:
        """Become leader or follower at `state.leader_epoch` (LeaderAndIsr / metadata image).

        A new leadership (or a new epoch of it) forgets what followers reported
        to the old one and counts every ISR member as caught up now (Kafka's
        makeLeader), so none is dropped from the ISR before it had a chance
        to fetch from us.
        """
        was_leader, old_epoch = self.is_leader, self._state.leader_epoch
        self._state = state
        if self.is_leader and (not was_leader or state.leader_epoch != old_epoch):
            self._follower_leo.clear()
            self._follower_seen_ms.clear()
            self._follower_last_fetch.clear()
            self._follower_start.clear()
            self._epoch_start_offset = self.log.log_end_offset
            if now_ms is not None:
                for replica in state.isr:
                    if replica != self.broker_id:
                        self._follower_seen_ms[replica] = now_ms
        self._maybe_advance_hw()

    def restore_high_watermark(self, hw: int) -> None:
        """Start from a checkpointed HW (never past our log end), so a restart does not regress it."""
        self._hw = max(self._hw, min(hw, self.log.log_end_offset))

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: -1 skips the check."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.none
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer: (largest epoch <= `epoch`, its end offset).

        As a leader, the current epoch ends at the log end offset even before
        anything was written in it (Kafka's leader starts the epoch in its
        cache on election; the log only learns epochs from appended batches).
        """
        if self.is_leader and epoch == self.leader_epoch:
            return epoch, self.log.log_end_offset
        return self.log.end_offset_for_epoch(epoch)

    # -- leader path ----------------------------------------------------------------

    def append_as_leader(self, batch: memoryview, header: BatchHeader, *, required_acks: int, now_ms: int) -> AppendOutcome:
        """Append one client batch, whose header the produce handler read."""
        if not self.is_leader:
            return AppendOutcome(ErrorCode.not_leader_or_follower)
        attributes = header.attributes
        if attributes & CONTROL_BIT:
            return AppendOutcome(ErrorCode.invalid_record, message="clients may not write control batches")
        producer_id = header.producer_id
        if attributes & TRANSACTIONAL_BIT:
            if producer_id < 0:
                return AppendOutcome(ErrorCode.invalid_record, message="a transactional batch needs a producer id")
        elif producer_id >= 0 and producer_id in self.producers.ongoing:
            # Kafka's ProducerAppendInfo: no plain batches inside an open transaction.
            return AppendOutcome(
                ErrorCode.invalid_txn_state,
                message=f"producer {producer_id} has an open transaction here; its batches must be transactional",
            )
        if required_acks == -1 and len(self._state.isr) < self.log.config.min_insync_replicas:
            return AppendOutcome(
                ErrorCode.not_enough_replicas,
                message=f"{len(self._state.isr)} in-sync replicas, min.insync.replicas="
                f"{self.log.config.min_insync_replicas}",
            )
        if producer_id >= 0:
            epoch = header.producer_epoch
            first_seq = header.base_sequence
            last_seq = (first_seq + header.last_offset_delta) % SEQUENCE_MODULUS if first_seq >= 0 else -1
            check = self.producers.check(producer_id, epoch, first_seq, last_seq)
            if check.verdict is Verdict.DUPLICATE:
                # Kafka validates a batch before looking for duplicates: a corrupt
                # retry is still CORRUPT_MESSAGE.
                try:
                    check_batch(batch)
                except LogError as exc:
                    return AppendOutcome(code_for_log_error(exc), message=str(exc))
                dup = check.duplicate
                assert dup is not None
                log_append_time = dup.timestamp if self.log.config.message_timestamp_type == "LogAppendTime" else -1
                return AppendOutcome(
                    ErrorCode.none, dup.first_offset, dup.last_offset, log_append_time, self.log.log_start_offset
                )
            if check.verdict is Verdict.REJECT:
                return AppendOutcome(check.error, message=check.message)
        result, refused = self._log_append(batch, header, now_ms)
        if refused is not None:
            return refused
        assert result is not None
        if producer_id >= 0:
            self.producers.record(
                producer_id, epoch, first_seq, last_seq, result.base_offset, result.last_offset,
                result.max_timestamp, now_ms, transactional=bool(attributes & TRANSACTIONAL_BIT),
            )
        self.records_appended += header.record_count
        return AppendOutcome(
            ErrorCode.none,
            result.base_offset,
            result.last_offset,
            result.log_append_time,
            self.log.log_start_offset,
            hw_moved=self._maybe_advance_hw(),
            appended_bytes=len(batch),
        )

    def _log_append(self, batch: bytes | memoryview, header: BatchHeader,
                    now_ms: int) -> tuple[AppendResult | None, AppendOutcome | None]:
        """Append to the log as leader; (result, None), or (None, the refusal) when the log says no."""
        try:
            return self.log.append(batch, leader_epoch=self.leader_epoch, now_ms=now_ms, header=header), None
        except LogError as exc:
            return None, AppendOutcome(code_for_log_error(exc), message=str(exc))
        except OSError as exc:
            return None, AppendOutcome(ErrorCode.kafka_storage_error, message=str(exc))

    def append_marker(
        self, *, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now_ms: int
    ) -> AppendOutcome:
        """Write a COMMIT/ABORT marker for `producer_id` (WriteTxnMarkers, from the coordinator).

        Refused when not leader, when a newer coordinator already wrote for
        this producer (TRANSACTION_COORDINATOR_FENCED) or when the producer is
        at a newer epoch here (INVALID_PRODUCER_EPOCH), as Kafka's
        ProducerAppendInfo.appendEndTxnMarker checks.
        """
        if not self.is_leader:
            return AppendOutcome(ErrorCode.not_leader_or_follower)
        if coordinator_epoch < self._coordinator_epochs.get(producer_id, -1):
            return AppendOutcome(ErrorCode.transaction_coordinator_fenced,
                                 message=f"coordinator epoch {coordinator_epoch} is older than the last marker's")
        entry = self.producers.get(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            return AppendOutcome(ErrorCode.invalid_producer_epoch,
                                 message=f"marker epoch {producer_epoch} is older than {entry.epoch}")
        batch = build_marker(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                             coordinator_epoch=coordinator_epoch, timestamp=now_ms)
        header = read_header(batch)
        result, refused = self._log_append(batch, header, now_ms)
        if refused is not None:
            return refused
        assert result is not None
        self._end_txn(producer_id, producer_epoch, result.base_offset,
                      ControlType.COMMIT if commit else ControlType.ABORT, now_ms)
        self._coordinator_epochs[producer_id] = coordinator_epoch
        return AppendOutcome(
            ErrorCode.none, result.base_offset, result.last_offset, result.log_append_time,
            self.log.log_start_offset, hw_moved=self._maybe_advance_hw(), appended_bytes=len(batch),
        )

    def observe(self, header: BatchHeader, batch: memoryview, now_ms: int) -> None:
        """A stored batch (replayed at open, or copied from the leader): update producer and transaction state."""
        if header.attributes & CONTROL_BIT:
            if header.producer_id < 0:
                return
            try:
                kind = control_type(batch)
            except LogError:
                return  # not a transaction marker we can read: nothing to end
            self._end_txn(header.producer_id, header.producer_epoch, header.base_offset, kind, now_ms)
        else:
            self.producers.replay_header(header, now_ms)

    def _end_txn(self, producer_id: int, epoch: int, marker_offset: int, kind: ControlType, now_ms: int) -> None:
        lso = self.last_stable_offset
        first = self.producers.end_txn(producer_id, epoch, marker_offset, now_ms)
        if first is None:
            return
        if marker_offset >= self._hw:
            self._unreplicated.append((first, marker_offset))
        if kind is ControlType.ABORT:
            self.txn_index.append(AbortedTxn(producer_id, first, marker_offset, lso))

    def coordinator_epoch(self, producer_id: int) -> int:
        """The coordinator epoch of the last marker written for `producer_id` as leader here (-1: none)."""
        return self._coordinator_epochs.get(producer_id, -1)

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """What a read_committed fetch of [fetch_offset, upper_offset) must drop."""
        return self.txn_index.collect(fetch_offset, upper_offset)

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1) -> bool:
        """A follower fetched from `fetch_offset` (= its log end offset, its log starting at
        `log_start_offset`; -1: not said); True if the HW moved.

        Caught-up time as Kafka's Replica.updateFetchState: at our log end now
        means caught up now; at least at our log end of its previous fetch
        means caught up as of that fetch (so a steady stream of produces does
        not make a keeping-up follower look lagging).
        """
        leo = self.log.log_end_offset
        self._follower_leo[replica_id] = fetch_offset
        self._follower_start[replica_id] = log_start_offset
        if fetch_offset >= leo:
            self._follower_seen_ms[replica_id] = now_ms
        else:
            previous = self._follower_last_fetch.get(replica_id)
            if previous is not None and fetch_offset >= previous[1]:
                self._follower_seen_ms[replica_id] = max(self._follower_seen_ms.get(replica_id, 0), previous[0])
        self._follower_last_fetch[replica_id] = (now_ms, leo)
        return self._maybe_advance_hw()

    def in_sync_holding(self, offset: int, now_ms: int) -> list[tuple[int, int, int]]:
        """(replica id, log end offset, ms since last caught up) of each in-sync follower whose log, as
        it last reported, holds `offset`: where a consumer may be sent to read it (KIP-392; Kafka's
        findPreferredReadReplica). A follower that never said its log start is taken to hold it."""
        if not self.is_leader:
            return []
        out = []
        for replica in self._state.isr:
            leo = self._follower_leo.get(replica)
            if replica == self.broker_id or leo is None or leo < offset or self._follower_start.get(replica, -1) > offset:
                continue
            out.append((replica, leo, max(now_ms - self._follower_seen_ms.get(replica, now_ms), 0)))
        return out

    def isr_change(self, now_ms: int, lag_time_max_ms: int,
                   eligible: frozenset[int] | None = None) -> tuple[int, ...] | None:
        """The ISR this leader should ask the controller for, or None (KIP-497 AlterPartition).

        Shrink: a follower whose last caught-up time is older than
        replica.lag.time.max.ms. Expand: a replica outside the ISR whose log
        end reached the HW and this leader epoch's start offset (Kafka's
        isFollowerInSync), so it holds everything acknowledged, and that the
        controller would accept: `eligible` (registered, unfenced, not in
        controlled shutdown, KIP-841; None: any), for one ineligible member
        makes it refuse the whole request.
        """
        if not self.is_leader:
            return None
        isr = list(self._state.isr)
        # A member never heard from starts its lag clock at the first check.
        out = [
            r for r in isr
            if r != self.broker_id and now_ms - self._follower_seen_ms.setdefault(r, now_ms) > lag_time_max_ms
        ]
        caught_up = [
            r for r in self._state.replicas
            if r not in isr and r != self.broker_id and (eligible is None or r in eligible)
            and self._follower_leo.get(r, -1) >= max(self._hw, self._epoch_start_offset)
            and now_ms - self._follower_seen_ms.get(r, 0) <= lag_time_max_ms
        ]
        if not out and not caught_up:
            return None
        new = [r for r in isr if r not in out] + caught_up
        if self.broker_id not in new:
            new.insert(0, self.broker_id)
        return tuple(new)

    def isr_change_sent(self, isr: Sequence[int]) -> None:
        """This leader asked the controller for `isr` (KIP-497 AlterPartition).

        Until the answer is applied, the HW waits for the maximal ISR: the
        committed one and every member asked for (Kafka's PendingExpandIsr and
        PendingShrinkIsr). The controller may commit the new ISR and at once
        elect one of the added members (a reassignment completing); a record
        acknowledged by the old ISR alone in between would not be on the new
        leader, and would be lost.
        """
        self._pending_isr = (self.leader_epoch, tuple(isr))

    def isr_change_settled(self) -> bool:
        """No ISR change is in flight any more (answer applied, or refused while this leadership stands);
        True if the HW moved (it waited for the maximal ISR), so its waiters must be woken."""
        if self._pending_isr is not None:  # called for every partition on every pass: nothing to do is cheap
            self._pending_isr = None
            return self._maybe_advance_hw()
        return False

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The replicas the HW waits for: the committed ISR plus those an unanswered AlterPartition adds."""
        pending = self._pending_isr
        if pending is None or pending[0] != self.leader_epoch:
            return self._state.isr
        return self._state.isr + tuple(r for r in pending[1] if r not in self._state.isr)

    def _maybe_advance_hw(self) -> bool:
        if not self.is_leader:
            return False
        leo = self.log.log_end_offset
        candidates = [leo]
        for replica in self.maximal_isr:
            if replica != self.broker_id:
                candidates.append(self._follower_leo.get(replica, self._hw))
        new_hw = min(candidates)
        if new_hw > self._hw:
            self._hw = new_hw
            return True
        return False

    # -- follower path ----------------------------------------------------------------

    def append_as_follower(self, batches: memoryview, leader_hw: int) -> int:
        """Copy the leader's batches; returns the new log end offset."""
        leo = self.log.append_replicated(batches)
        self.follow_high_watermark(leader_hw)
        return leo

    def follow_high_watermark(self, leader_hw: int) -> bool:
        """A follower's HW is the leader's, capped at its own log end; True if it moved."""
        new = max(self._hw, min(leader_hw, self.log.log_end_offset))
        moved = new != self._hw
        self._hw = new
        return moved

    # -- reads -------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, for_replica: bool, min_one: bool, read_committed: bool = False,
        as_range: bool = False,
    ) -> ReadResult:
        """Batches from `offset`; clients see only what is below the HW (read_committed: the LSO).
        `as_range`: the data may be a FileRange (storage/file_range.py), for a Fetch written with sendfile."""
        if for_replica:
            return self.log.read(offset, max_bytes, max_offset=None, min_one=min_one, as_range=as_range)
        limit = self.last_stable_offset if read_committed else self._hw
        result = self.log.read(offset, max_bytes, max_offset=limit, min_one=min_one, as_range=as_range)
        data = result.data
        if isinstance(data, FileRange):
            # The bodies stay in the file: the offsets spanned (the records, but for a compacted log's gaps).
            self.records_read += result.next_offset - result.first_offset
        elif data:
            self.records_read += count_records(data)
        return result

    def enforce_retention(self, now_ms: int) -> int:
        """Delete segments past retention (never past the LSO: an open transaction keeps its records);
        returns segments deleted, counts the offsets."""
        before = self.log.log_start_offset
        deleted = self.log.enforce_retention(now_ms, high_watermark=self.last_stable_offset)
        self.records_expired += max(self.log.log_start_offset - before, 0)
        if self.log.log_start_offset > before:
            self.txn_index.trim_before(self.log.log_start_offset)
        return deleted

    def after_log_truncation(self) -> None:
        """The log lost its tail (follower divergence): HW, the aborted index and undecided
        transactions follow it (the caller rebuilds producer state)."""
        leo = self.log.log_end_offset
        self._hw = min(self._hw, leo)
        self.txn_index.truncate_to(leo)
        self._unreplicated = [(f, m) for f, m in self._unreplicated if m < leo]
