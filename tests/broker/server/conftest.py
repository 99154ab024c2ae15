"""Fixtures: an in-process broker on the test's event loop, and raw protocol clients."""

from __future__ import annotations

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.protocol.client import KafkaClient
from tinystream.testing.broker import test_settings


@pytest.fixture
def settings_overrides() -> dict:
    """Override in a module to change broker settings (Kafka names)."""
    return {}


@pytest.fixture
async def broker(tmp_path, settings_overrides):
    b = Broker(test_settings(tmp_path / "data", **settings_overrides))
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


@pytest.fixture
async def connect(broker):
    """connect() -> a new KafkaClient to the broker (closed at teardown)."""
    clients: list[KafkaClient] = []

    async def make(client_id: str | None = "test") -> KafkaClient:
        c = await KafkaClient.connect(broker.info.host, broker.info.port, client_id=client_id)
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.close()


@pytest.fixture
async def client(connect):
    return await connect()
