"""Producer ids for InitProducerId, never handed out twice, even across restarts.

Ids are taken from blocks (Kafka's ProducerIdManager, KIP-730): before the
first id of a block is given out, the block's end is written durably to
`<log dir>/producer-ids.json`; after a restart allocation resumes at that end.
A crash wastes at most the rest of one block, never reuses an id.

With several brokers each needs a disjoint range; that is the controller's job
(an AllocateProducerIds call returning a block). `BlockSource` is the seam: the
local file is one source, a controller client will be another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import orjson

from tinystream.broker.atomic_file import write_atomically

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class BlockSource(Protocol):
    def next_block(self) -> tuple[int, int]:
        """A fresh [start, end) range nobody else will use."""


class FileBlockSource:
    """Blocks recorded in one JSON file (single broker / local mode)."""

    FILE_NAME = "producer-ids.json"

    def __init__(self, directory: Path, block_size: int = BLOCK_SIZE) -> None:
        self._path = Path(directory) / self.FILE_NAME
        self._block_size = block_size

    def next_block(self) -> tuple[int, int]:
        start = 0
        if self._path.exists():
            start = int(orjson.loads(self._path.read_bytes())["next_block_start"])
        end = start + self._block_size
        write_atomically(self._path, orjson.dumps({"version": 1, "next_block_start": end}))
        return start, end


class ProducerIdManager:
    """Hands out producer ids from blocks of a BlockSource."""

    def __init__(self, source: BlockSource) -> None:
        self._source = source
        self._next = 0
        self._end = 0  # empty: the first call fetches a block

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next, self._end = self._source.next_block()
        producer_id = self._next
        self._next += 1
        return producer_id
