"""Producer ids for InitProducerId, never handed out twice, across restarts and brokers.

Ids are taken from blocks (Kafka's ProducerIdManager, KIP-730). Where a block
comes from is the `BlockSource` seam:

- `FileBlockSource` (a single broker, no controller): before the first id of
  a block is given out, the block's end is written durably to
  `<log dir>/producer-ids.json`; after a restart allocation resumes there.
- `ControllerBlockSource` (`controller.url` set): the controller hands out
  disjoint blocks (AllocateProducerIds, `POST /v1/producer-ids`) and saves
  its counter before answering, so two brokers never share an id and a
  controller restart never repeats one. Per-broker files cannot do that:
  every broker would start at 0 and idempotent producers of two brokers
  would collide (OUT_OF_ORDER_SEQUENCE_NUMBER).

Either way a crash wastes at most the rest of one block, never reuses an id.
A source that cannot give a block raises `ProducerIdsUnavailable`;
InitProducerId answers a retriable error and the client tries again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import orjson

from tinystream.atomic_file import write_atomically

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class ProducerIdsUnavailable(Exception):
    """No block could be obtained now (controller unreachable or refusing); retry later."""


class BlockSource(Protocol):
    async def next_block(self) -> tuple[int, int]:
        """A fresh [start, end) range nobody else will use."""


class FileBlockSource:
    """Blocks recorded in one JSON file (single broker / local mode)."""

    FILE_NAME = "producer-ids.json"

    def __init__(self, directory: Path, block_size: int = BLOCK_SIZE) -> None:
        self._path = Path(directory) / self.FILE_NAME
        self._block_size = block_size

    async def next_block(self) -> tuple[int, int]:
        start = 0
        if self._path.exists():
            start = int(orjson.loads(self._path.read_bytes())["next_block_start"])
        end = start + self._block_size
        write_atomically(self._path, orjson.dumps({"version": 1, "next_block_start": end}), parents=True)
        return start, end


class ControllerBlockSource:
    """Blocks from the controller (KIP-730). `allocate` returns (start, length)
    or raises `ProducerIdsUnavailable`; the control plane supplies it, with the
    broker id and the current broker epoch (see ControllerSession.allocate_producer_ids)."""

    def __init__(self, allocate: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._allocate = allocate

    async def next_block(self) -> tuple[int, int]:
        start, length = await self._allocate()
        if length <= 0:
            raise ProducerIdsUnavailable(f"the controller gave an empty block at {start}")
        return start, start + length


class ProducerIdManager:
    """Hands out producer ids from blocks of a BlockSource; one block fetch at a time."""

    def __init__(self, source: BlockSource) -> None:
        self._source = source
        self._next = 0
        self._end = 0  # empty: the first call fetches a block
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:  # concurrent InitProducerIds must not fetch two blocks for one
            if self._next >= self._end:
                self._next, self._end = await self._source.next_block()
            producer_id = self._next
            self._next += 1
            return producer_id
