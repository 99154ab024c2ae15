"""Fetch's gates: the checks that answer a partition before its log is read, in Kafka's order.

`handle_fetch` decides who fetches once per request (`Fetcher`), then runs
`GATES` (those that can refuse that fetcher, `gates_for`) on each partition
of the fetch context; the first gate that refuses
answers the partition with its error, and nothing is read for it:

1. `trusted_replica_id`: a replica_id >= 0 is believed only from a proven
   peer broker (CVE-2018-1288); anyone else claiming one is refused
   TOPIC_AUTHORIZATION_FAILED, as Kafka answers a fetcher without
   CLUSTER_ACTION.
2. `may_read`: a consumer needs READ on the topic (TOPIC_AUTHORIZATION_FAILED);
   a peer's CLUSTER_ACTION covers every topic.
3. `known_topic_id`: by id (v13+, KIP-516) the id must name the topic of that
   name here now, else UNKNOWN_TOPIC_ID (also after a delete and re-create).
4. `listed_replica`: a follower must be in the partition's replica set
   (NOT_LEADER_OR_FOLLOWER).

A partition not hosted here passes the gates: the read answers
UNKNOWN_TOPIC_OR_PARTITION. After the gates, `diverging_epoch` (v12,
KIP-595) is not a refusal: it answers at once with no records and the
epoch and end offset the fetcher must truncate to.

A gate is `(fetcher, tp, request, replica) -> ErrorCode | None` (None: go
on); gates allocate nothing on the way through. No I/O here: the replica
is read through `Replica`, and the topic store through `Fetcher.topic`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import PartitionRequest
from tinystream.broker.storage.topic_partition import TopicPartition


class _NamedTopic(Protocol):
    @property
    def topic_id(self) -> UUID | None: ...


class _ReplicaSet(Protocol):
    @property
    def replicas(self) -> tuple[int, ...]: ...


class Replica(Protocol):
    """What the gates read of this broker's replica of a partition (`replication.Partition`)."""

    @property
    def state(self) -> _ReplicaSet: ...

    @property
    def is_leader(self) -> bool: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True)
class Fetcher:
    """Who fetches, decided once per request, and the gates that can refuse something of theirs."""

    replica_id: int  #: as the request says; believed only when `peer`
    peer: bool  #: a proven broker of this cluster (inter-broker listener, broker principal, CLUSTER_ACTION)
    may_read: Callable[[str], bool]  #: topic name -> READ allowed (cached per request)
    topic: Callable[[str], _NamedTopic | None]  #: the topic of that name here now, or None
    gates: tuple[Gate, ...]  #: `gates_for(replica_id, peer)`

    @classmethod
    def of(cls, *, replica_id: int, peer: bool, may_read: Callable[[str], bool],
           topic: Callable[[str], _NamedTopic | None]) -> Fetcher:
        return cls(replica_id, peer, may_read, topic, gates_for(replica_id, peer))


Gate = Callable[[Fetcher, TopicPartition, PartitionRequest, "Replica | None"], "ErrorCode | None"]


def trusted_replica_id(fetcher: Fetcher, tp: TopicPartition, request: PartitionRequest,
                       replica: Replica | None) -> ErrorCode | None:
    """A follower's fetch moves the high watermark: a replica id from anyone but a peer is refused."""
    if fetcher.replica_id >= 0 and not fetcher.peer:
        return ErrorCode.topic_authorization_failed
    return None


def may_read(fetcher: Fetcher, tp: TopicPartition, request: PartitionRequest,
             replica: Replica | None) -> ErrorCode | None:
    """A consumer needs READ on the topic (authz.RULES); a peer was checked for CLUSTER_ACTION instead."""
    if not fetcher.peer and not fetcher.may_read(tp.topic):
        return ErrorCode.topic_authorization_failed
    return None


def known_topic_id(fetcher: Fetcher, tp: TopicPartition, request: PartitionRequest,
                   replica: Replica | None) -> ErrorCode | None:
    """By id (v13+): the id names no topic, or the topic of that name was deleted and created again since
    the session cached it: UNKNOWN_TOPIC_ID, as Kafka answers. By name there is nothing to check."""
    if request.topic_id is None:
        return None
    spec = fetcher.topic(tp.topic)
    if spec is None or spec.topic_id != request.topic_id:
        return ErrorCode.unknown_topic_id
    return None


def listed_replica(fetcher: Fetcher, tp: TopicPartition, request: PartitionRequest,
                   replica: Replica | None) -> ErrorCode | None:
    """A follower fetches only partitions it is a replica of (Kafka: NOT_LEADER_OR_FOLLOWER)."""
    if replica is not None and fetcher.peer and fetcher.replica_id not in replica.state.replicas:
        return ErrorCode.not_leader_or_follower
    return None


#: In Kafka's order; a new check is a new gate here, not a branch in the handler.
GATES: tuple[Gate, ...] = (trusted_replica_id, may_read, known_topic_id, listed_replica)

# Each kind of fetcher runs only the gates that can refuse it, in GATES' order: a peer is never refused READ,
# a consumer is in no replica set's way, and an unproven replica id is refused before anything else. The
# others would pass every partition. timeit over 1,000 partitions (2 busy cores): the inline checks these
# gates replaced ~0.4 us a partition, all four gates 1.5-2.5 us, the chosen ones ~1.0 us.
# tests/broker/handlers/test_fetch_gates.py holds the kinds against all of GATES.
_PEER_GATES: tuple[Gate, ...] = (known_topic_id, listed_replica)
_UNTRUSTED_GATES: tuple[Gate, ...] = (trusted_replica_id,)
_CONSUMER_GATES: tuple[Gate, ...] = (may_read, known_topic_id)


def gates_for(replica_id: int, peer: bool) -> tuple[Gate, ...]:
    """The gates that can refuse a partition of this fetcher, in GATES' order."""
    if peer:
        return _PEER_GATES
    return _UNTRUSTED_GATES if replica_id >= 0 else _CONSUMER_GATES


def refusal(fetcher: Fetcher, tp: TopicPartition, request: PartitionRequest, replica: Replica | None) -> ErrorCode | None:
    """The first gate's error, or None when every gate lets the partition through to the read."""
    for gate in fetcher.gates:
        error = gate(fetcher, tp, request, replica)
        if error is not None:
            return error
    return None


def diverging_epoch(request: PartitionRequest, replica: Replica) -> tuple[int, int] | None:
    """(epoch, end offset) when the fetcher's log diverged from the leader's (KIP-595): its last fetched
    epoch ends here before its fetch offset, or is not known here; None to read as usual. Only a
    leader answers this; the answer carries no records, so the fetcher truncates first."""
    last_epoch = request.last_fetched_epoch
    if last_epoch < 0 or not replica.is_leader:
        return None
    found = replica.end_offset_for_epoch(last_epoch)
    epoch, end = found
    if epoch < last_epoch or end < request.fetch_offset:
        return found
    return None
