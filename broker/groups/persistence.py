"""How the coordinator reaches the __consumer_offsets topic.

The coordinator never touches logs: it asks an `OffsetsTopic` to append one
batch of (key, value) records to a partition and awaits it, and reads a
partition back in offset order when it becomes that partition's coordinator.
The broker implements the protocol over the real replicated partition logs
(acks=all, so a commit that was answered survives a coordinator failover);
`InMemoryOffsetsTopic` is the test double, with failure injection.

Keys and values are Kafka's own layouts (see `records`); a value of None is a
tombstone. A failed append raises `OffsetsTopicError(ErrorCode...)` with the
partition-level code (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, ...); the
coordinator maps it to the client-facing code the way Kafka does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from kio.schema.errors import ErrorCode

from tinystream.broker.groups.errors import OffsetsTopicError
from tinystream.broker.groups.records import decode_key, decode_value

__all__ = ["InMemoryOffsetsTopic", "OffsetsTopic", "OffsetsTopicError", "Record"]

Record = tuple[bytes, bytes | None]


@runtime_checkable
class OffsetsTopic(Protocol):
    """The __consumer_offsets partitions as the coordinator sees them."""

    async def append(self, partition: int, records: list[Record]) -> None:
        """Write `records` as one batch to `partition`; return once it is durable.

        Raise OffsetsTopicError(code) on failure (e.g. NOT_ENOUGH_REPLICAS,
        NOT_LEADER_OR_FOLLOWER when this broker lost the partition).
        Batches must land in the log in the order the calls were made: take
        the log position before the first await (the coordinator starts
        appends in the order its state changed, e.g. tombstones after a commit).
        """
        ...

    def read(self, partition: int) -> Iterable[Record]:
        """Every record (key, value) of `partition` in offset order, for loading."""
        ...


class InMemoryOffsetsTopic:
    """An OffsetsTopic kept in lists, for tests.

    `fail_next(code, count=1)` makes the next `count` appends raise
    OffsetsTopicError(code) without writing anything; `appends` counts the
    batches written per partition.
    """

    def __init__(self) -> None:
        self._logs: dict[int, list[Record]] = defaultdict(list)
        self._failures: list[ErrorCode] = []
        self.appends: dict[int, int] = defaultdict(int)

    async def append(self, partition: int, records: list[Record]) -> None:
        if self._failures:
            raise OffsetsTopicError(self._failures.pop(0))
        for key, value in records:
            if not isinstance(key, bytes) or not (value is None or isinstance(value, bytes)):
                raise TypeError("records are (bytes, bytes | None) pairs")
        self._logs[partition].extend(records)
        self.appends[partition] += 1

    def read(self, partition: int) -> Iterable[Record]:
        return list(self._logs.get(partition, ()))

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
