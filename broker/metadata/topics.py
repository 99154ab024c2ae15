"""The broker's topic metadata: names, ids, partition counts, config overrides.

Kept in `<first log dir>/topics.json`, rewritten atomically on every change
(write a temporary file, fsync, rename, fsync the directory), so a crash
leaves either the old or the new file, never half of one. With a controller
(replication), the controller's metadata image becomes the source and this
store its local cache; the shape stays the same.

Name rules are Kafka's (org.apache.kafka.common.internals.Topic): 1-249
characters of [a-zA-Z0-9._-], not "." or "..", and no two topics that differ
only by '.' versus '_' (their metric names would collide).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson

from tinystream.atomic_file import write_atomically

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")  # fullmatch: "$" would let a name end in a newline
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


class InvalidTopicName(ValueError):
    pass


def validate_topic_name(name: str | None) -> None:
    """Raise InvalidTopicName naming the rule broken."""
    if not name:
        raise InvalidTopicName("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicName(f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicName(f"topic name is longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicName(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


def collision_key(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    topic_id: uuid.UUID
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)  # overrides only, Kafka names

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "id": str(self.topic_id),
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "configs": dict(self.configs),
        }

    @classmethod
    def from_json(cls, data: dict) -> TopicSpec:
        return cls(
            name=data["name"],
            topic_id=uuid.UUID(data["id"]),
            partitions=int(data["partitions"]),
            replication_factor=int(data["replication_factor"]),
            configs={str(k): str(v) for k, v in data.get("configs", {}).items()},
        )


class TopicStore:
    """Topic specs by name (and by id), persisted on every change."""

    FILE_NAME = "topics.json"
    FORMAT_VERSION = 1

    def __init__(self, directory: Path) -> None:
        self._path = Path(directory) / self.FILE_NAME
        self._topics: dict[str, TopicSpec] = {}
        self._by_id: dict[uuid.UUID, str] = {}
        self._collisions: dict[str, str] = {}
        self._load()

    def _load(self) -> None:
        if not self._path.exists():
            return
        data = orjson.loads(self._path.read_bytes())
        for item in data.get("topics", []):
            self._index(TopicSpec.from_json(item))

    def _index(self, spec: TopicSpec) -> None:
        self._topics[spec.name] = spec
        self._by_id[spec.topic_id] = spec.name
        self._collisions[collision_key(spec.name)] = spec.name

    def _save(self) -> None:
        payload = orjson.dumps(
            {"version": self.FORMAT_VERSION, "topics": [s.to_json() for s in self._topics.values()]},
            option=orjson.OPT_INDENT_2,
        )
        write_atomically(self._path, payload, parents=True)

    # -- queries ----------------------------------------------------------------

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __iter__(self) -> Iterator[TopicSpec]:
        return iter(list(self._topics.values()))

    def __len__(self) -> int:
        return len(self._topics)

    def get(self, name: str) -> TopicSpec | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicSpec | None:
        name = self._by_id.get(topic_id)
        return self._topics.get(name) if name is not None else None

    def colliding(self, name: str) -> str | None:
        """An existing topic whose name differs from `name` only by '.' vs '_'."""
        other = self._collisions.get(collision_key(name))
        return other if other is not None and other != name else None

    # -- changes ----------------------------------------------------------------

    def add(self, spec: TopicSpec) -> None:
        if spec.name in self._topics:
            raise KeyError(f"topic {spec.name!r} exists")
        self._index(spec)
        self._save()

    def remove(self, name: str) -> TopicSpec:
        spec = self._topics.pop(name)
        self._by_id.pop(spec.topic_id, None)
        self._collisions.pop(collision_key(name), None)
        self._save()
        return spec

    def update(self, name: str, **changes: object) -> TopicSpec:
        spec = replace(self._topics[name], **changes)
        self._topics[name] = spec
        self._save()
        return spec

