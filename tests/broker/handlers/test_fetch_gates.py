"""Fetch's gates without a broker: each refuses what it should, lets through the rest, and the first refusal wins."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import PartitionRequest
from tinystream.broker.handlers import fetch_gates
from tinystream.broker.handlers.fetch_gates import Fetcher
from tinystream.broker.storage.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
TOPIC_ID = uuid.uuid4()


@dataclass
class Topic:
    topic_id: uuid.UUID | None


@dataclass
class State:
    replicas: tuple[int, ...]


@dataclass
class Replica:
    """A leader whose epochs end where `epochs` says: epoch -> end offset."""

    state: State
    is_leader: bool = True
    epochs: tuple[tuple[int, int], ...] = ((0, 10), (2, 25))

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        known = [(e, end) for e, end in self.epochs if e <= epoch]
        return known[-1] if known else (-1, -1)


def fetcher(*, replica_id: int = -1, peer: bool = False, readable: bool = True) -> Fetcher:
    return Fetcher.of(replica_id=replica_id, peer=peer, may_read=lambda name: readable,
                      topic={"t": Topic(TOPIC_ID)}.get)


def request(*, offset: int = 0, topic_id: uuid.UUID | None = None, last_epoch: int = -1) -> PartitionRequest:
    return PartitionRequest(fetch_offset=offset, partition_max_bytes=1024, last_fetched_epoch=last_epoch,
                            topic_id=topic_id)


def test_a_consumer_that_may_read_passes_every_gate():
    assert fetch_gates.refusal(fetcher(), TP, request(), Replica(State((1, 2)))) is None


def test_a_replica_id_from_a_client_that_is_no_proven_broker_is_refused():
    assert fetch_gates.trusted_replica_id(fetcher(replica_id=2), TP, request(), None) == ErrorCode.topic_authorization_failed
    assert fetch_gates.trusted_replica_id(fetcher(replica_id=2, peer=True), TP, request(), None) is None


def test_acl_refuses_a_consumer_but_a_peer_needs_no_read():
    assert fetch_gates.may_read(fetcher(readable=False), TP, request(), None) == ErrorCode.topic_authorization_failed
    assert fetch_gates.may_read(fetcher(replica_id=2, peer=True, readable=False), TP, request(), None) is None


def test_a_topic_id_that_names_another_topic_or_none_is_unknown():
    assert fetch_gates.known_topic_id(fetcher(), TP, request(topic_id=TOPIC_ID), None) is None
    assert fetch_gates.known_topic_id(fetcher(), TP, request(topic_id=uuid.uuid4()), None) == ErrorCode.unknown_topic_id
    gone = TopicPartition("deleted", 0)
    assert fetch_gates.known_topic_id(fetcher(), gone, request(topic_id=TOPIC_ID), None) == ErrorCode.unknown_topic_id


def test_a_follower_outside_the_replica_set_is_refused():
    peer = fetcher(replica_id=3, peer=True)
    assert fetch_gates.listed_replica(peer, TP, request(), Replica(State((1, 2)))) == ErrorCode.not_leader_or_follower
    assert fetch_gates.listed_replica(peer, TP, request(), Replica(State((1, 3)))) is None
    assert fetch_gates.listed_replica(peer, TP, request(), None) is None  # not hosted: the read answers


def test_the_first_refusal_wins_in_kafkas_order():
    # Both the ACL and the topic id refuse: the ACL comes first, so no unknown id leaks to a stranger.
    refused = fetch_gates.refusal(fetcher(readable=False), TP, request(topic_id=uuid.uuid4()), None)
    assert refused == ErrorCode.topic_authorization_failed
    assert [g.__name__ for g in fetch_gates.GATES] == ["trusted_replica_id", "may_read", "known_topic_id",
                                                        "listed_replica"]


def test_divergence_names_the_epoch_and_end_to_truncate_to():
    leader = Replica(State((1, 2)))
    assert fetch_gates.diverging_epoch(request(offset=12, last_epoch=0), leader) == (0, 10)  # epoch 0 ended at 10
    assert fetch_gates.diverging_epoch(request(offset=12, last_epoch=1), leader) == (0, 10)  # epoch 1 unknown here
    assert fetch_gates.diverging_epoch(request(offset=20, last_epoch=2), leader) is None
    assert fetch_gates.diverging_epoch(request(offset=12, last_epoch=-1), leader) is None  # v11 and below
    assert fetch_gates.diverging_epoch(request(offset=12, last_epoch=0), Replica(State((1, 2)), is_leader=False)) is None


def _all_gates(f: Fetcher, tp: TopicPartition, r: PartitionRequest, replica: Replica | None) -> ErrorCode | None:
    return next((e for gate in fetch_gates.GATES if (e := gate(f, tp, r, replica)) is not None), None)


def test_each_kind_of_fetcher_runs_only_gates_that_can_refuse_it():
    """`gates_for` leaves out only gates that pass everything of that fetcher: the answers are those of all GATES."""
    requests = [request(), request(topic_id=TOPIC_ID), request(topic_id=uuid.uuid4())]
    replicas = [None, Replica(State((1, 2))), Replica(State((1, 3)))]
    topics = [TP, TopicPartition("deleted", 0)]
    seen = set()
    for replica_id, peer, readable in [(r, p, a) for r in (-1, 2, 3) for p in (False, True) for a in (False, True)]:
        f = fetcher(replica_id=replica_id, peer=peer, readable=readable)
        assert set(f.gates) <= set(fetch_gates.GATES) and len(f.gates) < len(fetch_gates.GATES)
        for tp, r, replica in [(t, q, p) for t in topics for q in requests for p in replicas]:
            answer = fetch_gates.refusal(f, tp, r, replica)
            assert answer == _all_gates(f, tp, r, replica)
            seen.add(answer)
    assert seen == {None, ErrorCode.topic_authorization_failed, ErrorCode.unknown_topic_id,
                    ErrorCode.not_leader_or_follower}
