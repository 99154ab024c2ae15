"""The high-watermark checkpoint: every hosted partition's HW, in one file.

Kafka's `replication-offset-checkpoint` format, in the first log dir:

    0                 <- format version
    2                 <- number of entries
    orders 0 1234     <- topic, partition, high watermark
    orders 1 977

Written atomically (temporary file, fsync, rename; `tinystream.atomic_file`)
periodically and at shutdown, and read once at start, so a restarted broker
starts each partition from its last known HW instead of its log start and
never lets consumers see less than before (Kafka's ReplicaManager does the
same). A missing or unreadable file means "no HWs known": the HW then
rises again from followers' fetches or the leader's answers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from tinystream.atomic_file import write_atomically
from tinystream.broker.storage.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FILE_NAME = "replication-offset-checkpoint"
VERSION = 0


class HighWatermarkCheckpoint:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE_NAME
        self._last: dict[TopicPartition, int] | None = None

    def read(self) -> dict[TopicPartition, int]:
        try:
            lines = self.path.read_text("utf-8").splitlines()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            log.warning("ignoring %s: %s", self.path, exc)
            return {}
        try:
            if int(lines[0]) != VERSION:
                raise ValueError(f"unknown version {lines[0]!r}")
            count = int(lines[1])
            out: dict[TopicPartition, int] = {}
            for line in lines[2 : 2 + count]:
                topic, partition, hw = line.rsplit(" ", 2)
                out[TopicPartition(topic, int(partition))] = int(hw)
            if len(out) != count:
                raise ValueError(f"{len(out)} entries, header says {count}")
            return out
        except (IndexError, ValueError) as exc:
            log.warning("ignoring corrupt %s: %s", self.path, exc)
            return {}

    def write(self, hws: Mapping[TopicPartition, int]) -> bool:
        """Write if anything changed since the last write; True if written."""
        current = dict(hws)
        if current == self._last:
            return False
        lines = [str(VERSION), str(len(current))]
        lines += [f"{tp.topic} {tp.partition} {hw}" for tp, hw in sorted(current.items())]
        write_atomically(self.path, ("\n".join(lines) + "\n").encode("utf-8"), parents=True)
        self._last = current
        return True
