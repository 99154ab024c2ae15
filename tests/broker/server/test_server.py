"""The TCP server: bad input closes only its own connection; limits; ordering; shutdown."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import encode_request
from tinystream.testing.broker import create_topic, fetch_request, now_batch, produce_request, request, test_settings


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


API_VERSIONS_V0 = encode_request(request(18, 0), correlation_id=1, client_id="raw")


async def raw(broker):
    return await asyncio.open_connection(broker.info.host, broker.info.port)


async def closed_by_peer(reader: asyncio.StreamReader, timeout: float = 5.0) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1 << 16), timeout)
    except (ConnectionResetError, BrokenPipeError):
        return True
    return data == b""


async def answers_api_versions(reader, writer) -> bool:
    writer.write(API_VERSIONS_V0)
    size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
    body = await reader.readexactly(size)
    return struct.unpack_from(">ih", body)[1] == 0


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">i", 200 * 1024 * 1024), id="oversized-prefix"),
        pytest.param(struct.pack(">i", -1), id="negative-size"),
        pytest.param(struct.pack(">i", 3) + b"abc", id="too-small"),
        pytest.param(framed(struct.pack(">hhih", 999, 0, 1, -1) + b"\x00\x00"), id="unknown-api"),
        pytest.param(framed(struct.pack(">hhih", 1, 3, 1, -1) + b"\x00\x00"), id="fetch-v3-unsupported"),
        pytest.param(framed(struct.pack(">hhih", 3, 12, 1, -1) + b"\x00\xff\xff\xff\xff\x0f\x00"),
                     id="huge-compact-array"),
        pytest.param(framed(struct.pack(">hhih", 3, 1, 1, 50) + b"\x00\x00"), id="client-id-past-end"),
        pytest.param(framed(struct.pack(">hhih", 3, 1, 1, -1) + b"\x00\x00"), id="truncated-body"),
    ],
)
async def test_bad_input_closes_only_that_connection(broker, payload):
    good_reader, good_writer = await raw(broker)
    bad_reader, bad_writer = await raw(broker)
    bad_writer.write(payload)
    assert await closed_by_peer(bad_reader)
    assert await answers_api_versions(good_reader, good_writer)
    good_writer.close()


async def test_size_limit_is_socket_request_max_bytes(tmp_path):
    b = Broker(test_settings(tmp_path / "d", **{"socket.request.max.bytes": 1000}))
    await b.start()
    try:
        reader, writer = await raw(b)
        writer.write(struct.pack(">i", 1001))
        assert await closed_by_peer(reader)
        reader, writer = await raw(b)
        assert await answers_api_versions(reader, writer)
    finally:
        await b.stop()


async def test_requests_fed_byte_by_byte(broker):
    reader, writer = await raw(broker)
    frames = API_VERSIONS_V0 * 3
    for i in range(len(frames)):
        writer.write(frames[i : i + 1])
        await writer.drain()
    for _ in range(3):
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        await reader.readexactly(size)
    writer.close()


async def test_pipelined_requests_are_answered_in_order(broker):
    reader, writer = await raw(broker)
    frames = b"".join(encode_request(request(18, 2), correlation_id=i, client_id="p") for i in range(100))
    writer.write(frames)
    got = []
    for _ in range(100):
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        got.append(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])
    assert got == list(range(100))
    writer.close()


async def test_end_of_stream_closes_the_connection(broker):
    """Kafka closes a channel whose read hits end of stream; so does this broker."""
    reader, writer = await raw(broker)
    writer.write_eof()
    assert await closed_by_peer(reader)


@pytest.mark.parametrize("settings_overrides", [{"max.connections": 2}])
async def test_connection_limit(broker, settings_overrides):
    first = await raw(broker)
    second = await raw(broker)
    third_reader, _ = await raw(broker)
    assert await closed_by_peer(third_reader)
    assert await answers_api_versions(*first)
    first[1].close()
    await asyncio.sleep(0.1)
    fourth = await raw(broker)
    assert await answers_api_versions(*fourth)
    second[1].close()


@pytest.mark.parametrize("settings_overrides", [{"connections.max.idle.ms": 200}])
async def test_idle_connections_are_closed(broker, settings_overrides):
    reader, writer = await raw(broker)
    assert await answers_api_versions(reader, writer)
    started = time.monotonic()
    assert await closed_by_peer(reader, timeout=5)
    assert time.monotonic() - started >= 0.15


@pytest.mark.parametrize("settings_overrides", [{"connections.max.idle.ms": 200}])
async def test_a_long_poll_is_not_idle(broker, connect, settings_overrides):
    client = await connect()
    await create_topic(client, "idle")
    resp = await client.request(fetch_request([("idle", 0, 0)], max_wait_ms=600, min_bytes=1))
    assert resp.responses[0].partitions[0].error_code == ErrorCode.none


async def test_group_apis_close_the_connection_when_no_coordinator(tmp_path):
    b = Broker(test_settings(tmp_path / "d"), with_groups=False)
    await b.start()
    try:
        assert all(a.key not in (11, 12, 14) for a in b.ctx.advertised)
        reader, writer = await raw(b)
        writer.write(encode_request(request(12, 0, group_id="g", generation_id=1, member_id="m"), correlation_id=3))
        assert await closed_by_peer(reader)
    finally:
        await b.stop()


async def test_disconnect_during_long_poll_cancels_it(broker, connect):
    client = await connect()
    await create_topic(client, "gone")
    pending = asyncio.ensure_future(client.request(fetch_request([("gone", 0, 0)], max_wait_ms=30000, min_bytes=1)))
    await asyncio.sleep(0.1)
    assert broker.replicas.purgatory.waiting == 1
    await client.close()
    await asyncio.sleep(0.1)
    assert broker.replicas.purgatory.waiting == 0
    with pytest.raises((ConnectionError, asyncio.CancelledError)):
        await pending


async def test_stop_is_prompt_and_flushes(tmp_path):
    settings = test_settings(tmp_path / "d")
    b = Broker(settings)
    await b.start()
    from tinystream.broker.protocol.client import KafkaClient

    client = await KafkaClient.connect(b.info.host, b.info.port)
    await create_topic(client, "keep")
    await client.request(produce_request("keep", 0, now_batch([(None, b"v")])))
    pending = asyncio.ensure_future(client.request(fetch_request([("keep", 0, 1)], max_wait_ms=30000, min_bytes=1)))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    await b.stop()
    assert time.monotonic() - started < 3
    with pytest.raises(ConnectionError):
        await pending
    await client.close()
    b2 = Broker(settings)
    await b2.start()
    try:
        assert b2.replicas.get(("keep", 0)).log_end_offset == 1
    finally:
        await b2.stop()


@pytest.mark.parametrize("settings_overrides", [{"connections.max.idle.ms": 200}])
async def test_a_peer_that_stops_mid_frame_is_closed_as_idle(broker, settings_overrides):
    reader, writer = await raw(broker)
    writer.write(API_VERSIONS_V0[:7])
    assert await closed_by_peer(reader, timeout=5)
