"""A controller whose state was reset names a new cluster: the broker stops and keeps its data (issue 12, 5).

Before, a running broker re-registered, logged the new cluster id, then applied
the new, empty image and deleted every partition it did not list: resetting
the operator's status.controller wiped the whole cluster's data.
"""

from __future__ import annotations

import asyncio

from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import broker_principal, read_secret, token_for, write_token_file
from tinystream.operator.service.app import ControllerServer
from tinystream.testing.broker import create_topics_request, now_batch, produce_request, test_settings


def controller_settings(tmp_path, name: str, port: int = 0) -> ControllerSettings:
    return ControllerSettings(**{"port": port, "state.file": str(tmp_path / name / "state.json"),
                                 "controller.secret.file": str(tmp_path / "controller.secret"),
                                 "broker.session.timeout.ms": 3000, "dashboard.enabled": False})


async def test_a_reset_controller_stops_the_broker_without_deleting_data(tmp_path):
    first = ControllerServer(controller_settings(tmp_path, "first"))
    info = await first.start()
    token_file = tmp_path / "broker-1.token"
    write_token_file(token_file, token_for(read_secret(info.secret_file), broker_principal(1)))
    broker = Broker(test_settings(tmp_path / "broker-1", **{
        "broker.id": 1, "host": "127.0.0.1", "controller.url": info.url, "controller.token.file": str(token_file),
        "broker.heartbeat.interval.ms": 200}))
    await broker.start()
    servers = [first]
    try:
        client = await KafkaClient.connect(broker.info.host, broker.info.port)
        created = await client.request(create_topics_request([("kept", 1, 1, {})]))
        assert created.topics[0].error_code == ErrorCode.none
        for _ in range(100):
            written = await client.request(produce_request("kept", 0, now_batch([(b"k", b"acknowledged")]), acks=-1))
            if written.responses[0].partition_responses[0].error_code == ErrorCode.none:
                break
            await asyncio.sleep(0.05)
        assert written.responses[0].partition_responses[0].error_code == ErrorCode.none
        await client.close()
        partition_dir = tmp_path / "broker-1" / "kept-0"
        assert partition_dir.is_dir() and any(p.stat().st_size for p in partition_dir.glob("*.log"))

        await servers.pop().stop()  # the state is lost: a new controller on the same port makes a new cluster
        second = ControllerServer(controller_settings(tmp_path, "second", port=int(info.url.rsplit(":", 1)[1])))
        new_info = await second.start()
        servers.append(second)
        assert new_info.cluster_id != info.cluster_id

        await asyncio.wait_for(broker.wait_fatal(), timeout=15)
        assert new_info.cluster_id in broker.control.fatal_error and info.cluster_id in broker.control.fatal_error
        await asyncio.sleep(1.0)  # the new image (no topics) keeps arriving: none of it is applied
        assert partition_dir.is_dir() and any(p.stat().st_size for p in partition_dir.glob("*.log"))
        assert broker.replicas.get(TopicPartition("kept", 0)) is not None
    finally:
        await broker.stop()
        for server in servers:
            await server.stop()
