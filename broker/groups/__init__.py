"""Consumer group coordinator (Kafka's classic protocol): tinystream.broker.groups.

Layers, bottom up:
- `records`: the __consumer_offsets key/value codec (Kafka's byte layouts).
- `persistence`: the OffsetsTopic protocol the broker implements, and an in-memory one.
- `group`: the pure group state machine (no asyncio, time passed in).
- `coordinator`: GroupCoordinator, the asyncio layer: parked JoinGroup and
  SyncGroup requests, timers, persistence, partition load/unload.
"""

from tinystream.broker.groups.coordinator import GroupCoordinator, partition_for_group
from tinystream.broker.groups.errors import OffsetsTopicError
from tinystream.broker.groups.persistence import InMemoryOffsetsTopic, OffsetsTopic
from tinystream.broker.groups.results import (
    DescribedMember,
    FetchOffsetsResult,
    GroupDescription,
    GroupListing,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeftMember,
    OffsetAndMetadata,
    SyncGroupResult,
)

__all__ = [
    "DescribedMember",
    "FetchOffsetsResult",
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "InMemoryOffsetsTopic",
    "JoinGroupMember",
    "JoinGroupResult",
    "LeaveGroupResult",
    "LeftMember",
    "OffsetAndMetadata",
    "OffsetsTopic",
    "OffsetsTopicError",
    "SyncGroupResult",
    "partition_for_group",
]
