"""Incremental fetch sessions (KIP-227) over a real socket: one broker, hand-made Fetch requests.

The pure rules are in tests/broker/fetch_sessions; here the handler's wiring:
the session's partitions are read (and long-polled) although the request
names none, answers carry only partitions with news, forgotten partitions
leave, and the cache's slots bound what is kept.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import millis
from tinystream.broker.storage.batch import decode_records, split_batches
from tinystream.testing.broker import create_topic, entity, fetch_request, now_batch, produce_request, request

PARTITIONS = 50


async def produce(client, topic: str, partition: int, value: bytes) -> None:
    resp = await client.request(produce_request(topic, partition, now_batch([(None, value)])))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none


def carried(response) -> dict[tuple[str, int], list[bytes]]:
    return {(t.topic, p.partition_index): [r.value for b in split_batches(p.records) for r in decode_records(b)]
            for t in response.responses for p in t.partitions}


async def open_session(client, topic: str, n: int = PARTITIONS) -> int:
    await create_topic(client, topic, partitions=n)
    full = await client.request(fetch_request([(topic, i, 0) for i in range(n)], session_id=0, session_epoch=0))
    assert full.error_code == ErrorCode.none and full.session_id != 0
    assert len(carried(full)) == n  # a full answer names every partition
    return full.session_id


async def test_incremental_fetch_carries_only_partitions_with_news(broker, connect):
    producer, consumer = await connect(), await connect()
    sid = await open_session(consumer, "inc")
    quiet = await consumer.request(fetch_request([], session_id=sid, session_epoch=1))
    assert quiet.error_code == ErrorCode.none and quiet.session_id == sid and carried(quiet) == {}
    await produce(producer, "inc", 17, b"news")
    news = await consumer.request(fetch_request([], session_id=sid, session_epoch=2))
    assert carried(news) == {("inc", 17): [b"news"]}
    # The client moves its position: only that partition is named; the rest come from the session.
    moved = await consumer.request(fetch_request([("inc", 17, 1)], session_id=sid, session_epoch=3))
    assert carried(moved) == {}
    assert len(broker.ctx.fetch_sessions.cache) == 1


async def test_an_incremental_long_poll_waits_on_every_session_partition(broker, connect):
    producer, consumer = await connect(), await connect()
    sid = await open_session(consumer, "lp")
    started = time.monotonic()
    idle = await consumer.request(fetch_request([], session_id=sid, session_epoch=1, max_wait_ms=300, min_bytes=1))
    assert carried(idle) == {} and 0.25 <= time.monotonic() - started < 2  # waited for max_wait
    pending = asyncio.ensure_future(consumer.request(
        fetch_request([], session_id=sid, session_epoch=2, max_wait_ms=5000, min_bytes=1)))
    await asyncio.sleep(0.2)
    assert not pending.done()
    started = time.monotonic()
    await produce(producer, "lp", 42, b"wake")  # a partition the request did not name
    assert carried(await pending) == {("lp", 42): [b"wake"]}
    assert time.monotonic() - started < 2


async def test_forgotten_partitions_leave_the_session(broker, connect):
    producer, consumer = await connect(), await connect()
    sid = await open_session(consumer, "fg", 3)
    await consumer.request(fetch_request([], session_id=sid, session_epoch=1, forgotten=[("fg", 0)]))
    await produce(producer, "fg", 0, b"unwanted")
    await produce(producer, "fg", 1, b"wanted")
    answer = await consumer.request(fetch_request([], session_id=sid, session_epoch=2))
    assert carried(answer) == {("fg", 1): [b"wanted"]}


async def test_a_partition_added_mid_session_is_answered_at_once(broker, connect):
    consumer = await connect()
    sid = await open_session(consumer, "add", 2)
    await create_topic(consumer, "other")
    answer = await consumer.request(fetch_request([("other", 0, 0)], session_id=sid, session_epoch=1))
    assert carried(answer) == {("other", 0): []}  # new to the session: its first answer carries it


@pytest.mark.parametrize(("epoch", "error"), [(5, ErrorCode.invalid_fetch_session_epoch),
                                              (1, ErrorCode.none)])
async def test_the_epoch_must_be_the_next_one(broker, client, epoch, error):
    sid = await open_session(client, "ep", 2)
    answer = await client.request(fetch_request([], session_id=sid, session_epoch=epoch))
    assert answer.error_code == error


async def test_final_epoch_closes_the_session(broker, client):
    sid = await open_session(client, "fin", 2)
    closing = await client.request(fetch_request([("fin", 0, 0)], session_id=sid, session_epoch=-1))
    assert closing.error_code == ErrorCode.none and closing.session_id == 0 and len(carried(closing)) == 1
    after = await client.request(fetch_request([], session_id=sid, session_epoch=1))
    assert after.error_code == ErrorCode.fetch_session_id_not_found


async def test_sessionless_fetch_opens_no_session(broker, client):
    await create_topic(client, "none")
    answer = await client.request(fetch_request([("none", 0, 0)], session_id=0, session_epoch=-1))
    assert answer.session_id == 0 and len(broker.ctx.fetch_sessions.cache) == 0


@pytest.mark.parametrize("settings_overrides", [{"max.incremental.fetch.session.cache.slots": 0}])
async def test_zero_slots_keep_every_fetch_full(broker, client):
    await create_topic(client, "off", partitions=3)
    for _ in range(2):
        answer = await client.request(fetch_request([("off", i, 0) for i in range(3)], session_id=0, session_epoch=0))
        assert answer.session_id == 0 and len(carried(answer)) == 3


# -- v13+: topics by id (KIP-516) -----------------------------------------------------------


def topic_id(broker, name: str) -> uuid.UUID:
    spec = broker.topics.store.get(name)
    assert spec is not None
    return spec.topic_id


@pytest.mark.parametrize("version", [13, 14])
async def test_fetch_by_topic_id_in_a_session(broker, connect, version):
    producer, consumer = await connect(), await connect()
    await create_topic(producer, "ids", partitions=3)
    ids = {"ids": topic_id(broker, "ids")}
    full = await consumer.request(fetch_request([("ids", p, 0) for p in range(3)], version=version,
                                                session_id=0, session_epoch=0, topic_ids=ids))
    assert full.session_id != 0 and [t.topic_id for t in full.responses] == [ids["ids"]]
    await produce(producer, "ids", 2, b"by-id")
    news = await consumer.request(fetch_request([], version=version, session_id=full.session_id, session_epoch=1,
                                                topic_ids=ids))
    (topic,) = news.responses
    assert topic.topic_id == ids["ids"] and [p.partition_index for p in topic.partitions] == [2]
    assert [r.value for b in split_batches(topic.partitions[0].records) for r in decode_records(b)] == [b"by-id"]
    # A session opened by id is not served to a request by name (and the other way round).
    by_name = await consumer.request(fetch_request([], version=12, session_id=full.session_id, session_epoch=2))
    assert by_name.error_code == ErrorCode.fetch_session_topic_id_error


async def test_an_unknown_topic_id_is_answered_per_partition(broker, client):
    await create_topic(client, "known")
    ghost = uuid.uuid4()
    answer = await client.request(fetch_request([("known", 0, 0), ("ghost", 0, 0)], version=13,
                                                topic_ids={"known": topic_id(broker, "known"), "ghost": ghost}))
    errors = {t.topic_id: [p.error_code for p in t.partitions] for t in answer.responses}
    assert errors == {topic_id(broker, "known"): [ErrorCode.none], ghost: [ErrorCode.unknown_topic_id]}


async def test_fetch_bytes_are_counted_per_api(broker, client):
    """The request/response byte counters the follower benchmark reads (tinystream_request_bytes...)."""
    await create_topic(client, "counted")
    await client.request(fetch_request([("counted", 0, 0)]))
    sample = broker.metrics.registry.get_sample_value
    requests = sample("tinystream_request_bytes_total", {"api": "Fetch"})
    responses = sample("tinystream_response_bytes_total", {"api": "Fetch"})
    assert requests is not None and responses is not None and requests > 40 and responses > 40


def delete_records(topic: str, partition: int, offset: int):
    v = 2
    return request(21, v, timeout=millis(1000), topics=(entity(21, v, "DeleteRecordsTopic", name=topic, partitions=(
        entity(21, v, "DeleteRecordsPartition", partition_index=partition, offset=offset),)),))


async def test_an_idle_partition_whose_log_start_moved_is_answered_without_records(broker, connect):
    """The incremental read skips idle partitions (handlers/fetch_idle.py); one whose log start offset moved
    (DeleteRecords: no new records) is not idle, and its answer carries the new log start once."""
    producer, consumer = await connect(), await connect()
    sid = await open_session(consumer, "ls", 3)
    await produce(producer, "ls", 1, b"a")
    await produce(producer, "ls", 1, b"b")
    got = await consumer.request(fetch_request([], session_id=sid, session_epoch=1))
    assert carried(got) == {("ls", 1): [b"a", b"b"]}
    assert carried(await consumer.request(fetch_request([("ls", 1, 2)], session_id=sid, session_epoch=2))) == {}
    deleted = await producer.request(delete_records("ls", 1, 1))
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    moved = await consumer.request(fetch_request([], session_id=sid, session_epoch=3))
    answers = [(p.partition_index, p.log_start_offset, p.high_watermark, p.records) for t in moved.responses
               for p in t.partitions]
    assert answers == [(1, 1, 2, b"")]
    assert carried(await consumer.request(fetch_request([], session_id=sid, session_epoch=4))) == {}
