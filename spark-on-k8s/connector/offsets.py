"""Topic-partitions, offset ranges, and offsets as deterministic JSON.

Spark keeps a streaming source's offsets in the checkpoint as JSON and decides
whether a micro-batch has new data by comparing the JSON text of its start and
end offsets (the Python runner sends `json.dumps(offset)`). Two dicts holding
the same offsets must therefore serialize to the same text, so every offset
dict built here has one canonical key order: topics sorted by name, partitions
sorted by number. The layout is the one Spark's built-in Kafka source uses,

    {"events": {"0": 23, "1": 17}, "orders": {"0": 5}}

so a checkpoint reads the same to a person who knows that source. Partition
keys are strings because JSON object keys are.

In startingOffsets / endingOffsets JSON, -2 means earliest and -1 latest
(Spark's convention, from Kafka's ListOffsets timestamps -2 / -1).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tinystream.spark.errors import InvalidOptionError

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets [from_offset, until_offset) of one topic-partition: one Spark task's work."""

    tp: TopicPartition
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(self.until_offset - self.from_offset, 0)


PartitionOffsets = Mapping[TopicPartition, int]


def offsets_to_json(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """Offsets as a JSON-ready dict in canonical order (topics by name, partitions by number)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, object]] | str) -> dict[TopicPartition, int]:
    """Parse `{"topic": {"0": 23}}` (a dict or its JSON text) into {TopicPartition: offset}."""
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        raise InvalidOptionError(f"expected a JSON object like {{\"topic\": {{\"0\": 23}}}}, got {value!r}")
    out: dict[TopicPartition, int] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, Mapping):
            raise InvalidOptionError(f"offsets of topic {topic!r} must be an object of partition -> offset")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except (TypeError, ValueError):
                raise InvalidOptionError(f"partition {partition!r} of topic {topic!r} is not a number") from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise InvalidOptionError(f"offset of {topic}-{partition} must be an integer, got {offset!r}")
            out[TopicPartition(str(topic), number)] = offset
    return out


def canonical_json(offsets: PartitionOffsets) -> str:
    """The exact text Spark would store for these offsets."""
    return json.dumps(offsets_to_json(offsets))


def assignment_from_json(value: str) -> tuple[TopicPartition, ...]:
    """Parse the `assign` option: `{"topicA": [0, 1], "topicB": [2, 4]}`."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidOptionError(f'option "assign" is not valid JSON: {exc}') from exc
    if not isinstance(data, Mapping) or not data:
        raise InvalidOptionError('option "assign" must be a non-empty JSON object like {"topicA": [0, 1]}')
    tps: set[TopicPartition] = set()
    for topic, partitions in data.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise InvalidOptionError(f'option "assign": partitions of {topic!r} must be a list of numbers >= 0')
        tps.update(TopicPartition(str(topic), p) for p in partitions)
    return tuple(sorted(tps))


def topics_of(tps: Iterable[TopicPartition]) -> tuple[str, ...]:
    return tuple(sorted({tp.topic for tp in tps}))
