"""A partition's name: topic and index, as `<topic>-<partition>` on disk and in logs.

Kafka keeps `TopicPartition` in its common module; here it sits at the bottom
of the broker (storage names partition directories by it) so every layer above
can import it without reaching into replication.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
