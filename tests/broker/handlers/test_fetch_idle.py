"""An incremental fetch's idle partitions without a broker: a partition is left out of the read only when
reading it would answer nothing new; anything the session last sent that changed sends it to the read."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.fetch_sessions.cache import CachedPartition, PartitionRequest
from tinystream.broker.handlers import fetch_idle
from tinystream.broker.handlers.fetch_gates import Fetcher
from tinystream.broker.storage.topic_partition import TopicPartition

TOPIC_ID = uuid.uuid4()


@dataclass
class Topic:
    topic_id: uuid.UUID | None


@dataclass
class State:
    replicas: tuple[int, ...] = (1,)


@dataclass
class Replica:
    """A leader at epoch 3 with nothing new since the session's last answer (hw 10, lso 10, start 0)."""

    state: State = dataclasses.field(default_factory=State)
    is_leader: bool = True
    leader_epoch: int = 3
    high_watermark: int = 10
    last_stable_offset: int = 10
    log_start_offset: int = 0
    log_end_offset: int = 12
    epochs: tuple[tuple[int, int], ...] = ((1, 4), (3, 12))

    def check_leader_epoch(self, epoch: int) -> ErrorCode:
        if epoch < 0 or epoch == self.leader_epoch:
            return ErrorCode.none
        return ErrorCode.fenced_leader_epoch if epoch < self.leader_epoch else ErrorCode.unknown_leader_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        known = [(e, end) for e, end in self.epochs if e <= epoch]
        return known[-1] if known else (-1, -1)


def consumer(may_read: bool = True) -> Fetcher:
    return Fetcher.of(replica_id=-1, peer=False, may_read=lambda topic: may_read,
                      topic=lambda name: Topic(TOPIC_ID))


def cached(fetch_offset: int = 10, **request: object) -> CachedPartition:
    """The session's partition: last sent hw 10, lso 10, log start 0."""
    return CachedPartition(PartitionRequest(fetch_offset, 1 << 20, **request), 10, 10, 0)  # type: ignore[arg-type]


def split(partitions: dict[TopicPartition, CachedPartition], replicas: dict[TopicPartition, Replica],
          *, fetcher: Fetcher | None = None, read_committed: bool = False) -> tuple[list[int], list[int]]:
    busy, idle = fetch_idle.split(fetcher or consumer(), partitions, replicas.get, read_committed=read_committed)
    return [tp.partition for tp, _ in busy], [tp.partition for tp in idle]


def tps(n: int) -> list[TopicPartition]:
    return [TopicPartition("t", i) for i in range(n)]


def test_unchanged_partitions_are_idle_and_the_changed_ones_read_in_session_order():
    t = tps(6)
    replicas = {tp: Replica() for tp in t}
    replicas[t[1]] = Replica(high_watermark=11, last_stable_offset=11)  # a record arrived
    replicas[t[3]] = Replica(log_start_offset=4)  # DeleteRecords or retention: no records, still news
    replicas[t[4]] = Replica(high_watermark=11, last_stable_offset=11, log_end_offset=11)
    partitions = {tp: cached() for tp in t}
    partitions[t[4]] = cached(11)  # the consumer already moved there: the HW moved without records for it
    assert split(partitions, replicas) == ([1, 3, 4], [0, 2, 5])


@pytest.mark.parametrize("change", [
    {"high_watermark": 11},
    {"last_stable_offset": 8},
    {"log_start_offset": 1},
    {"is_leader": False},  # NOT_LEADER_OR_FOLLOWER, or a follower read: the read decides
    {"leader_epoch": 4},  # the request's epoch 3 is fenced now
])
def test_anything_the_answer_would_carry_sends_the_partition_to_the_read(change):
    tp = TopicPartition("t", 0)
    replica = dataclasses.replace(Replica(), **change)
    assert split({tp: cached(current_leader_epoch=3)}, {tp: replica}) == ([0], [])


def test_a_partition_not_hosted_here_is_read_and_gets_its_error():
    tp = TopicPartition("t", 0)
    assert split({tp: cached()}, {}) == ([0], [])


def test_a_refused_topic_is_read_so_the_gates_answer_it():
    t = tps(3)
    assert split({tp: cached() for tp in t}, {tp: Replica() for tp in t}, fetcher=consumer(may_read=False)) == (
        [0, 1, 2], [])


def test_a_topic_id_that_no_longer_names_the_topic_is_read():
    tp = TopicPartition("t", 0)
    assert split({tp: cached(topic_id=uuid.uuid4())}, {tp: Replica()}) == ([0], [])
    assert split({tp: cached(topic_id=TOPIC_ID)}, {tp: Replica()}) == ([], [0])


def test_a_consumer_behind_the_end_is_read():
    tp = TopicPartition("t", 0)
    assert split({tp: cached(7)}, {tp: Replica()}) == ([0], [])


def test_read_committed_is_idle_at_the_last_stable_offset_and_uncommitted_at_the_high_watermark():
    tp = TopicPartition("t", 0)
    open_txn = Replica(last_stable_offset=6)
    at_lso = CachedPartition(PartitionRequest(6, 1 << 20), 10, 6, 0)
    assert split({tp: at_lso}, {tp: open_txn}, read_committed=True) == ([], [0])
    assert split({tp: at_lso}, {tp: open_txn}, read_committed=False) == ([0], [])


def test_last_fetched_epoch_idle_only_when_the_log_has_not_diverged():
    tp = TopicPartition("t", 0)
    assert split({tp: cached(last_fetched_epoch=3)}, {tp: Replica()}) == ([], [0])  # the current epoch
    assert split({tp: cached(last_fetched_epoch=1)}, {tp: Replica(epochs=((1, 10), (3, 12)))}) == ([], [0])
    # Epoch 1 ended at 4 here, before the fetcher's offset 10: diverged, the read answers the divergence.
    assert split({tp: cached(last_fetched_epoch=1)}, {tp: Replica()}) == ([0], [])


def follower(replica_id: int = 2) -> Fetcher:
    return Fetcher.of(replica_id=replica_id, peer=True, may_read=lambda t: False, topic=lambda name: Topic(TOPIC_ID))


def test_a_consumer_on_a_broker_without_follower_reads_and_a_peer_are_split():
    assert fetch_idle.eligible(consumer(), redirects=False)
    assert not fetch_idle.eligible(consumer(), redirects=True)
    assert fetch_idle.eligible(follower(), redirects=False) and fetch_idle.eligible(follower(), redirects=True)
    untrusted = Fetcher.of(replica_id=2, peer=False, may_read=lambda t: True, topic=lambda n: None)
    assert not fetch_idle.eligible(untrusted, redirects=False)  # its gates refuse every partition: read them


def test_a_follower_is_idle_at_the_log_end_not_the_high_watermark():
    tp = TopicPartition("t", 0)
    replica = Replica(state=State(replicas=(1, 2, 3)))  # hw 10, log end 12
    assert split({tp: cached(12)}, {tp: replica}, fetcher=follower()) == ([], [0])
    assert split({tp: cached(10)}, {tp: replica}, fetcher=follower()) == ([0], [])  # two records to replicate
    assert split({tp: cached(10)}, {tp: replica}) == ([], [0])  # a consumer there is idle


def test_a_follower_no_longer_a_replica_is_read_so_the_gates_refuse_it():
    tp = TopicPartition("t", 0)
    assert split({tp: cached(12)}, {tp: Replica(state=State(replicas=(1, 3)))}, fetcher=follower()) == ([0], [])
    # READ is a consumer's gate: a peer needs none (may_read says no above) and is still split.
    assert split({tp: cached(12)}, {tp: Replica(state=State(replicas=(1, 2)))}, fetcher=follower()) == ([], [0])


@pytest.mark.parametrize("change", [{"high_watermark": 11}, {"log_start_offset": 1}, {"is_leader": False}])
def test_a_follower_is_answered_what_it_must_learn(change):
    tp = TopicPartition("t", 0)
    replica = dataclasses.replace(Replica(state=State(replicas=(1, 2))), **change)
    assert split({tp: cached(12)}, {tp: replica}, fetcher=follower()) == ([0], [])
