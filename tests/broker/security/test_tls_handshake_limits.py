"""Sockets that never finish a TLS handshake are held to the connection limits (issue 12, hostile clients).

asyncio's server-side TLS hands a connection to the protocol only after the
handshake, so such sockets used to count against nothing for up to 10 s each:
an address could hold any number of them and run the process out of file
descriptors. Now a TLS listener admits the TCP connection first, then shakes
hands within TLS_HANDSHAKE_TIMEOUT_S.
"""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.server import connection
from tinystream.testing.broker import BrokerThread, ThrowawayPki, create_topics_request, test_settings

PER_IP = 3


@pytest.fixture
def tls_broker(tmp_path, monkeypatch):
    pytest.importorskip("trustme")
    monkeypatch.setattr(connection, "TLS_HANDSHAKE_TIMEOUT_S", 1.5)
    pki = ThrowawayPki(tmp_path / "pki")
    settings = test_settings(tmp_path / "data", **{
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.issue("broker", common_name="broker")),
        "max.connections.per.ip": PER_IP})
    with BrokerThread(settings) as broker:
        yield broker, pki


def silent_socket(port: int) -> socket.socket:
    """A TCP connection that never says a word (no ClientHello)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(5)
    return sock


def closed_by_peer(sock: socket.socket, within: float) -> float | None:
    """Seconds until the broker closed `sock` (None if it was still open after `within`)."""
    started = time.monotonic()
    sock.settimeout(within)
    try:
        data = sock.recv(1)
    except TimeoutError:
        return None
    except ConnectionError:
        return time.monotonic() - started
    return time.monotonic() - started if data == b"" else None


def connection_count(broker: BrokerThread) -> int:
    return broker.call(lambda b: b.server.connection_count)


async def round_trip(broker: BrokerThread, pki: ThrowawayPki) -> None:
    context = ssl.create_default_context(cafile=str(pki.ca_pem))
    client = await KafkaClient.connect(broker.info.host, broker.info.port, ssl_context=context)
    try:
        await client.request(create_topics_request([("fine", 1, 1, {})]), timeout=10)
    finally:
        await client.close()


async def test_silent_sockets_count_against_the_per_ip_limit(tls_broker):
    broker, pki = tls_broker
    held = [silent_socket(broker.info.port) for _ in range(PER_IP)]
    try:
        deadline = time.monotonic() + 5
        while connection_count(broker) < PER_IP and time.monotonic() < deadline:
            time.sleep(0.05)
        assert connection_count(broker) == PER_IP  # counted before any handshake
        extra = silent_socket(broker.info.port)
        took = closed_by_peer(extra, within=1.0)
        assert took is not None and took < 1.0, "a socket past max.connections.per.ip was not closed at once"
        extra.close()
    finally:
        for sock in held:
            sock.close()


async def test_an_unfinished_handshake_is_dropped_and_frees_its_slot(tls_broker):
    broker, pki = tls_broker
    held = [silent_socket(broker.info.port) for _ in range(PER_IP)]
    try:
        for sock in held:  # TLS_HANDSHAKE_TIMEOUT_S (1.5 s here): each is dropped
            took = closed_by_peer(sock, within=5.0)
            assert took is not None, "a socket that never shook hands was kept"
        deadline = time.monotonic() + 5
        while connection_count(broker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert connection_count(broker) == 0
        await round_trip(broker, pki)  # the slots are free again: a real client gets in
    finally:
        for sock in held:
            sock.close()
