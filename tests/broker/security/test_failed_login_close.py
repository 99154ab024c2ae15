"""A refused login is answered, then closed after connection.failed.authentication.delay.ms (Kafka: 100 ms).

Closing at once could reset the socket before the client read SASL_AUTHENTICATION_FAILED; closing with
reading paused left TLS connections open (the close waits for the client's close_notify), so repeated
wrong passwords filled max.connections.per.ip. Both are checked here.
"""

from __future__ import annotations

import asyncio
import ssl
import time

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.protocol.client import KafkaClient, SaslLogin, SaslRefused
from tinystream.testing.broker import sasl_ssl_settings


async def test_refused_logins_get_their_answer_and_are_closed_soon_after(tmp_path):
    pytest.importorskip("trustme")
    settings, truststore = sasl_ssl_settings(tmp_path, users={"alice": "right"}, **{"max.connections.per.ip": 5})
    broker = Broker(settings)
    await broker.start()
    try:
        context = ssl.create_default_context(cafile=str(truststore))
        for _ in range(12):  # more than max.connections.per.ip: each must be gone before the next few
            with pytest.raises(SaslRefused):  # the answer arrived (not a reset connection)
                await KafkaClient.connect(broker.info.host, broker.info.port, ssl_context=context,
                                          sasl=SaslLogin("SCRAM-SHA-512", "alice", "wrong"))
        deadline = time.monotonic() + 5
        while broker.server.connection_count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert broker.server.connection_count == 0
        good = await KafkaClient.connect(broker.info.host, broker.info.port, ssl_context=context,
                                         sasl=SaslLogin("SCRAM-SHA-512", "alice", "right"))
        await good.close()
    finally:
        await broker.stop()


async def test_a_client_retrying_a_wrong_password_does_not_pile_up_connections(tmp_path, caplog):
    kafka = pytest.importorskip("kafka")
    pytest.importorskip("trustme")
    settings, truststore = sasl_ssl_settings(tmp_path, users={"alice": "right"}, **{"max.connections.per.ip": 20})
    broker = Broker(settings)
    await broker.start()
    try:
        def attempt() -> None:  # kafka-python retries bootstrapping with backoff until max_block_ms
            with pytest.raises(kafka.errors.KafkaError):
                kafka.KafkaProducer(bootstrap_servers=broker.info.bootstrap, security_protocol="SASL_SSL",
                                    ssl_cafile=str(truststore), sasl_mechanism="SCRAM-SHA-256",
                                    sasl_plain_username="alice", sasl_plain_password="wrong",
                                    max_block_ms=4000, request_timeout_ms=4000, reconnect_backoff_max_ms=100)

        await asyncio.to_thread(attempt)
        assert "SaslAuthenticationFailedError" in caplog.text  # every attempt read the broker's answer
        assert "refusing connection" not in caplog.text  # refused logins did not fill max.connections.per.ip
        deadline = time.monotonic() + 5
        while broker.server.connection_count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert broker.server.connection_count == 0
    finally:
        await broker.stop()
