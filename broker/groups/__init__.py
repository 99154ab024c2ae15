"""Consumer group coordinator (Kafka's classic protocol and KIP-848's): tinystream.broker.groups.

Layers, bottom up. Pure (no asyncio, time passed in):
- `records`: the __consumer_offsets key/value codec (Kafka's byte layouts).
- `persistence`: the OffsetsTopic protocol the broker implements, and an in-memory one.
- `group`: the classic group state machine.
- `assignors`: KIP-848's server-side assignors (`uniform`, `range`).
- `consumer_group`: the KIP-848 consumer group (epochs, target assignment, reconciliation).
- `consumer_persistence`: its member, epoch and assignment records, and rebuilding it on load.
- `offsets`: committed offsets: what a commit keeps, its records, OffsetFetch, open transactions.
- `replay`: one __consumer_offsets partition's log folded into groups and offsets to load.
asyncio, one concern each (Kafka's new group coordinator draws the same lines):
- `runtime`: which partitions are coordinated here, the request gate, ordered appends.
- `group_manager`: membership and group metadata (Kafka's GroupMetadataManager), with
  `parking` (JoinGroup / SyncGroup requests waiting for the rebalance) and per-group timers.
- `offset_manager`: OffsetCommit, TxnOffsetCommit and markers, OffsetFetch (OffsetMetadataManager).
- `coordinator`: GroupCoordinator, the facade the broker calls; loads and unloads partitions.
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
