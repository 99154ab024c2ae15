"""Leader-epoch cache: which leader epoch wrote which offsets (KIP-101, KIP-279).

Entries map an epoch to the first offset written in it. Invariants: epochs
and start offsets both strictly increase along the list; every start offset
is below the log end offset. The rules are Kafka's LeaderEpochFileCache:

- ``assign(epoch, start)``: ignored when epoch < 0 or it repeats the latest
  entry; otherwise entries with epoch >= new epoch or start >= new start are
  dropped (they would break monotonicity) and the new one is added.
- ``truncate_from_end(end)``: drop entries starting at or after ``end``
  (the log was truncated to ``end``).
- ``truncate_from_start(start)``: drop entries starting at or before
  ``start`` and re-add the last of them at ``start`` (log start moved).
- ``end_offset_for_epoch``: OffsetForLeaderEpoch's answer (see the method).

Checkpoint file ``leader-epoch-checkpoint`` (Kafka's format, replaced
atomically with fsync on every change)::

    0                 <- version
    <n>               <- entry count
    <epoch> <offset>  <- n lines, ascending
"""

from __future__ import annotations

import bisect
from pathlib import Path

from tinystream.broker.storage.base import EpochEntry
from tinystream.broker.storage.checkpoint import CheckpointFormatError, parse_checkpoint, write_checkpoint

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCheckpoint:
    """The checkpoint file alone: read and atomically write a list of entries."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self._fsync = fsync

    def read(self) -> list[EpochEntry] | None:
        """Entries on disk; None if the file is missing; CheckpointFormatError if it is corrupt."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        entries = [EpochEntry(epoch, offset) for epoch, offset in parse_checkpoint(data, width=2)]
        for previous, entry in zip(entries, entries[1:]):
            if entry.epoch <= previous.epoch or entry.start_offset < previous.start_offset:
                raise CheckpointFormatError(f"epochs out of order: {previous} then {entry}")
        return entries

    def write(self, entries: list[EpochEntry]) -> None:
        write_checkpoint(self.path, [(e.epoch, e.start_offset) for e in entries], fsync=self._fsync)


class LeaderEpochCache:
    """In-memory epoch list, written through to an optional checkpoint on every change."""

    def __init__(self, entries: list[EpochEntry] | None = None, *, checkpoint: LeaderEpochCheckpoint | None = None):
        self._entries: list[EpochEntry] = list(entries or [])
        self._checkpoint = checkpoint
        #: The latest epoch (-1 when none); a plain attribute because every append reads it.
        self.latest_epoch = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    # ------------------------------------------------------------------ queries
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) per Kafka's LeaderEpochFileCache.endOffsetFor.

        - requested == latest epoch: (epoch, log end offset);
        - requested above every known epoch, or -1, or no entries: (-1, -1);
        - otherwise the largest known epoch <= requested, ending where the
          next higher epoch starts; below the first known epoch Kafka answers
          (requested, first start offset), and so do we.
        """
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._entries[-1].epoch:
            return epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote ``offset`` (-1 when unknown)."""
        starts = [e.start_offset for e in self._entries]
        index = bisect.bisect_right(starts, offset) - 1
        return self._entries[index].epoch if index >= 0 else UNDEFINED_EPOCH

    # ------------------------------------------------------------------ changes
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True when the list changed."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._entries:
            latest = self._entries[-1]
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._save()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        if self._entries and self._entries[-1].start_offset >= end_offset:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries.pop()
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        cut = 0
        while cut < len(self._entries) and self._entries[cut].start_offset <= start_offset:
            cut += 1
        if cut == 0 or (cut == 1 and self._entries[0].start_offset == start_offset):
            return
        first = EpochEntry(self._entries[cut - 1].epoch, start_offset)
        self._entries[:cut] = [first]
        self._save()

    def clear(self) -> None:
        if self._entries:
            self._entries.clear()
            self._save()

    def _save(self) -> None:
        self.latest_epoch = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH
        if self._checkpoint is not None:
            self._checkpoint.write(self._entries)
