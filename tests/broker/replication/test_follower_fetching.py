"""Follower fetching (KIP-392) end to end: three brokers in zone-a/b/c with the rack-aware selector.

Raw Fetch requests pin the protocol rules (preferred_read_replica from the leader, a follower's reads
bounded by its high watermark, OFFSET_OUT_OF_RANGE past its log end, v10 refused); confluent-kafka
(librdkafka) with client.rack shows a real consumer following the redirect to the follower in its zone.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid

import pytest
from confluent_kafka import Producer

from tinystream.broker.errors import ErrorCode
from tinystream.broker.replication.replica_selector import RACK_AWARE
from tinystream.testing.broker import create_topics_request, entity, fetch_request, request
from tinystream.testing.consumers import read_partition
from tinystream.testing.waiting import wait_until_async

RACKS = {1: "zone-a", 2: "zone-b", 3: "zone-c"}
RECORDS = 20


@pytest.fixture
def cluster_overrides() -> dict[int, dict]:
    return {b: {"broker.rack": rack, "replica.selector.class": RACK_AWARE} for b, rack in RACKS.items()}


async def _topic_with_records(cluster) -> tuple[str, int, int]:
    """A 1-partition RF-3 topic holding RECORDS records on every replica: (topic, leader, a follower)."""
    topic = f"near-{uuid.uuid4().hex[:8]}"
    client = await cluster.client(1)
    response = await client.request(create_topics_request([(topic, 1, 3, {"min.insync.replicas": "2"})]))
    assert response.topics[0].error_code == ErrorCode.none, response.topics[0].error_message
    leader = (await cluster.partition(topic, 0))["leader"]
    await wait_until_async(lambda: all(cluster.replica(b, topic, 0) is not None for b in RACKS), what="replicas")
    await wait_until_async(lambda: len(cluster.replica(leader, topic, 0).state.isr) == 3, what="full ISR")
    await asyncio.to_thread(_produce, cluster.bootstrap(), topic)
    follower = min(b for b in RACKS if b != leader)
    # The follower learns the HW from its next fetch; the leader learns the follower's position likewise.
    await wait_until_async(lambda: cluster.replica(follower, topic, 0).high_watermark == RECORDS, what="follower HW")
    return topic, leader, follower


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(20) == 0


def _consume(bootstrap: str, topic: str, rack: str | None) -> list[bytes]:
    """Every record of partition 0 from the start, by a confluent-kafka consumer in `rack`."""
    return read_partition(bootstrap, topic, RECORDS, rack=rack, extra={"topic.metadata.refresh.interval.ms": 60_000})


def _records_read(cluster, broker_id: int, topic: str) -> int:
    return cluster.replica(broker_id, topic, 0).records_read


def _metric(cluster, broker_id: int, name: str) -> float:
    for line in cluster.brokers[broker_id].metrics.exposition().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exposed by broker {broker_id}")


async def test_a_consumer_with_client_rack_reads_every_record_from_the_follower_in_its_zone(cluster):
    topic, leader, follower = await _topic_with_records(cluster)
    before = {b: _metric(cluster, b, "tinystream_follower_fetch_requests_total") for b in RACKS}

    got = await asyncio.to_thread(_consume, cluster.bootstrap(), topic, RACKS[follower])

    assert got == [b"v%d" % i for i in range(RECORDS)]
    assert _records_read(cluster, follower, topic) == RECORDS  # the follower served them all ...
    assert _records_read(cluster, leader, topic) == 0  # ... the leader none (it answered with the redirect)
    assert _metric(cluster, follower, "tinystream_follower_fetch_requests_total") > before[follower]
    assert _metric(cluster, leader, "tinystream_follower_fetch_requests_total") == before[leader]
    assert _metric(cluster, leader, "tinystream_preferred_read_replica_answers_total") >= 1


async def test_a_consumer_without_client_rack_reads_from_the_leader(cluster):
    topic, leader, follower = await _topic_with_records(cluster)
    before = _metric(cluster, follower, "tinystream_follower_fetch_requests_total")

    got = await asyncio.to_thread(_consume, cluster.bootstrap(), topic, None)

    assert got == [b"v%d" % i for i in range(RECORDS)]
    assert _records_read(cluster, leader, topic) == RECORDS
    assert _records_read(cluster, follower, topic) == 0
    assert _metric(cluster, follower, "tinystream_follower_fetch_requests_total") == before
    assert _metric(cluster, leader, "tinystream_preferred_read_replica_answers_total") == 0


async def test_the_leader_answers_the_preferred_replica_with_no_records(cluster):
    topic, leader, follower = await _topic_with_records(cluster)
    client = await cluster.client(leader)

    redirected = (await client.request(fetch_request([(topic, 0, 0)], rack_id=RACKS[follower]))).responses[0]
    p = redirected.partitions[0]
    assert (p.error_code, p.preferred_read_replica, p.high_watermark) == (ErrorCode.none, follower, RECORDS)
    assert not p.records

    # In an incremental fetch session (KIP-227) the redirect is news every time, as Kafka's FetchSession has it.
    opened = await client.request(fetch_request([(topic, 0, 0)], rack_id=RACKS[follower], session_id=0,
                                                session_epoch=0))
    assert opened.session_id > 0
    again = await client.request(fetch_request([], rack_id=RACKS[follower], session_id=opened.session_id,
                                               session_epoch=1))
    assert [p.preferred_read_replica for t in again.responses for p in t.partitions] == [follower]

    for rack in ("", RACKS[leader], "zone-elsewhere"):  # no rack, the leader's, or one nobody is in: the leader
        p = (await client.request(fetch_request([(topic, 0, 0)], rack_id=rack))).responses[0].partitions[0]
        assert (p.error_code, p.preferred_read_replica) == (ErrorCode.none, -1)
        assert p.records


async def test_a_follower_serves_v11_consumers_up_to_its_high_watermark_only(cluster):
    topic, leader, follower = await _topic_with_records(cluster)
    client = await cluster.client(follower)

    old = (await client.request(fetch_request([(topic, 0, 0)], version=10))).responses[0].partitions[0]
    assert old.error_code == ErrorCode.not_leader_or_follower  # before v11 only the leader serves (KAFKA-9004)

    p = (await client.request(fetch_request([(topic, 0, 0)], version=11))).responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.preferred_read_replica) == (ErrorCode.none, RECORDS, -1)
    assert p.records

    # At its HW (here its log end too) nothing to read yet; past its log end, OFFSET_OUT_OF_RANGE (replica manager
    # unit tests pin an offset between its HW and its log end).
    at_end = (await client.request(fetch_request([(topic, 0, RECORDS)]))).responses[0].partitions[0]
    assert (at_end.error_code, bytes(at_end.records or b"")) == (ErrorCode.none, b"")
    beyond = (await client.request(fetch_request([(topic, 0, RECORDS + 5)]))).responses[0].partitions[0]
    assert beyond.error_code == ErrorCode.offset_out_of_range  # past its log end (Kafka's LocalLog.read)


async def test_list_offsets_stays_with_the_leader(cluster):
    topic, leader, follower = await _topic_with_records(cluster)
    latest = request(2, 7, replica_id=-1, isolation_level=0, timeout=datetime.timedelta(seconds=5), topics=(
        entity(2, 7, "ListOffsetsTopic", name=topic, partitions=(
            entity(2, 7, "ListOffsetsPartition", partition_index=0, timestamp=-1, current_leader_epoch=-1),)),))
    on_follower = (await (await cluster.client(follower)).request(latest)).topics[0].partitions[0]
    assert on_follower.error_code == ErrorCode.not_leader_or_follower
    on_leader = (await (await cluster.client(leader)).request(latest)).topics[0].partitions[0]
    assert (on_leader.error_code, on_leader.offset) == (ErrorCode.none, RECORDS)
