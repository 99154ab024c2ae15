"""Followers fetch in incremental fetch sessions (KIP-227): three brokers, a controller, real sockets."""

from __future__ import annotations

import asyncio
import time

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers import fetch_idle
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import create_topics_request, now_batch, produce_request
from tinystream.testing.waiting import wait_until_async

PARTITIONS = 24


def time_ms() -> int:
    return int(time.time() * 1000)


async def produce_everywhere(cluster, topic: str, value: bytes) -> None:
    """acks=all to every partition through its leader: each answer needs the followers' fetches."""
    image = {p: await cluster.partition(topic, p) for p in range(PARTITIONS)}
    for p, state in image.items():
        client = await cluster.client(state["leader"])
        r = await client.request(produce_request(topic, p, now_batch([(None, value)]), acks=-1))
        assert r.responses[0].partition_responses[0].error_code == ErrorCode.none


async def create_replicated(cluster, topic: str) -> None:
    """PARTITIONS partitions of RF 3 (min ISR 2), once every broker holds its replicas."""
    client = await cluster.client(1)
    created = await client.request(create_topics_request([(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})]))
    assert created.topics[0].error_code == ErrorCode.none
    await wait_until_async(lambda: all(cluster.replica(b, topic, p) is not None
                                       for b in (1, 2, 3) for p in range(PARTITIONS)), timeout=15, what="replicas")


def privileged_sessions(broker) -> list:
    return [s for s in broker.ctx.fetch_sessions.cache.sessions() if s.privileged]


async def test_followers_replicate_through_incremental_sessions_and_survive_losing_them(cluster):
    await create_replicated(cluster, "many")
    await produce_everywhere(cluster, "many", b"one")
    # Every follower holds a session on every other broker (each leads some partitions) and fetches incrementally.
    await wait_until_async(lambda: all(h.session_id != 0 and h.epoch > 2
                                       for b in cluster.brokers.values() for h in b.fetchers.fetch_sessions().values()),
                           timeout=15, what="incremental sessions on every leader")
    for broker in cluster.brokers.values():
        sessions = privileged_sessions(broker)
        assert len(sessions) == 2  # one per follower broker
        led = sum(1 for p in range(PARTITIONS) if cluster.replica(broker.settings.broker_id, "many", p).is_leader)
        assert all(len(s.partitions) >= led for s in sessions)
    # The leaders forget every session: followers get FETCH_SESSION_ID_NOT_FOUND, fetch in full, and go on.
    for broker in cluster.brokers.values():
        for s in privileged_sessions(broker):
            broker.ctx.fetch_sessions.cache.remove(s.id)
    await produce_everywhere(cluster, "many", b"two")
    for b in (1, 2, 3):
        for p in range(PARTITIONS):
            await wait_until_async(lambda: cluster.replica(b, "many", p).high_watermark == 2,  # noqa: B023
                                   timeout=15, what=f"{TopicPartition('many', p)} HW on broker {b}")
    assert all(len(privileged_sessions(b)) == 2 for b in cluster.brokers.values())


LAG_MS = 1500


@pytest.fixture
def cluster_overrides() -> dict[int, dict]:
    """A follower not seen caught up for 1.5 s leaves the ISR."""
    return {b: {"replica.lag.time.max.ms": LAG_MS} for b in (1, 2, 3)}


async def test_followers_skip_idle_partitions_and_stay_in_sync_on_them(cluster, monkeypatch):
    """A leader reads only a follower session's partitions with news, yet records the follower's position on
    the idle ones: with no records anywhere for several lag times, no ISR shrinks."""
    idle_seen: list[int] = []
    split = fetch_idle.split

    def spy(fetcher, *args, **kwargs):
        busy, idle = split(fetcher, *args, **kwargs)
        if fetcher.peer:
            idle_seen.append(len(idle))
        return busy, idle

    monkeypatch.setattr(fetch_idle, "split", spy)
    await create_replicated(cluster, "quiet")
    await produce_everywhere(cluster, "quiet", b"once")
    leaders = {p: (await cluster.partition("quiet", p))["leader"] for p in range(PARTITIONS)}
    await wait_until_async(lambda: all(len(cluster.replica(leaders[p], "quiet", p).state.isr) == 3
                                       for p in range(PARTITIONS)), timeout=15, what="full ISRs")
    idle_seen.clear()
    await asyncio.sleep(3 * LAG_MS / 1000)
    assert max(idle_seen) >= PARTITIONS // 3  # a follower's fetches left a whole leader's share unread
    for p in range(PARTITIONS):
        leader = cluster.replica(leaders[p], "quiet", p)
        assert len(leader.state.isr) == 3, f"partition {p} shrank to {leader.state.isr}"
        lags = [lag for _, _, lag in leader.in_sync_holding(1, time_ms())]
        assert len(lags) == 2 and max(lags) < LAG_MS
