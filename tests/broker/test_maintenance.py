"""Background work on a running broker: retention, time-based roll, flush.ms, producer snapshots."""

from __future__ import annotations

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import create_topic, fetch_request, now_batch, produce_request
from tinystream.testing.waiting import wait_until_async


@pytest.fixture
def settings_overrides() -> dict:
    return {"log.retention.check.interval.ms": 50, "log.cleaner.backoff.ms": 50}


async def test_retention_by_bytes_deletes_old_segments(broker, client):
    await create_topic(client, "ret", configs={"segment.bytes": "1024", "retention.bytes": "2048"})
    for i in range(20):
        await client.request(produce_request("ret", 0, now_batch([(None, b"%03d" % i * 60)])))
    log = broker.replicas.get(TopicPartition("ret", 0)).log
    # retention.bytes keeps whole segments while the rest stays at or above the limit
    await wait_until_async(lambda: log.log_start_offset > 0 and log.size_bytes() <= 2048 + 1024, timeout=5)
    old = (await client.request(fetch_request([("ret", 0, 0)]))).responses[0].partitions[0]
    assert old.error_code == ErrorCode.offset_out_of_range and old.log_start_offset == log.log_start_offset


async def test_retention_by_time(broker, client):
    await create_topic(client, "old", configs={"segment.bytes": "1024", "retention.ms": "1"})
    for _i in range(10):
        await client.request(produce_request("old", 0, now_batch([(None, b"x" * 300)])))
    log = broker.replicas.get(TopicPartition("old", 0)).log
    await wait_until_async(lambda: log.log_start_offset >= 9, timeout=5)


async def test_segment_roll_by_time(broker, client):
    await create_topic(client, "roll", configs={"segment.ms": "100"})
    await client.request(produce_request("roll", 0, now_batch([(None, b"x")])))
    log = broker.replicas.get(TopicPartition("roll", 0)).log
    await wait_until_async(lambda: log.segment_count() >= 2, timeout=5)


async def test_flush_ms_and_producer_snapshots(broker, client):
    await create_topic(client, "fl", configs={"flush.ms": "10"})
    batch = now_batch([(None, b"x")], producer_id=3, producer_epoch=0, base_sequence=0)
    await client.request(produce_request("fl", 0, batch))
    assert broker.replicas.flush_due() in (0, 1)
    assert broker.replicas.write_snapshots() >= 1
    assert broker.replicas.write_snapshots() == 0  # nothing changed since
    path = broker.logs.snapshot_path(TopicPartition("fl", 0))
    assert b'"producers":[[3,0' in path.read_bytes()


async def test_compaction_keeps_the_newest_value_per_key(broker, client):
    from tinystream.broker.storage.batch import decode_records, split_batches

    await create_topic(client, "compact", configs={"cleanup.policy": "compact", "segment.bytes": "1024"})
    for round_ in range(6):
        for key in (b"a", b"b"):
            await client.request(produce_request("compact", 0, now_batch([(key, b"%s%d" % (key, round_) * 40)])))
    log = broker.replicas.get(TopicPartition("compact", 0)).log

    def surviving() -> list[tuple[bytes, bytes]]:
        out = []
        offset = log.log_start_offset
        while True:
            result = log.read(offset, 1 << 20)
            if not len(result.data):
                return out
            out += [(r.key, r.value[:2]) for b in split_batches(result.data) for r in decode_records(b)]
            offset = result.next_offset

    await wait_until_async(lambda: len(surviving()) < 12, timeout=5)
    values = surviving()
    assert values[-2:] == [(b"a", b"a5"), (b"b", b"b5")]  # the newest of each key is always there
    end = (await client.request(fetch_request([("compact", 0, 0)]))).responses[0].partitions[0]
    assert end.high_watermark == 12  # offsets never change
