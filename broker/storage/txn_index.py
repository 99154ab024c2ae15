"""The aborted-transaction index of one partition (Kafka's `.txnindex`), kept as one file.

A read_committed consumer must drop the records of aborted transactions, and
it learns which they are from the Fetch response's `aborted_transactions`:
(producer id, first offset) of every aborted transaction that overlaps the
fetched range. Kafka keeps one `.txnindex` file per segment; TinyStream keeps
the same entries in one append-only file per partition
(`<topic>-<partition>/aborted-txns.index`), which survives restarts and is
trimmed as the log loses its head (retention) or tail (truncation).

File format: a sequence of 34-byte entries, Kafka's AbortedTxn layout::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64

`lastOffset` is the offset of the ABORT marker. Entries are appended in
marker order, so they are sorted by `lastOffset`. A torn last entry (a crash
mid-write) is ignored on load; the caller re-derives it from the log (the
producer-state replay after the snapshot offset sees the marker again and
`append` skips entries it already holds).

Invariants: entries are unique by (producer id, last offset); none has a last
offset at or past the log end (truncation removes them) or below the log
start (retention removes them).
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path
from typing import NamedTuple

from tinystream.atomic_file import write_atomically

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0
FILE_NAME = "aborted-txns.index"


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the LSO when the marker was written (Kafka keeps it too)


class TxnIndex:
    """Aborted transactions of one partition, sorted by marker offset; `path=None` keeps them in memory."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self._entries: list[AbortedTxn] = []
        self._lasts: list[int] = []  # last_offset of each entry, for bisect
        if path is not None and path.exists():
            data = path.read_bytes()
            if self._load(data) != len(data):
                self._rewrite()  # drop the torn or unknown tail, so later appends stay aligned

    def _load(self, data: bytes) -> int:
        """Read whole entries; returns the bytes used."""
        usable = len(data) - len(data) % ENTRY_SIZE
        for pos in range(0, usable, ENTRY_SIZE):
            version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
            if version != VERSION:
                return pos  # an unknown entry: stop here, the replay re-derives the rest
            self._insert(AbortedTxn(pid, first, last, lso))
        return usable

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def _insert(self, entry: AbortedTxn) -> bool:
        i = bisect.bisect_left(self._lasts, entry.last_offset)
        while i < len(self._lasts) and self._lasts[i] == entry.last_offset:
            if self._entries[i].producer_id == entry.producer_id:
                return False
            i += 1
        self._entries.insert(i, entry)
        self._lasts.insert(i, entry.last_offset)
        return True

    def append(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction (idempotent: a known one is skipped)."""
        if not self._insert(entry):
            return
        if self._path is not None and self._path.parent.exists():
            with open(self._path, "ab") as f:
                f.write(ENTRY.pack(VERSION, *entry))
                f.flush()

    def collect(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_offset): Kafka's collectAbortedTxns.

        Those whose marker is at or after the fetch offset and whose first
        record is below the upper bound (the end of the data returned).
        """
        i = bisect.bisect_left(self._lasts, fetch_offset)
        return [e for e in self._entries[i:] if e.first_offset < upper_offset]

    def truncate_to(self, offset: int) -> None:
        """The log lost everything from `offset`: forget markers there."""
        i = bisect.bisect_left(self._lasts, offset)
        if i < len(self._entries):
            del self._entries[i:], self._lasts[i:]
            self._rewrite()

    def trim_before(self, log_start_offset: int) -> None:
        """Retention moved the log start: markers below it are gone."""
        i = bisect.bisect_left(self._lasts, log_start_offset)
        if i:
            del self._entries[:i], self._lasts[:i]
            self._rewrite()

    def _rewrite(self) -> None:
        if self._path is None or not self._path.parent.exists():
            return
        payload = b"".join(ENTRY.pack(VERSION, *e) for e in self._entries)
        write_atomically(self._path, payload, durable=False, parents=True)

    def delete(self) -> None:
        if self._path is not None:
            try:
                os.unlink(self._path)
            except FileNotFoundError:
                pass
