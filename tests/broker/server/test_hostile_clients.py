"""Hostile clients cost bounded memory and cannot lock others out (issue 12, attack 3).

- A client that pipelines Fetch requests and never reads: finished answers used
  to be written into the transport's buffer regardless, up to 100 in flight;
  now they wait unwritten and reading stops, so the buffer stays near its
  high-water mark.
- One host cannot hold every connection (max.connections.per.ip).
- The server-wide budget of unanswered request bytes (queued.max.request.bytes)
  makes new requests wait, whoever sends them.
- A request of 10^8 one-byte array items (100 MiB) used to be decoded on the
  event loop for many seconds; its item count alone now refuses it, and large
  requests are decoded on a worker thread.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time

import pytest

from tinystream.broker.protocol.codec import encode_request
from tinystream.broker.protocol.encoder import uvarint
from tinystream.testing.broker import create_topic, fetch_request, now_batch, produce_request

from .test_server import answers_api_versions, closed_by_peer, raw

MIB = 1 << 20


def resident_bytes() -> int:
    """This process's resident set (the broker runs in the test's process)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def connect_from(broker, source_ip: str):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source_ip, 0))  # any 127/8 address is loopback on Linux: another "host"
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (broker.info.host, broker.info.port))
    return await asyncio.open_connection(sock=sock)


@pytest.mark.parametrize("settings_overrides", [{"max.connections.per.ip": 2, "max.connections": 10}])
async def test_one_host_cannot_take_every_connection(broker, settings_overrides):
    first, second = await connect_from(broker, "127.0.0.1"), await connect_from(broker, "127.0.0.1")
    third_reader, _ = await connect_from(broker, "127.0.0.1")
    assert await closed_by_peer(third_reader)
    other = await connect_from(broker, "127.0.0.2")
    assert await answers_api_versions(*other)
    assert await answers_api_versions(*first)
    for _, writer in (first, second, other):
        writer.close()


async def test_a_client_that_never_reads_gets_no_more_buffered_answers(broker, connect):
    client = await connect()
    await create_topic(client, "big")
    for _ in range(4):  # 4 MiB in the partition
        done = await client.request(produce_request("big", 0, now_batch([(None, b"x" * (MIB - 200))]), acks=1))
        assert done.responses[0].partition_responses[0].error_code == 0
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and it never reads
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (broker.info.host, broker.info.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    rss_before = resident_bytes()
    fetch = fetch_request([("big", 0, 0)], max_bytes=2**31 - 1, partition_max_bytes=2**31 - 1)  # 2 GiB each
    for correlation_id in range(100):  # ~400 MiB of answers if the broker wrote them all
        writer.write(encode_request(fetch, correlation_id=correlation_id, client_id="hoarder"))
    await writer.drain()
    worst = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        buffered = [c._transport.get_write_buffer_size() for c in broker.server._connections if c._transport]
        worst = max(worst, *buffered)
        await asyncio.sleep(0.05)
    assert worst < 16 * MIB, f"{worst / MIB:.0f} MiB buffered for a client that reads nothing"
    grown = resident_bytes() - rss_before
    assert grown < 100 * MIB, f"resident memory grew {grown / MIB:.0f} MiB"
    assert await answers_api_versions(*(await raw(broker)))  # everyone else is served meanwhile
    writer.close()


@pytest.mark.parametrize("settings_overrides", [{"queued.max.request.bytes": 1}])
async def test_new_requests_wait_while_the_queued_bytes_budget_is_spent(broker, connect, settings_overrides):
    client = await connect()
    await create_topic(client, "quiet")
    poller = await connect()
    long_poll = asyncio.ensure_future(poller.request(fetch_request([("quiet", 0, 0)], max_wait_ms=1500, min_bytes=1)))
    await asyncio.sleep(0.2)  # the long poll holds the whole budget now
    started = time.monotonic()
    assert await answers_api_versions(*(await raw(broker)))
    waited = time.monotonic() - started
    await long_poll
    assert waited > 1.0, f"answered after {waited:.2f} s, while the budget was spent"
    assert broker.server.queued_bytes == 0


@pytest.mark.parametrize("settings_overrides", [{"fetch.max.bytes": 1 * MIB}])
async def test_a_fetch_answer_is_capped_by_the_brokers_fetch_max_bytes(broker, connect, settings_overrides):
    client = await connect()
    await create_topic(client, "capped")
    for _ in range(4):
        done = await client.request(produce_request("capped", 0, now_batch([(None, b"y" * (MIB // 2))]), acks=1))
        assert done.responses[0].partition_responses[0].error_code == 0
    answer = await client.request(fetch_request([("capped", 0, 0)], max_bytes=1 << 30, partition_max_bytes=1 << 30))
    records = answer.responses[0].partitions[0].records
    assert 0 < len(records) <= 1 * MIB + (MIB // 2) + 4096, len(records)  # asked for 1 GiB: got about 1 MiB


def many_empty_group_names(count: int) -> bytes:
    """A framed DescribeGroups v5 naming `count` empty groups: one byte each, 10^8 fit in 100 MiB."""
    header = struct.pack(">hhih", 15, 5, 7, 4) + b"evil" + b"\x00"  # api 15 v5, correlation 7, client id, no tags
    body = uvarint(count + 1) + b"\x01" * count + b"\x00" + b"\x00"  # the groups, include_authorized_operations, tags
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


async def test_a_request_of_a_hundred_million_items_is_refused_at_once_while_others_are_served(broker):
    frame = many_empty_group_names(10**8)
    assert len(frame) < 100 * MIB  # within socket.request.max.bytes: only its item count is hostile
    reader, writer = await raw(broker)
    pinger = await raw(broker)
    slowest = 0.0
    sent = asyncio.Event()

    async def ping() -> None:  # a member's heartbeat stands for any small request on another connection
        nonlocal slowest
        while not sent.is_set():
            started = time.monotonic()
            assert await answers_api_versions(*pinger)
            slowest = max(slowest, time.monotonic() - started)
            await asyncio.sleep(0.02)

    pinging = asyncio.ensure_future(ping())
    writer.write(frame)
    await writer.drain()
    sent_at = time.monotonic()
    assert await closed_by_peer(reader)
    refused_after = time.monotonic() - sent_at
    sent.set()
    await pinging
    assert refused_after < 0.1, f"refused {refused_after * 1000:.0f} ms after the last byte left"
    assert slowest < 1.0, f"a small request on another connection waited {slowest:.2f} s"
    assert broker.server.queued_bytes == 0
    assert await answers_api_versions(*(await raw(broker)))
