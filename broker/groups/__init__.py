"""Consumer group coordinator (Kafka's classic protocol and KIP-848's): tinystream.broker.groups.

Layers, bottom up:
- `records`: the __consumer_offsets key/value codec (Kafka's byte layouts).
- `persistence`: the OffsetsTopic protocol the broker implements, and an in-memory one.
- `group`: the pure classic group state machine (no asyncio, time passed in).
- `assignors`: KIP-848's server-side assignors (`uniform`, `range`), pure functions.
- `consumer_group`: the pure KIP-848 consumer group (epochs, target assignment, reconciliation).
- `consumer_persistence`: its member, epoch and assignment records, and rebuilding it on load.
- `coordinator`: GroupCoordinator, the asyncio layer: parked JoinGroup and
  SyncGroup requests, ConsumerGroupHeartbeat, timers, persistence, partition load/unload.
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
