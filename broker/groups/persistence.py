"""How the coordinator reaches the __consumer_offsets topic.

The coordinator never touches logs: it asks an `OffsetsTopic` to append one
batch of (key, value) records to a partition and awaits it, and reads a
partition back in offset order when it becomes that partition's coordinator.
The broker implements the protocol over the real replicated partition logs
(acks=all, so a commit that was answered survives a coordinator failover);
`InMemoryOffsetsTopic` is the test double, with failure injection.

Transactional offset commits (KIP-98 TxnOffsetCommit) are appended with the
producer's id and epoch as a transactional batch, and read back as
`TxnRecord`s; the COMMIT/ABORT marker the transaction coordinator writes to
the partition comes back as a `TxnMarker`, so a loading coordinator applies
only committed transactional offsets.

Keys and values are Kafka's own layouts (see `records`); a value of None is a
tombstone. A failed append raises `OffsetsTopicError(ErrorCode...)` with the
partition-level code (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, ...); the
coordinator maps it to the client-facing code the way Kafka does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple, Protocol, runtime_checkable

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.errors import OffsetsTopicError
from tinystream.broker.groups.records import decode_key, decode_value

__all__ = ["InMemoryOffsetsTopic", "LogEntry", "OffsetsTopic", "OffsetsTopicError", "Record", "TxnMarker", "TxnRecord"]

Record = tuple[bytes, bytes | None]


class TxnRecord(NamedTuple):
    """A record written inside producer `producer_id`'s transaction (TxnOffsetCommit)."""

    key: bytes
    value: bytes | None
    producer_id: int


class TxnMarker(NamedTuple):
    """The end of producer `producer_id`'s transaction in this partition."""

    producer_id: int
    commit: bool


LogEntry = Record | TxnRecord | TxnMarker


@runtime_checkable
class OffsetsTopic(Protocol):
    """The __consumer_offsets partitions as the coordinator sees them."""

    async def append(
        self, partition: int, records: list[Record], *, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        """Write `records` as one batch to `partition`; return once it is durable.

        With a producer id the batch is transactional (TxnOffsetCommit).

        Raise OffsetsTopicError(code) on failure (e.g. NOT_ENOUGH_REPLICAS,
        NOT_LEADER_OR_FOLLOWER when this broker lost the partition).
        Batches must land in the log in the order the calls were made: take
        the log position before the first await (the coordinator starts
        appends in the order its state changed, e.g. tombstones after a commit).
        """
        ...

    def read(self, partition: int) -> Iterable[LogEntry]:
        """Every record (key, value) of `partition` in offset order, for loading; records of
        transactions as TxnRecord, transaction markers as TxnMarker."""
        ...


class InMemoryOffsetsTopic:
    """An OffsetsTopic kept in lists, for tests.

    `fail_next(code, count=1)` makes the next `count` appends raise
    OffsetsTopicError(code) without writing anything; `appends` counts the
    batches written per partition.
    """

    def __init__(self) -> None:
        self._logs: dict[int, list[Record]] = defaultdict(list)
        self._entries: dict[int, list[LogEntry]] = defaultdict(list)
        self._failures: list[ErrorCode] = []
        self.appends: dict[int, int] = defaultdict(int)

    async def append(
        self, partition: int, records: list[Record], *, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        if self._failures:
            raise OffsetsTopicError(self._failures.pop(0))
        for key, value in records:
            if not isinstance(key, bytes) or not (value is None or isinstance(value, bytes)):
                raise TypeError("records are (bytes, bytes | None) pairs")
        self._logs[partition].extend(records)
        if producer_id >= 0:
            self._entries[partition].extend(TxnRecord(k, v, producer_id) for k, v in records)
        else:
            self._entries[partition].extend(records)
        self.appends[partition] += 1

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """What the transaction coordinator's marker leaves in the partition."""
        self._entries[partition].append(TxnMarker(producer_id, commit))

    def read(self, partition: int) -> Iterable[LogEntry]:
        return list(self._entries.get(partition, ()))

    def fail_next(self, error: ErrorCode, count: int = 1) -> None:
        self._failures.extend([error] * count)

    def records(self, partition: int) -> list[Record]:
        """The raw records of one partition (a copy)."""
        return list(self._logs.get(partition, ()))

    def decoded(self, partition: int) -> list[tuple[object, object]]:
        """The records of one partition decoded with the codec (for assertions)."""
        out: list[tuple[object, object]] = []
        for key, value in self._logs.get(partition, ()):
            k = decode_key(key)
            out.append((k, decode_value(k, value)))
        return out
