"""ControllerClient against a real controller: a broker's life, and error translation."""

from __future__ import annotations

import socket

import pytest
from service_helpers import Controller

from tinystream.controller_client import (
    REREGISTER_ERRORS,
    ControllerClient,
    ControllerRefused,
    ControllerUnavailable,
    MetadataReply,
)


async def test_a_brokers_life_through_the_client(controller: Controller) -> None:
    async with ControllerClient(controller.url + "/", token=controller.info.admin_token) as client:  # slash: fine
        assert (await client.health())["cluster_id"] == controller.info.cluster_id
        reg = await client.register_broker(broker_id=5, incarnation_id="x", host="127.0.0.1", port=9092, rack="r1")
        assert reg.fenced
        meta = await client.metadata(since=-1)
        assert isinstance(meta, MetadataReply) and meta.changed
        assert meta.image["brokers"][0] == {
            "broker_id": 5, "host": "127.0.0.1", "port": 9092, "rack": "r1", "incarnation_id": "x",
            "epoch": reg.broker_epoch, "fenced": True, "drained": False,
        }
        hb = await client.heartbeat(5, broker_epoch=reg.broker_epoch, metadata_version=meta.version)
        assert not hb.fenced and hb.newer_image_available
        meta = await client.metadata(since=meta.version)
        assert meta.changed and meta.image["brokers"][0]["fenced"] is False

        created = await client.create_topic("t", partitions=2, config={"cleanup.policy": "compact"})
        assert created.topic.name == "t" and created.topic.config == {"cleanup.policy": "compact"}
        p = (await client.describe_topic("t")).partitions[0]
        assert (p.leader, p.isr, p.replicas) == (5, (5,), (5,))
        altered = await client.alter_partition(
            broker_id=5, broker_epoch=reg.broker_epoch, topic="t", partition=0,
            leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch, isr=[5],
        )
        assert altered.partition == p  # unchanged ISR: accepted, nothing to do
        state = await client.state()
        assert state["state"]["image"]["version"] == (await client.metadata()).version
        assert state["state"]["sessions"][0]["broker_id"] == 5
        assert (await client.openapi())["openapi"].startswith("3.")


async def test_refusals_carry_the_kafka_error(controller: Controller) -> None:
    with pytest.raises(ControllerRefused) as info:
        await controller.client.heartbeat(3, broker_epoch=1, metadata_version=0)
    exc = info.value
    assert (exc.error, exc.code, exc.status) == ("BROKER_ID_NOT_REGISTERED", 102, 404)
    assert exc.error in REREGISTER_ERRORS
    assert str(exc).startswith("BROKER_ID_NOT_REGISTERED: ")


async def test_no_controller_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        async with ControllerClient(f"http://127.0.0.1:{port}", timeout_s=2.0) as client:
            with pytest.raises(ControllerUnavailable) as info:
                await client.metadata()
    assert info.value.error is None and info.value.status is None
    assert "127.0.0.1" in str(info.value)
