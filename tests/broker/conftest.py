"""Fixtures for the broker's tests, on the test's event loop.

- One in-process broker (`broker`), and raw protocol clients to it
  (`connect`, `client`): handlers, server and topics tests.
- A real controller service and three brokers on 127.0.0.1 (`controller`,
  `cluster`): replication and control tests. `cluster.start(broker_id)`
  starts (or restarts, on the same data dir) a broker registered with the
  controller; `cluster.stop(broker_id, crash=True)` stops it without fencing,
  so the controller only learns of it by session expiry. Timeouts are short
  (session 3 s, replica lag 2 s) so failures show quickly.
"""

from __future__ import annotations

import asyncio

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import broker_principal, read_secret, token_for, write_token_file
from tinystream.controller_client import ControllerClient
from tinystream.dev.replication import replication_settings
from tinystream.operator.service.app import ControllerInfo, ControllerServer
from tinystream.testing.broker import test_settings
from tinystream.testing.waiting import wait_until_async

# -- one broker ------------------------------------------------------------------------------

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


# -- a controller and three brokers ---------------------------------------------------------

SESSION_TIMEOUT_MS = 3000
LAG_TIME_MS = 2000


class Cluster:
    def __init__(self, tmp_path, controller: ControllerInfo) -> None:
        self.tmp_path = tmp_path
        self.url = controller.url
        self.secret = read_secret(controller.secret_file)
        self.brokers: dict[int, Broker] = {}
        self.admin = ControllerClient(self.url, token=controller.admin_token)
        self._clients: list[KafkaClient] = []

    async def start(self, broker_id: int, **overrides) -> Broker:
        token_file = self.tmp_path / "tokens" / f"broker-{broker_id}"
        write_token_file(token_file, token_for(self.secret, broker_principal(broker_id)))
        settings = test_settings(
            self.tmp_path / f"broker-{broker_id}",
            **{
                "broker.id": broker_id,
                "host": "127.0.0.1",
                "controller.url": self.url,
                "controller.token.file": str(token_file),
                "replica.lag.time.max.ms": LAG_TIME_MS,
                "broker.heartbeat.interval.ms": 500,
                "offsets.topic.replication.factor": 3,
                # Brokers prove to each other that they are brokers, on their own listener (unless the
                # test gives the listeners itself).
                **({} if "listeners" in overrides
                   else replication_settings(self.tmp_path / "replication", host="127.0.0.1", port=0)),
                **overrides,
            },
        )
        broker = Broker(settings)
        await broker.start()
        self.brokers[broker_id] = broker
        return broker

    async def stop(self, broker_id: int, *, crash: bool = False) -> None:
        broker = self.brokers.pop(broker_id)
        await broker.stop(fence=not crash)

    async def client(self, broker_id: int) -> KafkaClient:
        info = self.brokers[broker_id].info
        c = await KafkaClient.connect(info.host, info.port)
        self._clients.append(c)
        return c

    def bootstrap(self) -> str:
        return ",".join(b.info.bootstrap for b in self.brokers.values())

    async def partition(self, topic: str, index: int) -> dict:
        image = (await self.admin.metadata()).image
        for t in image["topics"]:
            if t["name"] == topic:
                return t["partitions"][index]
        raise KeyError(topic)

    def replica(self, broker_id: int, topic: str, index: int):
        return self.brokers[broker_id].replicas.get(TopicPartition(topic, index))

    async def close(self) -> None:
        for c in self._clients:
            await c.close()
        for broker_id in list(self.brokers):
            await self.stop(broker_id)
        await self.admin.close()


@pytest.fixture
async def controller(tmp_path):
    settings = ControllerSettings(**{
        "port": 0,
        "state.file": str(tmp_path / "controller" / "state.json"),
        "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
        "default.replication.factor": 3,
    })
    server = ControllerServer(settings)
    info = await server.start()
    try:
        yield info
    finally:
        await server.stop()


@pytest.fixture
def cluster_overrides() -> dict[int, dict]:
    """Override in a module to give broker i of `cluster` its own settings (Kafka names): {i: {...}}."""
    return {}


@pytest.fixture
async def cluster(tmp_path, controller, cluster_overrides):
    c = Cluster(tmp_path, controller)
    await asyncio.gather(*(c.start(i, **cluster_overrides.get(i, {})) for i in (1, 2, 3)))
    await wait_until_async(lambda: all(len(b.cluster.brokers()) == 3 for b in c.brokers.values()), what="3 live brokers")
    try:
        yield c
    finally:
        await c.close()
