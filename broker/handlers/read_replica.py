"""Fetch's preferred read replica (KIP-392): where the leader sends a consumer to read a partition.

A consumer's Fetch v11+ carries its `rack_id` (client.rack). For each
partition this broker leads, at the epoch the consumer names, the broker's
`replica.selector.class` (replication/replica_selector.py) picks among the
leader and the in-sync followers that hold the fetch offset and that the
client can reach on its listener. When it picks a follower, the partition is
answered at once with no records and `preferred_read_replica` set to that
follower, as Kafka's ReplicaManager.readFromLog skips the read; the consumer
fetches from the follower until its next metadata refresh or an error.

With the leader selector (the default) nothing is looked at: the common case
costs one comparison per request.
"""

from __future__ import annotations

from collections.abc import Mapping

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.replication.partition import Partition
from tinystream.broker.replication.replica_manager import FetchedPartition, FetchPartition
from tinystream.broker.replication.replica_selector import (
    ReplicaView,
    Selector,
    leader_selector,
    preferred_read_replica,
    selector_for,
)
from tinystream.broker.storage.topic_partition import TopicPartition

#: Fetch v11 added rack_id; older consumers read from the leader only (Kafka's FetchParams.fetchOnlyLeader).
FROM_FOLLOWER_VERSION = 11


def may_read_followers(version: int, peer: bool) -> bool:
    """Whether this Fetch may read partitions this broker follows: a consumer's, v11+ (KAFKA-9004)."""
    return not peer and version >= FROM_FOLLOWER_VERSION


def redirects_reads(ctx: BrokerContext) -> bool:
    """Whether this broker may send a consumer to a follower (a selector other than the leader's)."""
    return selector_for(ctx.settings.replica_selector_class) is not leader_selector


def redirect(ctx: BrokerContext, call: Call, requests: list[FetchPartition],
             answered: dict[TopicPartition, FetchedPartition]) -> dict[TopicPartition, int]:
    """tp -> preferred replica for each partition to read elsewhere; those are added to `answered`
    (no records, this leader's offsets)."""
    selector = selector_for(ctx.settings.replica_selector_class)
    if selector is leader_selector:
        return {}
    rack = getattr(call.body, "rack_id", "") or ""
    now = ctx.replicas.clock()
    preferred: dict[TopicPartition, int] = {}
    for r in requests:
        partition = ctx.replicas.get(r.tp)
        if r.tp in answered or partition is None or not partition.is_leader:
            continue
        if partition.check_leader_epoch(r.current_leader_epoch) != ErrorCode.none:
            continue  # the read answers the epoch error
        chosen = _choose(ctx, call, selector, partition, r.fetch_offset, rack, now)
        if chosen >= 0:
            preferred[r.tp] = chosen
            answered[r.tp] = FetchedPartition(r.tp, ErrorCode.none, partition.high_watermark,
                                              partition.last_stable_offset, partition.log_start_offset, b"")
    return preferred


def _choose(ctx: BrokerContext, call: Call, selector: Selector, partition: Partition, offset: int, rack: str,
            now_ms: int) -> int:
    racks = _reachable_racks(ctx, call, partition.state.replicas)
    if ctx.cluster.broker_id not in racks:
        return -1
    leader = ReplicaView(ctx.cluster.broker_id, racks[ctx.cluster.broker_id], partition.log_end_offset, 0)
    followers = [ReplicaView(replica, racks[replica], leo, lag)
                 for replica, leo, lag in partition.in_sync_holding(offset, now_ms) if replica in racks]
    return preferred_read_replica(selector, leader, followers, rack)


def _reachable_racks(ctx: BrokerContext, call: Call, replicas: tuple[int, ...]) -> Mapping[int, str | None]:
    """broker id -> rack of each replica live on the client's listener (Kafka drops those without one)."""
    out: dict[int, str | None] = {}
    for replica in replicas:
        endpoint = ctx.cluster.broker(replica, call.client.listener)
        if endpoint is not None:
            out[replica] = endpoint.rack
    return out
