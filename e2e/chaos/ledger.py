"""What the producers sent and were told, what the group read and committed, and the verdict.

Every record value is unique (`<producer>:<seq>`), so one read of every
partition from offset 0 up to its high watermark tells, per value: absent,
present once, or present more than once. The ledger holds the other side of
each record (sent when, to which partition; acknowledged at which offset, or
failed) and `verify` compares the two:

- lost:        acknowledged, not in the log (must be 0)
- duplicated:  a value at more than one offset (must be 0; for an
               unacknowledged value too: idempotence forbids it)
- misplaced:   acknowledged at offset X, found at offset Y
- out of order: within a partition, one producer's sequence numbers not
               increasing with the offset (idempotent producers keep order)

Thread-safe: producer delivery callbacks and the consumer thread write here.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from tinystream.testing.waiting import wait_until


@dataclass(slots=True)
class Sent:
    producer: str
    seq: int
    partition: int
    sent_at: float
    offset: int | None = None  # set when acknowledged
    acked_at: float | None = None
    error: str | None = None  # set when the delivery failed


@dataclass(frozen=True, slots=True)
class Verdict:
    acknowledged: int
    unacknowledged: int
    in_log: int
    lost: list[str]
    duplicated: list[str]
    misplaced: list[str]
    out_of_order: list[str]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.misplaced or self.out_of_order)


@dataclass
class Ledger:
    records: dict[str, Sent] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    fatal_errors: list[str] = field(default_factory=list)
    # consumer side
    group_reads: dict[tuple[int, int], str] = field(default_factory=dict)  # (partition, offset) -> value
    read_divergences: list[str] = field(default_factory=list)
    committed: dict[int, int] = field(default_factory=dict)  # highest offset the group committed successfully
    commit_regressions: list[str] = field(default_factory=list)

    # -- producers -----------------------------------------------------------------

    def sent(self, value: str, *, producer: str, seq: int, partition: int) -> None:
        with self.lock:
            self.records[value] = Sent(producer, seq, partition, time.monotonic())

    def delivered(self, value: str, *, offset: int | None, error: str | None) -> None:
        with self.lock:
            record = self.records[value]
            if error is None:
                record.offset, record.acked_at = offset, time.monotonic()
            else:
                record.error = error

    def acked_count(self) -> int:
        with self.lock:
            return sum(1 for r in self.records.values() if r.offset is not None)

    def first_ack_sent_after(self, t0: float, *, partitions: set[int] | None = None) -> float | None:
        """When the first record handed to a producer after `t0` (on one of `partitions`) was
        acknowledged. Records sent after a SIGKILL can only be acknowledged by a new leader."""
        with self.lock:
            times = [r.acked_at for r in self.records.values()
                     if r.acked_at is not None and r.sent_at > t0
                     and (partitions is None or r.partition in partitions)]
        return min(times) if times else None

    def wait_ack_sent_after(self, t0: float, *, partitions: set[int] | None = None,
                            timeout_s: float) -> float:
        where = sorted(partitions) if partitions else "all"
        return wait_until(lambda: self.first_ack_sent_after(t0, partitions=partitions), timeout=timeout_s, interval=0.05,
                          what=f"a write sent after the fault to be acknowledged (partitions {where})")

    # -- consumer group --------------------------------------------------------------

    def group_read(self, partition: int, offset: int, value: str) -> None:
        with self.lock:
            previous = self.group_reads.setdefault((partition, offset), value)
            if previous != value:
                self.read_divergences.append(f"p{partition}@{offset}: read {previous!r}, later {value!r}")

    def group_committed(self, offsets: dict[int, int]) -> None:
        with self.lock:
            for partition, offset in offsets.items():
                self.committed[partition] = max(self.committed.get(partition, -1), offset)

    def check_committed(self, fetched: dict[int, int], *, when: str) -> None:
        """Offsets the coordinator answers must never be below what it acknowledged."""
        with self.lock:
            for partition, offset in self.committed.items():
                got = fetched.get(partition, -1)
                if got < offset:
                    self.commit_regressions.append(f"{when}: p{partition} committed {offset}, coordinator says {got}")

    # -- verdict ---------------------------------------------------------------------

    def verify(self, log: dict[int, list[tuple[int, str]]]) -> Verdict:
        """`log`: partition -> [(offset, value)] read from offset 0 to the high watermark."""
        where: dict[str, list[tuple[int, int]]] = defaultdict(list)
        out_of_order: list[str] = []
        for partition, entries in log.items():
            last_seq: dict[str, int] = {}
            for offset, value in entries:
                where[value].append((partition, offset))
                producer, _, seq_text = value.rpartition(":")
                seq = int(seq_text)
                if producer in last_seq and seq <= last_seq[producer]:
                    out_of_order.append(f"p{partition}@{offset}: {value} after seq {last_seq[producer]}")
                last_seq[producer] = max(seq, last_seq.get(producer, -1))
        with self.lock:
            records = dict(self.records)
        acked = {v: r for v, r in records.items() if r.offset is not None}
        lost = sorted(v for v in acked if v not in where)
        duplicated = sorted(v for v, places in where.items() if len(places) > 1)
        misplaced = sorted(f"{v}: acked p{r.partition}@{r.offset}, found at {where[v]}" for v, r in acked.items()
                           if v in where and where[v][0] != (r.partition, r.offset))
        return Verdict(acknowledged=len(acked), unacknowledged=len(records) - len(acked),
                       in_log=sum(len(e) for e in log.values()), lost=lost, duplicated=duplicated,
                       misplaced=misplaced, out_of_order=out_of_order)
