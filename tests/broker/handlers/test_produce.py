"""Produce over a real socket: validation, acks, idempotence, LogAppendTime, metrics."""

from __future__ import annotations

import asyncio

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.storage.batch import Compression, decode_records, split_batches
from tinystream.testing.broker import (
    add_partitions_to_txn,
    create_topic,
    fetch_request,
    init_transactional_producer,
)
from tinystream.testing.broker import now_batch as build_batch
from tinystream.testing.broker import produce_request as produce

pytestmark = pytest.mark.asyncio


def part(response):
    return response.responses[0].partition_responses[0]


def fetch(topic: str, partition: int, offset: int, **kwargs):
    return fetch_request([(topic, partition, offset)], **kwargs)


async def test_produce_then_fetch_returns_the_stored_bytes(broker, client):
    await create_topic(client, "t")
    batch = build_batch([(b"k", b"v"), (None, b"w")])
    resp = await client.request(produce("t", 0, batch))
    assert part(resp).error_code == ErrorCode.none and part(resp).base_offset == 0
    resp = await client.request(produce("t", 0, batch))
    assert part(resp).base_offset == 2
    f = await client.request(fetch("t", 0, 0))
    data = f.responses[0].partitions[0]
    assert data.error_code == ErrorCode.none and data.high_watermark == 4
    batches = list(split_batches(data.records))
    assert len(batches) == 2
    assert [(r.key, r.value) for r in decode_records(batches[1])] == [(b"k", b"v"), (None, b"w")]
    assert bytes(batches[0])[21:] == batch[21:]  # stored as sent apart from offset and epoch


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 10, 11])
async def test_every_served_version_appends(broker, client, version):
    await create_topic(client, "v")
    resp = await client.request(produce("v", 0, build_batch([(b"a", b"b")]), version=version))
    assert part(resp).error_code == ErrorCode.none


async def test_unknown_topic_and_partition(broker, client):
    await create_topic(client, "known")
    batch = build_batch([(None, b"x")])
    assert part(await client.request(produce("nope", 0, batch))).error_code == ErrorCode.unknown_topic_or_partition
    assert part(await client.request(produce("known", 7, batch))).error_code == ErrorCode.unknown_topic_or_partition


def _corrupt(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[-1] ^= 0xFF
    return bytes(b)


@pytest.mark.parametrize(
    ("records", "error"),
    [
        (None, ErrorCode.invalid_record),
        (b"", ErrorCode.invalid_record),
        (b"\x00" * 30, ErrorCode.corrupt_message),
        ("corrupt", ErrorCode.corrupt_message),
        ("two", ErrorCode.invalid_record),
        ("cut", ErrorCode.corrupt_message),
        ("magic1", ErrorCode.invalid_record),
    ],
)
async def test_bad_records_are_refused_and_nothing_is_stored(broker, client, records, error):
    await create_topic(client, "bad")
    good = build_batch([(b"k", b"v")])
    if records == "corrupt":
        records = _corrupt(good)
    elif records == "two":
        records = good + good
    elif records == "cut":
        records = good[:-3]
    elif records == "magic1":
        records = good[:16] + b"\x01" + good[17:]
    resp = await client.request(produce("bad", 0, records))
    assert part(resp).error_code == error
    f = await client.request(fetch("bad", 0, 0))
    assert f.responses[0].partitions[0].high_watermark == 0


async def test_zstd_needs_produce_v7(broker, client):
    await create_topic(client, "z")
    batch = build_batch([(b"k", b"v" * 100)], compression=Compression.ZSTD)
    assert part(await client.request(produce("z", 0, batch, version=6))).error_code == ErrorCode.unsupported_compression_type
    assert part(await client.request(produce("z", 0, batch, version=7))).error_code == ErrorCode.none


async def test_compressed_batches_are_stored_as_sent(broker, client):
    await create_topic(client, "c")
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        batch = build_batch([(b"k%d" % i, b"v" * 50) for i in range(20)], compression=codec)
        assert part(await client.request(produce("c", 0, batch))).error_code == ErrorCode.none
    data = (await client.request(fetch("c", 0, 0))).responses[0].partitions[0].records
    codecs = [bytes(b)[22] & 0x07 for b in split_batches(data)]
    assert codecs == [1, 2, 3, 4]
    for b in split_batches(data):
        assert len(decode_records(b)) == 20


async def test_message_too_large(broker, client):
    await create_topic(client, "small", configs={"max.message.bytes": "200"})
    batch = build_batch([(None, b"x" * 500)])
    assert part(await client.request(produce("small", 0, batch))).error_code == ErrorCode.message_too_large


async def test_invalid_acks(broker, client):
    await create_topic(client, "a")
    resp = await client.request(produce("a", 0, build_batch([(None, b"x")]), acks=2))
    assert part(resp).error_code == ErrorCode.invalid_required_acks


async def test_acks_all_answers_once_replicated(broker, client):
    await create_topic(client, "all")
    resp = await client.request(produce("all", 0, build_batch([(None, b"x")]), acks=-1))
    assert part(resp).error_code == ErrorCode.none


async def test_acks_zero_sends_no_response_and_keeps_order(broker, client):
    await create_topic(client, "z0")
    for i in range(5):
        client.send_only(produce("z0", 0, build_batch([(None, b"%d" % i)]), acks=0))
    f = await client.request(fetch("z0", 0, 0))  # answered: nothing was queued for the acks=0 requests
    values = [r.value for b in split_batches(f.responses[0].partitions[0].records) for r in decode_records(b)]
    assert values == [b"0", b"1", b"2", b"3", b"4"]


async def test_acks_zero_failure_closes_the_connection(broker, client):
    client.send_only(produce("missing", 0, build_batch([(None, b"x")]), acks=0))
    await asyncio.wait_for(client.closed.wait(), 5)


async def test_internal_topic_refuses_client_writes(broker, client):
    broker.topics.ensure_offsets_topic()
    resp = await client.request(produce("__consumer_offsets", 0, build_batch([(b"k", b"v")])))
    assert part(resp).error_code == ErrorCode.invalid_topic_exception


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_legacy_versions_are_answered_unsupported(broker, client, version):
    import struct

    from tinystream.broker.protocol.codec import encode_request

    await create_topic(client, "old")
    # Produce v0-2 are v3's layout without transactional_id: encode v3 and cut it out.
    v3 = encode_request(produce("old", 0, build_batch([(None, b"x")]), version=3), correlation_id=5, client_id="c")
    body = bytearray(v3[4:])
    body[2:4] = version.to_bytes(2, "big")
    header_len = 2 + 2 + 4 + 2 + 1  # api key, version, correlation id, client id "c"
    frame = bytes(body[:header_len]) + bytes(body[header_len + 2 :])
    reader, writer = await asyncio.open_connection(broker.info.host, broker.info.port)
    writer.write(len(frame).to_bytes(4, "big") + frame)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    answer = await reader.readexactly(size)
    correlation_id, topics, name_len = struct.unpack_from(">iih", answer, 0)
    assert (correlation_id, topics, answer[10 : 10 + name_len]) == (5, 1, b"old")
    partitions, index, error, offset = struct.unpack_from(">iihq", answer, 10 + name_len)
    assert (partitions, index, error, offset) == (1, 0, ErrorCode.unsupported_version.value, -1)
    tail = 10 + name_len + 18 + (8 if version >= 2 else 0)
    assert len(answer) == tail + (4 if version >= 1 else 0)
    writer.close()
    f = await client.request(fetch("old", 0, 0))
    assert f.responses[0].partitions[0].high_watermark == 0


async def test_log_append_time_topic(broker, client):
    await create_topic(client, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    resp = await client.request(produce("lat", 0, build_batch([(None, b"x")])))
    p = part(resp)
    assert p.error_code == ErrorCode.none and p.log_append_time is not None
    data = (await client.request(fetch("lat", 0, 0))).responses[0].partitions[0].records
    assert bytes(data)[22] & 0x08  # timestamp type bit set, CRC recomputed (decode checks it)
    list(split_batches(data, verify=True))


class TestIdempotence:
    async def test_retry_is_answered_with_the_original_offset(self, broker, client):
        await create_topic(client, "idem")
        b0 = build_batch([(None, b"a"), (None, b"b")], producer_id=7, producer_epoch=0, base_sequence=0)
        b1 = build_batch([(None, b"c")], producer_id=7, producer_epoch=0, base_sequence=2)
        assert part(await client.request(produce("idem", 0, b0))).base_offset == 0
        assert part(await client.request(produce("idem", 0, b1))).base_offset == 2
        dup = part(await client.request(produce("idem", 0, b0)))
        assert dup.error_code == ErrorCode.none and dup.base_offset == 0
        f = await client.request(fetch("idem", 0, 0))
        assert f.responses[0].partitions[0].high_watermark == 3

    async def test_sequence_gap_and_old_epoch(self, broker, client):
        await create_topic(client, "gap")
        ok = build_batch([(None, b"a")], producer_id=9, producer_epoch=1, base_sequence=0)
        gap = build_batch([(None, b"b")], producer_id=9, producer_epoch=1, base_sequence=5)
        old = build_batch([(None, b"c")], producer_id=9, producer_epoch=0, base_sequence=1)
        new_epoch_bad = build_batch([(None, b"d")], producer_id=9, producer_epoch=2, base_sequence=3)
        assert part(await client.request(produce("gap", 0, ok))).error_code == ErrorCode.none
        assert part(await client.request(produce("gap", 0, gap))).error_code == ErrorCode.out_of_order_sequence_number
        assert part(await client.request(produce("gap", 0, old))).error_code == ErrorCode.invalid_producer_epoch
        assert part(await client.request(produce("gap", 0, new_epoch_bad))).error_code == ErrorCode.out_of_order_sequence_number
        new_epoch = build_batch([(None, b"e")], producer_id=9, producer_epoch=2, base_sequence=0)
        assert part(await client.request(produce("gap", 0, new_epoch))).error_code == ErrorCode.none

    async def test_unknown_producer_is_accepted_at_any_sequence(self, broker, client):
        await create_topic(client, "any")
        b = build_batch([(None, b"a")], producer_id=11, producer_epoch=0, base_sequence=4242)
        assert part(await client.request(produce("any", 0, b))).error_code == ErrorCode.none

    async def test_transactional_batch_needs_its_partition_in_the_transaction(self, broker, client):
        """KIP-890 verification: a partition not added to the Ongoing transaction is INVALID_TXN_STATE."""
        await create_topic(client, "tx", partitions=2)
        pid, epoch = await init_transactional_producer(client, "tx-a")
        b = build_batch([(None, b"a")], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        refused = part(await client.request(produce("tx", 0, b, transactional_id="tx-a")))
        assert refused.error_code == ErrorCode.invalid_txn_state
        added = await add_partitions_to_txn(client, "tx-a", (pid, epoch), "tx", [0])
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.none
        assert part(await client.request(produce("tx", 0, b, transactional_id="tx-a"))).error_code == ErrorCode.none
        other = build_batch([(None, b"b")], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        assert part(await client.request(produce("tx", 1, other, transactional_id="tx-a"))).error_code == \
            ErrorCode.invalid_txn_state
        stale = build_batch([(None, b"c")], producer_id=pid, producer_epoch=epoch - 1 if epoch else 5,
                            base_sequence=1, transactional=True)
        assert part(await client.request(produce("tx", 0, stale, transactional_id="tx-a"))).error_code == \
            ErrorCode.invalid_producer_epoch
        plain = build_batch([(None, b"d")], producer_id=pid, producer_epoch=epoch, base_sequence=1)
        assert part(await client.request(produce("tx", 0, plain))).error_code == ErrorCode.invalid_txn_state


async def test_pipelined_produces_land_in_order(broker, connect):
    client = await connect()
    await create_topic(client, "pipe")
    futures = [
        asyncio.ensure_future(client.request(produce("pipe", 0, build_batch([(None, b"%d" % i)])))) for i in range(50)
    ]
    offsets = [part(r).base_offset for r in await asyncio.gather(*futures)]
    assert offsets == list(range(50))


async def test_metrics_count_bytes_and_requests(broker, client):
    await create_topic(client, "m")
    batch = build_batch([(None, b"x")] * 3)
    await client.request(produce("m", 0, batch))
    text = broker.metrics.exposition().decode()
    assert f'tinystream_bytes_in_total{{topic="m"}} {float(len(batch))}' in text
    assert 'tinystream_messages_in_total{topic="m"} 3.0' in text
    assert 'tinystream_requests_total{api="Produce"} 1.0' in text


async def test_producer_state_is_rebuilt_from_the_log_without_a_snapshot(tmp_path):
    """Crash-like restart: no snapshot on disk, so the state comes from batch headers."""
    from tinystream.broker.app import Broker
    from tinystream.broker.protocol.client import KafkaClient
    from tinystream.broker.storage.topic_partition import TopicPartition
    from tinystream.testing.broker import test_settings

    settings = test_settings(tmp_path / "d")
    b0 = build_batch([(None, b"a")], producer_id=21, producer_epoch=0, base_sequence=0)
    b1 = build_batch([(None, b"b"), (None, b"c")], producer_id=21, producer_epoch=0, base_sequence=1)
    broker = Broker(settings)
    await broker.start()
    client = await KafkaClient.connect(broker.info.host, broker.info.port)
    await create_topic(client, "replay")
    for b in (b0, b1):
        assert part(await client.request(produce("replay", 0, b))).error_code == ErrorCode.none
    await client.close()
    snapshot = broker.logs.snapshot_path(TopicPartition("replay", 0))
    await broker.stop()
    snapshot.unlink()
    broker = Broker(settings)
    await broker.start()
    client = await KafkaClient.connect(broker.info.host, broker.info.port)
    try:
        dup = part(await client.request(produce("replay", 0, b1)))
        assert (dup.error_code, dup.base_offset) == (ErrorCode.none, 1)
        gap = build_batch([(None, b"d")], producer_id=21, producer_epoch=0, base_sequence=9)
        assert part(await client.request(produce("replay", 0, gap))).error_code == ErrorCode.out_of_order_sequence_number
    finally:
        await client.close()
        await broker.stop()
