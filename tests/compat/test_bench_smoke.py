"""The benchmarks' raw-protocol clients, small, against the broker under test.

The load generators speak the protocol directly (pre-built batches, pipelined
Produce v7, Fetch v4 counted from batch headers), so they are themselves
Kafka clients worth checking: every acks mode and codec stores exactly what
was sent (the producer verifies end offsets), and the raw consumer counts it
back; the librdkafka workloads run too.
"""

from __future__ import annotations

import compat_helpers as ch
import pytest

from tinystream.bench import consume_workloads, produce_workloads
from tinystream.bench.targets import Target

pytestmark = pytest.mark.compat


def _target(broker) -> Target:
    return Target(name=broker.name, bootstrap=broker.bootstrap)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_raw_produce_then_raw_consume(acks, compression, broker):
    topic = ch.unique_name(f"bench-{acks}-{compression}")
    spec = produce_workloads.ProduceSpec(topic=topic, partitions=3, records=20_000, record_size=100,
                                         batch_bytes=32_768, acks=acks, compression=compression,
                                         in_flight=3, progress=False)
    produced = produce_workloads.run_raw(_target(broker), spec)
    assert produced.records >= 20_000
    assert produced.verified, produced.problem
    consume = consume_workloads.ConsumeSpec(topic=topic, partitions=3, records=produced.records, record_size=100,
                                            batch_bytes=32_768, compression=compression, fetch_bytes=65_536,
                                            progress=False)
    consumed = consume_workloads.run_raw(_target(broker), consume)
    assert consumed.records == produced.records


def test_confluent_workloads(broker):
    topic = ch.unique_name("bench-confluent")
    spec = produce_workloads.ProduceSpec(topic=topic, partitions=2, records=20_000, record_size=100,
                                         batch_bytes=65_536, acks="1", compression="none", progress=False)
    produced = produce_workloads.run_confluent(_target(broker), spec)
    assert produced.records == 20_000 and produced.latency_ms
    consume = consume_workloads.ConsumeSpec(topic=topic, partitions=2, records=20_000, record_size=100,
                                            batch_bytes=65_536, compression="none", progress=False)
    assert consume_workloads.run_confluent(_target(broker), consume).records == 20_000


def test_batch_header_counting_skips_records_before_the_fetch_offset():
    from tinystream.bench.batches import make_batch

    batch = bytearray(make_batch(10, 20))
    batch[0:8] = (100).to_bytes(8, "big")  # baseOffset 100: offsets 100..109
    assert consume_workloads.count_records(bytes(batch), 100) == (10, 110)
    assert consume_workloads.count_records(bytes(batch), 104) == (6, 110)
    assert consume_workloads.count_records(bytes(batch) + bytes(batch[:30]), 100) == (10, 110)  # cut tail ignored
    assert consume_workloads.count_records(bytes(batch[:-1]), 100) == (0, 100)


def test_fast_fetch_parser_agrees_with_kio(broker):
    """The zero-copy Fetch v4 reader of the consume bench sees what kio's decoder sees."""
    import asyncio

    from tinystream.bench.wire_client import WireConnection

    topic = ch.create_topic(broker.bootstrap, ch.unique_name("bench-parse"), 2)
    ch.produce("confluent", broker.bootstrap, topic, ch.make_records(300), compression="lz4")
    spec = consume_workloads.ConsumeSpec(topic=topic, partitions=2, records=300, record_size=10, batch_bytes=1024,
                                         compression="none", fetch_bytes=4096)

    async def fetch():
        conn = await WireConnection.open(*_target(broker).host_port)
        try:
            return bytes(await conn.send(consume_workloads._fetch_request(topic, {0: 0, 1: 5}, spec)))
        finally:
            await conn.close()

    payload = asyncio.run(fetch())
    fast = [(p, e, bytes(r)) for p, e, r in consume_workloads.fetch_v4_partitions(memoryview(payload))]
    response, _ = consume_workloads.read_fetch_response(payload, 4)
    slow = [(int(p.partition_index), int(p.error_code), p.records or b"")
            for t in response.responses for p in t.partitions]
    assert fast == slow
    assert any(records for _, _, records in fast)
