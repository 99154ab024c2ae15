"""Follower fetching (KIP-392) on three brokers in zone-a/b/c, TinyStream and Apache Kafka alike.

Its own cluster per target (TINYSTREAM_COMPAT_TARGET): `tinystream` runs a local cluster (controller + 3
brokers, tinystream/dev/cluster.py), `kafka` Apache Kafka's 3-node KRaft peer; each broker gets its
broker.rack and replica.selector.class=RackAwareReplicaSelector. Same assertions on both:

- confluent-kafka consumers, with client.rack in a follower's zone and without one, read every record;
- the leader answers a Fetch v11 naming that zone with preferred_read_replica = that follower and no
  records; the follower serves Fetch v11 but answers v10 NOT_LEADER_OR_FOLLOWER.

Which replica served the consumer is visible only on TinyStream (its metrics):
tests/broker/replication/test_follower_fetching.py asserts that.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import compat_helpers as ch
import pytest
from compat_helpers import require_client
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.replication.replica_selector import RACK_AWARE
from tinystream.dev.cluster import LocalCluster
from tinystream.testing.broker import fetch_request
from tinystream.testing.consumers import read_partition
from tinystream.testing.peers import PeerUnavailable
from tinystream.testing.peers.apache_kafka_cluster import start_kafka_cluster
from tinystream.testing.waiting import wait_until

pytestmark = pytest.mark.compat

ZONES = ("zone-a", "zone-b", "zone-c")
RECORDS = 20


@pytest.fixture(scope="module")
def racked(tmp_path_factory) -> Iterator[tuple[str, dict[int, str]]]:
    """(bootstrap, broker id -> rack) of a 3-broker cluster of the target."""
    target = os.environ.get("TINYSTREAM_COMPAT_TARGET", "tinystream").strip() or "tinystream"
    if target == "tinystream":
        racks = dict(enumerate(ZONES))  # the local cluster numbers its brokers from 0
        cluster = LocalCluster(brokers=3, data_dir=tmp_path_factory.mktemp("racked"), first_port=0,
                               dashboard_port=0, schema_registry_port=0, echo=lambda _line: None,
                               overrides=[f"replica.selector.class={RACK_AWARE}"],
                               broker_overrides={b: [f"broker.rack={rack}"] for b, rack in racks.items()})
        try:
            yield cluster.open(), racks
        finally:
            cluster.close()
    elif target == "kafka":
        require_client("java")
        racks = {n + 1: zone for n, zone in enumerate(ZONES)}  # KRaft node ids from 1
        try:
            kafka = start_kafka_cluster(node_overrides={
                n: {"broker.rack": rack, "replica.selector.class": RACK_AWARE} for n, rack in racks.items()})
        except PeerUnavailable as exc:
            pytest.skip(f"Apache Kafka unavailable: {exc}")
        try:
            yield kafka.bootstrap, racks
        finally:
            kafka.stop()
    else:
        pytest.skip(f"follower fetching needs three brokers with racks; {target} is run as one broker here")


def _placed_topic(bootstrap: str) -> tuple[str, int, int, dict[int, tuple[str, int]]]:
    """A 1-partition RF-3 topic holding RECORDS records, every replica in sync:
    (topic, leader, a follower, broker id -> (host, port))."""
    topic = ch.unique_name("near")
    admin = ch.confluent_admin(bootstrap)
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(30) == 0

    def in_sync():
        md = admin.list_topics(topic, timeout=5)
        p = md.topics[topic].partitions.get(0)
        return (md, p) if p is not None and p.leader >= 0 and len(p.isrs) == 3 else None

    md, partition = wait_until(in_sync, timeout=30, what="a leader and a full ISR")
    follower = min(b for b in partition.replicas if b != partition.leader)
    return topic, partition.leader, follower, {b.id: (b.host, b.port) for b in md.brokers.values()}


def _consume(bootstrap: str, topic: str, rack: str | None) -> list[bytes]:
    return read_partition(bootstrap, topic, RECORDS, rack=rack, timeout_s=60)


async def _fetch(address: tuple[str, int], topic: str, *, version: int, rack: str = ""):
    client = await KafkaClient.connect(*address)
    try:
        answer = await client.request(fetch_request([(topic, 0, 0)], version=version, rack_id=rack))
    finally:
        await client.close()
    return answer.responses[0].partitions[0]


@pytest.mark.parametrize("in_zone", [True, False], ids=["client-rack", "no-rack"])
def test_consumers_read_every_record_with_and_without_client_rack(racked, in_zone):
    require_client("confluent")
    bootstrap, racks = racked
    topic, _leader, follower, _addresses = _placed_topic(bootstrap)
    got = _consume(bootstrap, topic, racks[follower] if in_zone else None)
    assert got == [b"v%d" % i for i in range(RECORDS)]


def test_the_leader_names_the_follower_in_the_clients_zone_and_the_follower_serves_v11(racked):
    bootstrap, racks = racked
    topic, leader, follower, addresses = _placed_topic(bootstrap)

    redirect = asyncio.run(_fetch(addresses[leader], topic, version=11, rack=racks[follower]))
    assert (redirect.error_code, redirect.preferred_read_replica) == (ErrorCode.none, follower)
    assert not redirect.records
    stay = asyncio.run(_fetch(addresses[leader], topic, version=11, rack=racks[leader]))
    assert (stay.error_code, stay.preferred_read_replica) == (ErrorCode.none, -1)
    assert stay.records

    old = asyncio.run(_fetch(addresses[follower], topic, version=10))
    assert old.error_code == ErrorCode.not_leader_or_follower
    served = wait_until(lambda: (p := asyncio.run(_fetch(addresses[follower], topic, version=11))).records and p,
                        timeout=30, what="the follower's HW to cover the records")
    assert (served.error_code, served.preferred_read_replica) == (ErrorCode.none, -1)
