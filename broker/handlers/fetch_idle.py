"""An incremental fetch's idle partitions: those whose answer would be empty and left out (KIP-227).

A consumer's session over 10,000 partitions sends incremental fetches that
name nothing; most of its partitions have no news. Reading each one through
the gates and the replica manager only to drop it from the answer cost ~10 us
a partition (`tinystream bench fetch-sessions --peer kafka --partitions
10000`: 3.4x Kafka's CPU). `split` looks at each partition's live state
instead, with no allocation for an idle one, and sends on only the others.

A partition is idle when reading it here now would give no records, no error,
no divergence, and the same high watermark, last stable offset and log start
offset as the session last sent (context.py's `_must_answer` would leave it
out): it is hosted and led here, its leader epoch check passes, the
fetcher's offset is at the end it may read to, and the consumer's gates
(READ, topic id) pass. Anything else goes through the full read, which
decides it as before. The state is read at every fetch, so nothing has to
report changes: a partition whose high watermark moved without records is
not idle, and is answered.

Followers' incremental fetches are split too: with one consumer group a
follower's session holds the 50 __consumer_offsets partitions, most of them
idle, read on every fetch for nothing (less than 1% of a broker's CPU under
a replicated load, docs/benchmarks.md). A follower's partition is idle at the leader's log end
(not the high watermark), and only while the follower is still one of its
replicas. Its fetch also moves state: the handler records the follower's
position on its idle partitions too (`ReplicaManager.record_follower`), so
the caught-up times that keep it in the ISR stay right. A consumer's fetch
is split only on a broker that sends no reads to followers: a preferred
read replica (KIP-392) would answer a partition even when idle. A long
poll that finds nothing in the others waits on every partition and, once
woken, reads the idle ones too (`ReplicaManager.fetch`'s `later`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import CachedPartition, PartitionRequest
from tinystream.broker.handlers import fetch_gates
from tinystream.broker.storage.topic_partition import TopicPartition


class IdleReplica(fetch_gates.Replica, Protocol):
    """What `split` reads of a partition (`replication.Partition`)."""

    @property
    def leader_epoch(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...


Pair = tuple[TopicPartition, PartitionRequest]


def eligible(fetcher: fetch_gates.Fetcher, *, redirects: bool) -> bool:
    """Split a follower's fetch, and a consumer's on a broker that sends no reads to followers; never an
    unproven replica id's (its gates refuse every partition). The caller splits only incremental fetches."""
    if fetcher.peer:
        return True
    return fetcher.replica_id < 0 and not redirects


def split(
    fetcher: fetch_gates.Fetcher,
    partitions: Mapping[TopicPartition, CachedPartition],
    replica: Callable[[TopicPartition], IdleReplica | None],
    *,
    read_committed: bool,
) -> tuple[list[Pair], list[TopicPartition]]:
    """(partitions to read, idle partitions), both in the session's order."""
    busy: list[Pair] = []
    idle: list[TopicPartition] = []
    follower = fetcher.replica_id if fetcher.peer else -1
    # The gates but a follower's replica set look at (topic, topic id) alone: decided once per run of a
    # session's partitions that share them (a topic's partitions sit together), so an idle partition
    # allocates nothing. `_idle` checks the replica set.
    topic: str | None = None
    topic_id: object = None
    open_ = False
    for tp, cached in partitions.items():
        request = cached.request
        if tp.topic != topic or request.topic_id != topic_id:
            topic, topic_id = tp.topic, request.topic_id
            open_ = fetch_gates.refusal(fetcher, tp, request, None) is None
        partition = replica(tp)
        if open_ and partition is not None and _idle(request, cached, partition, read_committed, follower):
            idle.append(tp)
        else:
            busy.append((tp, request))
    return busy, idle


def _idle(request: PartitionRequest, cached: CachedPartition, partition: IdleReplica, read_committed: bool,
          follower: int) -> bool:
    """Reading this partition now would answer nothing new (see the module docstring); `follower`: the
    fetching replica's id, -1 for a consumer."""
    if not partition.is_leader:
        return False
    hw = partition.high_watermark
    if cached.high_watermark != hw:
        return False
    lso = partition.last_stable_offset
    if follower >= 0:
        end = partition.log_end_offset
        if follower not in partition.state.replicas:
            return False  # the read answers NOT_LEADER_OR_FOLLOWER (fetch_gates.listed_replica)
    else:
        end = lso if read_committed else hw
    if cached.last_stable_offset != lso or request.fetch_offset != end:
        return False
    start = partition.log_start_offset
    if cached.log_start_offset != start or start > request.fetch_offset:
        return False
    epoch = request.current_leader_epoch
    if epoch >= 0 and partition.check_leader_epoch(epoch) != ErrorCode.none:
        return False
    last = request.last_fetched_epoch
    return last < 0 or last == partition.leader_epoch or fetch_gates.diverging_epoch(request, partition) is None
