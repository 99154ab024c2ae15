"""Idempotent producers: per-partition sequence state (KIP-98), with no I/O.

For each producer id that wrote to a partition we keep its epoch and the
metadata of its last five batches (first/last sequence, first/last offset,
timestamp) -- five because a producer has at most five requests in flight
(max.in.flight.requests.per.connection <= 5 with idempotence). A produce is
checked before it is appended (Kafka's ProducerStateManager / ProducerAppendInfo):

- a batch equal (same epoch, same first and last sequence) to one of the five
  is a retry: answered NONE with the original offsets, and not appended again;
- an epoch older than the one on record: INVALID_PRODUCER_EPOCH;
- a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- the same epoch must continue at last sequence + 1 (wrapping at 2**31 - 1),
  else OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer id we hold nothing for is accepted at any sequence (KIP-360: its
  state may have expired, or it may be new to this partition).

Transactions (KIP-98): the table also keeps, per producer, the first offset
of its open transaction in this partition (`ongoing`, Kafka's
currentTxnFirstOffset): set by the first transactional batch, cleared by the
COMMIT or ABORT marker (`end_txn`), which also moves the producer to the
marker's epoch, so a fenced zombie's later batches are refused. The smallest
open first offset bounds the last stable offset (see `partition`).

State survives restarts two ways: `snapshot()` / `ProducerStateTable.restore()`
give a JSON document tagged with the log end offset it covers, and `replay()`
rebuilds entries from stored batch headers (no record decoding) from that
offset to the log end. A snapshot is only a shortcut: a missing, stale or
unreadable one means a longer replay, never wrong state.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson

from tinystream.broker.errors import ErrorCode
from tinystream.broker.storage.batch import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader

#: Batches remembered per producer (Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN).
BATCHES_TO_RETAIN = 5
#: producer.id.expiration.ms (KIP-854): state of an idle producer is dropped after a day.
PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000
SEQUENCE_MODULUS = 1 << 31


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp (or its append time)


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    last_seen_ms: int = -1  # broker time of the last append (expiration)

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


class Verdict(enum.Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    verdict: Verdict
    error: ErrorCode = ErrorCode.none
    duplicate: BatchMetadata | None = None
    message: str | None = None


_APPEND = SequenceCheck(Verdict.APPEND)


class ProducerStateTable:
    """Producer entries of one partition."""

    def __init__(self) -> None:
        self._entries: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction here
        self.changes = 0  # bumped on every change (snapshot bookkeeping)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def entries(self) -> list[ProducerEntry]:
        """Every producer with state here (DescribeProducers)."""
        return list(self._entries.values())

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> SequenceCheck:
        """What to do with a batch from a client; changes nothing."""
        entry = self._entries.get(producer_id)
        if entry is None:
            return _APPEND
        duplicate = entry.duplicate_of(epoch, first_seq, last_seq)
        if duplicate is not None:
            return SequenceCheck(Verdict.DUPLICATE, duplicate=duplicate)
        if epoch < entry.epoch:
            return SequenceCheck(
                Verdict.REJECT,
                ErrorCode.invalid_producer_epoch,
                message=f"producer {producer_id} epoch {epoch} is older than {entry.epoch}",
            )
        if first_seq < 0:  # no sequence: nothing to order
            return _APPEND
        if epoch > entry.epoch:
            if first_seq != 0:
                return SequenceCheck(
                    Verdict.REJECT,
                    ErrorCode.out_of_order_sequence_number,
                    message=f"producer {producer_id}: new epoch {epoch} must start at sequence 0, not {first_seq}",
                )
            return _APPEND
        if not entry.batches:
            return _APPEND
        expected = (entry.batches[-1].last_seq + 1) % SEQUENCE_MODULUS
        if first_seq != expected:
            return SequenceCheck(
                Verdict.REJECT,
                ErrorCode.out_of_order_sequence_number,
                message=f"producer {producer_id} epoch {epoch}: sequence {first_seq}, expected {expected}",
            )
        return _APPEND

    def record(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        now_ms: int,
        *,
        transactional: bool = False,
    ) -> None:
        """Remember an appended batch (from a client, or replayed from the log)."""
        if transactional and producer_id not in self.ongoing:
            self.ongoing[producer_id] = first_offset
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = self._entries[producer_id] = ProducerEntry(producer_id, epoch)
        elif epoch != entry.epoch:
            if epoch < entry.epoch:  # replaying something older than what we hold: keep the newer state
                return
            entry.epoch = epoch
            entry.batches.clear()
        if first_seq >= 0:
            entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_seen_ms = max(entry.last_seen_ms, now_ms)
        self.changes += 1

    def end_txn(self, producer_id: int, epoch: int, marker_offset: int, now_ms: int) -> int | None:
        """A COMMIT/ABORT marker at `marker_offset`: close the producer's open transaction.

        Returns the transaction's first offset here, or None when the producer
        had written nothing transactional to this partition (a marker for an
        empty transaction, which Kafka writes too). The producer moves to the
        marker's epoch (the coordinator may have bumped it to fence a zombie).
        """
        first = self.ongoing.pop(producer_id, None)
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = self._entries[producer_id] = ProducerEntry(producer_id, epoch)
        elif epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_seen_ms = max(entry.last_seen_ms, now_ms)
        self.changes += 1
        return first

    def replay_header(self, header: BatchHeader, now_ms: int) -> bool:
        """Apply one stored data batch's header (control batches are the caller's: see `end_txn`)."""
        producer_id = header.producer_id
        if producer_id < 0 or header.attributes & CONTROL_BIT:
            return False
        base_offset, delta, base_seq = header.base_offset, header.last_offset_delta, header.base_sequence
        last_seq = (base_seq + delta) % SEQUENCE_MODULUS if base_seq >= 0 else -1
        self.record(
            producer_id, header.producer_epoch, base_seq, last_seq,
            base_offset, base_offset + delta, header.max_timestamp, now_ms,
            transactional=bool(header.attributes & TRANSACTIONAL_BIT),
        )
        return True

    def replay(self, headers: Iterable[BatchHeader], now_ms: int) -> int:
        """Rebuild from the stored data batches' headers, in offset order; returns batches seen."""
        return sum(self.replay_header(header, now_ms) for header in headers)

    def expire(self, now_ms: int, max_idle_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Drop producers idle for longer than max_idle_ms; returns how many."""
        stale = [
            pid for pid, e in self._entries.items()
            if now_ms - e.last_seen_ms > max_idle_ms and pid not in self.ongoing  # an open transaction stays
        ]
        for pid in stale:
            del self._entries[pid]
        if stale:
            self.changes += 1
        return len(stale)

    def clear(self) -> None:
        self._entries.clear()
        self.ongoing.clear()
        self.changes += 1

    # -- snapshots ----------------------------------------------------------------

    def snapshot(self, end_offset: int) -> bytes:
        """The table as JSON, valid for a log whose end offset is `end_offset`."""
        return orjson.dumps(
            {
                "version": 2,
                "end_offset": end_offset,
                "ongoing": [[pid, first] for pid, first in self.ongoing.items()],
                "producers": [
                    [e.producer_id, e.epoch, e.last_seen_ms, [list(_astuple(b)) for b in e.batches]]
                    for e in self._entries.values()
                ],
            }
        )

    @classmethod
    def restore(cls, data: bytes) -> tuple[ProducerStateTable, int]:
        """(table, end offset it covers) from `snapshot()` output; ValueError if unreadable."""
        try:
            doc = orjson.loads(data)
            if doc.get("version") not in (1, 2):
                raise ValueError(f"unknown producer snapshot version {doc.get('version')!r}")
            table = cls()
            for producer_id, epoch, last_seen, batches in doc["producers"]:
                entry = ProducerEntry(int(producer_id), int(epoch), last_seen_ms=int(last_seen))
                for b in batches:
                    entry.batches.append(BatchMetadata(*(int(x) for x in b)))
                table._entries[entry.producer_id] = entry
            for pid, first in doc.get("ongoing", ()):
                table.ongoing[int(pid)] = int(first)
            return table, int(doc["end_offset"])
        except (KeyError, TypeError, orjson.JSONDecodeError) as exc:
            raise ValueError(f"unreadable producer snapshot: {exc}") from exc


def _astuple(b: BatchMetadata) -> tuple[int, int, int, int, int]:
    return (b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
