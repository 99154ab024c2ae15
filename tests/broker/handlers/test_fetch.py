"""Fetch, ListOffsets and OffsetForLeaderEpoch over a real socket."""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import millis
from tinystream.broker.storage.batch import decode_records, split_batches
from tinystream.testing.broker import (
    add_partitions_to_txn,
    create_topic,
    entity,
    fetch_request,
    init_transactional_producer,
    now_batch,
    produce_request,
    request,
)


async def produce_values(client, topic: str, partition: int, values: list[bytes]) -> None:
    for v in values:
        resp = await client.request(produce_request(topic, partition, now_batch([(None, v)])))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none


def values_of(records) -> list[bytes]:
    return [r.value for b in split_batches(records) for r in decode_records(b)]


def only(response):
    return response.responses[0].partitions[0]


async def test_fetch_from_the_middle_and_at_the_end(broker, client):
    await create_topic(client, "f")
    await produce_values(client, "f", 0, [b"a", b"b", b"c"])
    data = only(await client.request(fetch_request([("f", 0, 1)])))
    assert values_of(data.records) == [b"b", b"c"]
    assert (data.high_watermark, data.last_stable_offset, data.log_start_offset) == (3, 3, 0)
    end = only(await client.request(fetch_request([("f", 0, 3)])))
    assert end.error_code == ErrorCode.none and len(end.records) == 0


async def test_offset_out_of_range(broker, client):
    await create_topic(client, "oor")
    await produce_values(client, "oor", 0, [b"a"])
    data = only(await client.request(fetch_request([("oor", 0, 5)])))
    assert data.error_code == ErrorCode.offset_out_of_range and data.high_watermark == 1


async def test_unknown_partition(broker, client):
    data = only(await client.request(fetch_request([("ghost", 0, 0)])))
    assert data.error_code == ErrorCode.unknown_topic_or_partition


async def test_long_poll_is_woken_by_an_append(broker, connect):
    producer, consumer = await connect(), await connect()
    await create_topic(producer, "lp")
    started = time.monotonic()
    pending = asyncio.ensure_future(consumer.request(fetch_request([("lp", 0, 0)], max_wait_ms=5000, min_bytes=1)))
    await asyncio.sleep(0.2)
    assert not pending.done()
    await produce_values(producer, "lp", 0, [b"wake"])
    data = only(await pending)
    assert values_of(data.records) == [b"wake"]
    assert time.monotonic() - started < 2


async def test_long_poll_times_out_empty(broker, client):
    await create_topic(client, "quiet")
    started = time.monotonic()
    data = only(await client.request(fetch_request([("quiet", 0, 0)], max_wait_ms=300, min_bytes=1)))
    assert len(data.records) == 0
    assert 0.25 <= time.monotonic() - started < 2


async def test_min_bytes_waits_for_enough_data(broker, connect):
    producer, consumer = await connect(), await connect()
    await create_topic(producer, "mb")
    pending = asyncio.ensure_future(consumer.request(fetch_request([("mb", 0, 0)], max_wait_ms=5000, min_bytes=300)))
    await produce_values(producer, "mb", 0, [b"x" * 50])
    await asyncio.sleep(0.2)
    assert not pending.done()  # one small batch is below min_bytes
    await produce_values(producer, "mb", 0, [b"y" * 400])
    data = only(await pending)
    assert values_of(data.records) == [b"x" * 50, b"y" * 400]


async def test_a_pending_fetch_holds_later_responses_on_its_connection(broker, connect):
    producer, consumer = await connect(), await connect()
    await create_topic(producer, "order")
    slow = asyncio.ensure_future(consumer.request(fetch_request([("order", 0, 0)], max_wait_ms=500, min_bytes=1)))
    quick = asyncio.ensure_future(consumer.request(request(18, 3, client_software_name="t", client_software_version="1")))
    await asyncio.sleep(0.1)
    assert not quick.done()  # answered in request order, after the long poll
    await asyncio.gather(slow, quick)


async def test_kip74_first_batch_is_whole_even_past_the_limits(broker, client):
    await create_topic(client, "big")
    await produce_values(client, "big", 0, [b"z" * 5000, b"small"])
    data = only(await client.request(fetch_request([("big", 0, 0)], partition_max_bytes=100, max_bytes=100)))
    assert values_of(data.records) == [b"z" * 5000]


async def test_response_max_bytes_spans_partitions(broker, client):
    await create_topic(client, "two", partitions=2)
    await produce_values(client, "two", 0, [b"a" * 1000])
    await produce_values(client, "two", 1, [b"b" * 1000])
    resp = await client.request(fetch_request([("two", 0, 0), ("two", 1, 0)], max_bytes=500))
    parts = resp.responses[0].partitions
    assert values_of(parts[0].records) == [b"a" * 1000]  # the first gets a whole batch (KIP-74)
    assert len(parts[1].records) == 0  # nothing left for the second


async def test_a_session_never_given_is_not_found(broker, client):
    """KIP-227 (more in test_fetch_sessions.py): clients answer this with a new full fetch."""
    await create_topic(client, "s")
    stale = await client.request(fetch_request([("s", 0, 0)], session_id=123, session_epoch=4))
    assert stale.error_code == ErrorCode.fetch_session_id_not_found and stale.session_id == 0


async def test_read_committed_sees_the_high_watermark(broker, client):
    await create_topic(client, "rc")
    await produce_values(client, "rc", 0, [b"a"])
    data = only(await client.request(fetch_request([("rc", 0, 0)], isolation_level=1)))
    assert values_of(data.records) == [b"a"] and data.aborted_transactions == ()


@pytest.mark.parametrize("replica_id", [0, 1, 5])
async def test_replica_fetch_from_a_client_is_refused(broker, client, replica_id):
    """CVE-2018-1288: only peer brokers may fetch as replicas (broker 0 is this broker itself)."""
    await create_topic(client, "r")
    await produce_values(client, "r", 0, [b"secret"])
    data = only(await client.request(fetch_request([("r", 0, 0)], replica_id=replica_id)))
    assert data.error_code == ErrorCode.topic_authorization_failed and len(data.records) == 0


async def test_leader_epoch_fencing(broker, client):
    await create_topic(client, "ep")
    stale = only(await client.request(fetch_request([("ep", 0, 0)], current_leader_epoch=-1)))
    assert stale.error_code == ErrorCode.none
    ahead = only(await client.request(fetch_request([("ep", 0, 0)], current_leader_epoch=3)))
    assert ahead.error_code == ErrorCode.unknown_leader_epoch
    p = broker.replicas.get(("ep", 0))
    from tinystream.broker.replication.partition import PartitionState

    p.update_state(PartitionState(leader=0, leader_epoch=2, replicas=(0,), isr=(0,)))
    fenced = only(await client.request(fetch_request([("ep", 0, 0)], current_leader_epoch=1)))
    assert fenced.error_code == ErrorCode.fenced_leader_epoch


@pytest.mark.parametrize("version", [4, 5, 7, 9, 10, 11, 12])
async def test_every_served_version(broker, client, version):
    await create_topic(client, "vv")
    await produce_values(client, "vv", 0, [b"a"])
    data = only(await client.request(fetch_request([("vv", 0, 0)], version=version)))
    assert data.error_code == ErrorCode.none and values_of(data.records) == [b"a"]


async def test_diverging_epoch_v12(broker, client):
    await create_topic(client, "div")
    await produce_values(client, "div", 0, [b"a", b"b"])  # written in epoch 0, offsets 0-1
    p = broker.replicas.get(("div", 0))
    from tinystream.broker.replication.partition import PartitionState

    p.update_state(PartitionState(leader=0, leader_epoch=1, replicas=(0,), isr=(0,)))
    # A fetcher claiming epoch 0 data up to offset 5 diverged: epoch 0 ends at 2 here.
    data = only(await client.request(fetch_request([("div", 0, 5)], version=12, last_fetched_epoch=0)))
    assert data.diverging_epoch.epoch == 0 and data.diverging_epoch.end_offset == 2
    assert len(data.records) == 0


# -- ListOffsets -------------------------------------------------------------------------


def list_offsets(topic: str, partition: int, timestamp: int, *, version: int = 7, replica_id: int = -1,
                 isolation_level: int = 0):
    return request(
        2, version, replica_id=replica_id, isolation_level=isolation_level, timeout=datetime.timedelta(seconds=5),
        topics=(entity(2, version, "ListOffsetsTopic", name=topic, partitions=(
            entity(2, version, "ListOffsetsPartition", partition_index=partition, timestamp=timestamp,
                   current_leader_epoch=-1),)),),
    )


def lo(response):
    return response.topics[0].partitions[0]


async def test_list_offsets_earliest_latest_and_by_time(broker, client):
    await create_topic(client, "lo")
    t0 = int(time.time() * 1000)
    for i, ts in enumerate([t0, t0 + 10, t0 + 20]):
        batch = now_batch([(None, b"%d" % i)], base_timestamp=ts)
        await client.request(produce_request("lo", 0, batch))
    assert lo(await client.request(list_offsets("lo", 0, -2))).offset == 0
    latest = lo(await client.request(list_offsets("lo", 0, -1)))
    assert (latest.offset, latest.timestamp, latest.leader_epoch) == (3, -1, 0)
    by_time = lo(await client.request(list_offsets("lo", 0, t0 + 5)))
    assert (by_time.offset, by_time.timestamp) == (1, t0 + 10)
    assert lo(await client.request(list_offsets("lo", 0, t0 + 1000))).offset == -1
    top = lo(await client.request(list_offsets("lo", 0, -3)))
    assert (top.offset, top.timestamp) == (2, t0 + 20)


@pytest.mark.parametrize("version", [8, 9, 10])
async def test_list_offsets_v8_to_v10_earliest_local_and_pending_upload(broker, client, version):
    """KIP-405 / KIP-1005 without tiered storage: earliest-local is the log start, nothing pends upload."""
    topic = f"local{version}"
    await create_topic(client, topic)
    for i in range(3):
        await client.request(produce_request(topic, 0, now_batch([(None, b"%d" % i)])))
    assert lo(await client.request(list_offsets(topic, 0, -4, version=version))).offset == 0
    assert lo(await client.request(list_offsets(topic, 0, -1, version=version))).offset == 3
    if version >= 9:
        assert lo(await client.request(list_offsets(topic, 0, -5, version=version))).offset == -1


async def test_read_committed_latest_is_the_last_stable_offset(broker, client):
    """ListOffsets LATEST by isolation level; Fetch at read_committed stops at the LSO with the aborts listed."""
    await create_topic(client, "lso")
    await client.request(produce_request("lso", 0, now_batch([(None, b"plain")])))  # 0
    producer = await init_transactional_producer(client, "lso-tx")
    added = await add_partitions_to_txn(client, "lso-tx", producer, "lso", [0])
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.none
    txn = now_batch([(None, b"t1"), (None, b"t2")], producer_id=producer[0], producer_epoch=producer[1],
                    base_sequence=0, transactional=True)  # 1-2, left open
    answer = await client.request(produce_request("lso", 0, txn, transactional_id="lso-tx"))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert lo(await client.request(list_offsets("lso", 0, -1, isolation_level=0))).offset == 3
    assert lo(await client.request(list_offsets("lso", 0, -1, isolation_level=1))).offset == 1
    committed = (await client.request(fetch_request([("lso", 0, 0)], isolation_level=1))).responses[0].partitions[0]
    assert (committed.high_watermark, committed.last_stable_offset) == (3, 1)
    assert [r.value for b in split_batches(committed.records) for r in decode_records(b)] == [b"plain"]
    assert committed.aborted_transactions == ()
    uncommitted = (await client.request(fetch_request([("lso", 0, 0)]))).responses[0].partitions[0]
    assert uncommitted.aborted_transactions is None and len(list(split_batches(uncommitted.records))) == 2


async def test_list_offsets_max_timestamp_inside_a_batch(broker, client):
    from tinystream.broker.storage.batch import Record

    await create_topic(client, "mt")
    t0 = int(time.time() * 1000)
    batch = now_batch([Record(value=b"a", timestamp_delta=0), Record(value=b"b", timestamp_delta=50),
                       Record(value=b"c", timestamp_delta=5)], base_timestamp=t0)
    await client.request(produce_request("mt", 0, batch))
    top = lo(await client.request(list_offsets("mt", 0, -3)))
    assert (top.offset, top.timestamp) == (1, t0 + 50)


async def test_list_offsets_by_time_answers_the_record_not_the_batch(broker, client):
    """Spark's startingOffsetsByTimestamp needs the first RECORD at or after the time."""
    from tinystream.broker.storage.batch import Compression, Record

    await create_topic(client, "rt")
    t0 = int(time.time() * 1000)
    deltas = [0, 10, 20, 30]
    for compression in (Compression.NONE, Compression.GZIP):
        base = t0 if compression is Compression.NONE else t0 + 100
        batch = now_batch([Record(value=b"%d" % d, timestamp_delta=d) for d in deltas],
                          base_timestamp=base, compression=compression)
        await client.request(produce_request("rt", 0, batch))
    found = lo(await client.request(list_offsets("rt", 0, t0 + 15)))
    assert (found.offset, found.timestamp) == (2, t0 + 20)
    found = lo(await client.request(list_offsets("rt", 0, t0 + 30)))
    assert (found.offset, found.timestamp) == (3, t0 + 30)
    found = lo(await client.request(list_offsets("rt", 0, t0 + 111)))  # inside the compressed batch
    assert (found.offset, found.timestamp) == (6, t0 + 120)
    assert lo(await client.request(list_offsets("rt", 0, t0 + 131))).offset == -1


@pytest.mark.parametrize("version", [1, 2, 4, 6, 7])
async def test_list_offsets_versions_and_unknown_partition(broker, client, version):
    await create_topic(client, "lv")
    assert lo(await client.request(list_offsets("lv", 0, -1, version=version))).error_code == ErrorCode.none
    assert (
        lo(await client.request(list_offsets("lv", 9, -1, version=version))).error_code
        == ErrorCode.unknown_topic_or_partition
    )


# -- OffsetForLeaderEpoch -----------------------------------------------------------------------


def epoch_request(topic: str, partition: int, leader_epoch: int, *, version: int = 4, current: int = -1):
    return request(
        23, version, replica_id=-1,
        topics=(entity(23, version, "OffsetForLeaderTopic", topic=topic, partitions=(
            entity(23, version, "OffsetForLeaderPartition", partition=partition, current_leader_epoch=current,
                   leader_epoch=leader_epoch),)),),
    )


async def test_offset_for_leader_epoch(broker, client):
    await create_topic(client, "ofle")
    await produce_values(client, "ofle", 0, [b"a", b"b"])
    answer = (await client.request(epoch_request("ofle", 0, 0))).topics[0].partitions[0]
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.none, 0, 2)
    fenced = (await client.request(epoch_request("ofle", 0, 0, current=7))).topics[0].partitions[0]
    assert fenced.error_code == ErrorCode.unknown_leader_epoch
    missing = (await client.request(epoch_request("nope", 0, 0))).topics[0].partitions[0]
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


async def test_delete_records_moves_the_log_start(broker, client):
    await create_topic(client, "dr")
    await produce_values(client, "dr", 0, [b"a", b"b", b"c"])
    v = 2
    req = request(21, v, timeout=millis(1000), topics=(
        entity(21, v, "DeleteRecordsTopic", name="dr", partitions=(
            entity(21, v, "DeleteRecordsPartition", partition_index=0, offset=2),)),))
    result = (await client.request(req)).topics[0].partitions[0]
    assert (result.error_code, result.low_watermark) == (ErrorCode.none, 2)
    data = only(await client.request(fetch_request([("dr", 0, 0)])))
    assert data.error_code == ErrorCode.offset_out_of_range and data.log_start_offset == 2
    assert lo(await client.request(list_offsets("dr", 0, -2))).offset == 2
    too_far = request(21, v, timeout=millis(1000), topics=(
        entity(21, v, "DeleteRecordsTopic", name="dr", partitions=(
            entity(21, v, "DeleteRecordsPartition", partition_index=0, offset=99),)),))
    assert (await client.request(too_far)).topics[0].partitions[0].error_code == ErrorCode.offset_out_of_range
