"""Sparse segment indexes: offset -> position (.index) and timestamp -> offset (.timeindex).

Both are Kafka's formats (OffsetIndex, TimeIndex), append-only files:

``.index``      8-byte entries: relative offset u32 BE | position u32 BE
``.timeindex``  12-byte entries: timestamp i64 BE | relative offset u32 BE

Relative offset = offset - segment base offset. Entries are sparse: a log
segment adds one every ``index.interval.bytes`` of batches (see segment.py).

Invariants (checked by ``load``; a file that breaks them is *corrupt* and
the segment rebuilds it from the log):

- file length is a multiple of the entry size;
- offset index: relative offsets and positions strictly increase;
- time index: timestamps strictly increase, relative offsets never decrease;
- every entry refers to a batch that exists (position below the log size;
  checked by the segment, which knows the size).

Entries live in memory as ``array`` columns, so ``lookup`` is a C-speed
``bisect`` (about a microsecond for a million entries). The file is only an
acceleration structure: entries reach it on ``flush``, which the segment
calls *after* the log data they point to was fsynced, so after a crash every
entry on disk points at durable data and recovery can scan from the last
entry. Closed segments load their index lazily on first lookup.

Thread model: one writer appends; readers may bisect concurrently. Appends
add the value column before the key column, so a reader that sees a key
always finds its value.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import sys
from array import array
from pathlib import Path

from tinystream.broker.storage.base import LogStorageError

_log = logging.getLogger(__name__)
_LITTLE_ENDIAN = sys.byteorder == "little"
_TIME_ENTRY = struct.Struct(">qI")
MAX_RELATIVE = 0xFFFF_FFFF


class IndexCorruptError(ValueError):
    """An index file breaks its invariants; rebuild it from the log."""


class _SparseIndex:
    """Shared file handling: lazy load, append-only persistence, truncation."""

    ENTRY_SIZE = 0
    KEY_TYPECODE = "I"
    VALUE_TYPECODE = "I"

    def __init__(self, path: Path, base_offset: int, *, new: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        self._keys: array[int] | None = None
        self._values: array[int] | None = None
        self._persisted = 0  # entries already in the file
        if new:
            self._keys = array(self.KEY_TYPECODE)
            self._values = array(self.VALUE_TYPECODE)

    # ------------------------------------------------------------ loading
    @property
    def loaded(self) -> bool:
        return self._keys is not None

    def load(self) -> None:
        """Read the file (missing = empty). Raises IndexCorruptError; leaves the index empty then."""
        if self._keys is not None:
            return
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise LogStorageError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        if len(data) % self.ENTRY_SIZE:
            raise IndexCorruptError(f"{self.path.name}: {len(data)} bytes is not a multiple of {self.ENTRY_SIZE}")
        keys, values = self._decode(data)
        self._check(keys, values)
        self._values = values
        self._keys = keys
        self._persisted = len(keys)

    def reset(self) -> None:
        """Forget every entry, in memory and on disk (before a rebuild)."""
        self._keys = array(self.KEY_TYPECODE)
        self._values = array(self.VALUE_TYPECODE)
        self._persisted = 0
        try:
            with open(self.path, "wb"):
                pass
        except OSError as exc:
            raise LogStorageError(f"cannot reset {self.path}: {exc.strerror or exc}") from exc

    def _ensure(self) -> tuple[array[int], array[int]]:
        """The loaded (keys, values), loading them first if needed."""
        if self._keys is None:
            try:
                self.load()
            except IndexCorruptError as exc:
                # Lookups stay correct with no entries (they scan from the
                # segment start); the empty file makes the next open rebuild it.
                _log.warning("%s; dropping it (rebuilt at next open)", exc)
                self.reset()
        keys, values = self._keys, self._values
        assert keys is not None and values is not None
        return keys, values

    # ------------------------------------------------------------ state
    def __len__(self) -> int:
        keys, values = self._ensure()
        return len(keys)

    def entries(self) -> list[tuple[int, int]]:
        """(key, value) pairs with keys as stored (relative where relative)."""
        keys, values = self._ensure()
        return list(zip(keys, values))

    # ------------------------------------------------------------ persistence
    def flush(self, *, fsync: bool = False) -> None:
        """Write entries not yet on disk (append only)."""
        keys, values = self._keys, self._values
        if keys is None or values is None or (self._persisted == len(keys) and not fsync):
            return
        count = min(len(keys), len(values))
        data = self._encode(self._persisted, count)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                if data:
                    os.pwrite(fd, data, self._persisted * self.ENTRY_SIZE)
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise LogStorageError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        self._persisted = count

    def _truncate_entries(self, keep: int) -> None:
        """Keep the first ``keep`` entries, in memory and (immediately) on disk."""
        keys, values = self._ensure()
        if keep >= len(keys):
            return
        del values[keep:]
        del keys[keep:]
        if self._persisted > keep:
            try:
                os.truncate(self.path, keep * self.ENTRY_SIZE)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise LogStorageError(f"cannot truncate {self.path}: {exc.strerror or exc}") from exc
            self._persisted = keep

    def delete_file(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    # hooks
    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        raise NotImplementedError

    def _encode(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    def _check(self, keys: array[int], values: array[int]) -> None:
        raise NotImplementedError


class OffsetIndex(_SparseIndex):
    """.index: relative offset -> byte position of the batch with that base offset."""

    ENTRY_SIZE = 8

    def append(self, offset: int, position: int) -> None:
        """Add an entry for the batch at ``position`` whose base offset is ``offset``."""
        keys, values = self._ensure()
        relative = offset - self.base_offset
        if keys and (relative <= keys[-1] or position <= values[-1]):
            raise ValueError(
                f"index entry ({offset}, {position}) is not after ({self.base_offset + keys[-1]}, {values[-1]})"
            )
        if not 0 <= relative <= MAX_RELATIVE or not 0 <= position <= MAX_RELATIVE:
            raise ValueError(f"index entry ({offset}, {position}) does not fit 32 bits")
        values.append(position)
        keys.append(relative)

    def append_trusted(self, offset: int, position: int) -> None:
        """``append`` without the checks, for a writer that guarantees them (the segment's hot path)."""
        if self._keys is None:
            self.load()
        assert self._keys is not None and self._values is not None
        self._values.append(position)
        self._keys.append(offset - self.base_offset)

    def lookup(self, offset: int, size_limit: int | None = None) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= ``offset`` and position < size_limit.

        Returns (base offset, 0) when no entry qualifies: scan from the start.
        """
        keys, values = self._keys, self._values
        if keys is None or values is None:  # _ensure(), skipped when loaded: every read comes here
            keys, values = self._ensure()
        index = min(bisect.bisect_right(keys, offset - self.base_offset), len(values)) - 1
        if size_limit is not None and index >= 0 and values[index] >= size_limit:
            index = min(index, bisect.bisect_left(values, size_limit) - 1)
        if index < 0:
            return self.base_offset, 0
        return self.base_offset + keys[index], values[index]

    def entry_at_or_before_position(self, position: int) -> tuple[int, int] | None:
        """The last entry whose position is <= ``position`` (None when there is none)."""
        keys, values = self._ensure()
        index = min(bisect.bisect_right(values, position), len(keys)) - 1
        if index < 0:
            return None
        return self.base_offset + keys[index], values[index]

    def position_before(self, position: int) -> int:
        """Largest entry position strictly below ``position`` (0 if none)."""
        keys, values = self._ensure()
        index = bisect.bisect_left(values, position) - 1
        return values[index] if index >= 0 else 0

    def last_entry(self) -> tuple[int, int] | None:
        keys, values = self._ensure()
        count = min(len(keys), len(values))
        if not count:
            return None
        return self.base_offset + keys[count - 1], values[count - 1]

    def truncate_to_position(self, size: int) -> None:
        """Drop entries pointing at or past byte ``size``."""
        keys, values = self._ensure()
        self._truncate_entries(bisect.bisect_left(values, size))

    def drop_last(self) -> None:
        keys, values = self._ensure()
        self._truncate_entries(max(0, len(keys) - 1))

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        raw = array("I")
        raw.frombytes(data)
        if _LITTLE_ENDIAN:
            raw.byteswap()
        return raw[0::2], raw[1::2]

    def _encode(self, start: int, end: int) -> bytes:
        count = end - start
        if count <= 0:
            return b""
        keys, values = self._ensure()
        raw = array("I", bytes(8 * count))
        raw[0::2] = keys[start:end]
        raw[1::2] = values[start:end]
        if _LITTLE_ENDIAN:
            raw.byteswap()
        return raw.tobytes()

    def _check(self, keys: array[int], values: array[int]) -> None:
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or values[i] <= values[i - 1]:
                raise IndexCorruptError(f"{self.path.name}: entry {i} does not increase")


class TimeIndex(_SparseIndex):
    """.timeindex: max timestamp so far -> relative offset of the batch that holds it.

    ``last_timestamp`` is a plain attribute (the hot path reads it on every
    indexed append): the last entry's timestamp, -1 when empty or not loaded
    yet, so it never overstates; ``maybe_append`` makes the real check.
    """

    ENTRY_SIZE = 12
    KEY_TYPECODE = "q"
    last_timestamp = -1

    def load(self) -> None:
        super().load()
        self.last_timestamp = self._keys[-1] if self._keys else -1

    def reset(self) -> None:
        super().reset()
        self.last_timestamp = -1

    def _truncate_entries(self, keep: int) -> None:
        super()._truncate_entries(keep)
        self.last_timestamp = self._keys[-1] if self._keys else -1

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add (timestamp, offset) when the timestamp is above the last entry's; True if added."""
        keys, values = self._ensure()
        if timestamp < 0 or (keys and timestamp <= keys[-1]):
            return False
        relative = offset - self.base_offset
        if values and relative < values[-1]:
            raise ValueError(f"time index offset {offset} goes backwards")
        values.append(relative)
        keys.append(timestamp)
        self.last_timestamp = timestamp
        return True

    def lookup(self, timestamp: int) -> int | None:
        """Offset of the last entry with timestamp <= ``timestamp`` (None: scan from the start).

        Every batch before that offset has a max timestamp below the entry's
        (entries record each new maximum), so a scan for the first batch with
        max timestamp >= ``timestamp`` can start at that offset.
        """
        keys, values = self._ensure()
        index = min(bisect.bisect_right(keys, timestamp), len(values)) - 1
        if index < 0:
            return None
        return self.base_offset + values[index]

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry."""
        keys, values = self._ensure()
        count = min(len(keys), len(values))
        if not count:
            return None
        return keys[count - 1], self.base_offset + values[count - 1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        keys, values = self._ensure()
        self._truncate_entries(bisect.bisect_left(values, offset - self.base_offset))

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        keys = array("q")
        values = array("I")
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data):
            keys.append(timestamp)
            values.append(relative)
        return keys, values

    def _encode(self, start: int, end: int) -> bytes:
        pack = _TIME_ENTRY.pack
        keys, values = self._ensure()
        return b"".join(pack(keys[i], values[i]) for i in range(start, end))

    def _check(self, keys: array[int], values: array[int]) -> None:
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or values[i] < values[i - 1]:
                raise IndexCorruptError(f"{self.path.name}: entry {i} is out of order")
