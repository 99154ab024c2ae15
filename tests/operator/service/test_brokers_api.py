"""Broker registration, heartbeats, fencing by session expiry, drain and unregister."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from service_helpers import Controller

from tinystream.controller_client import ControllerRefused
from tinystream.testing.waiting import wait_until_async


async def test_register_starts_fenced_and_a_caught_up_heartbeat_unfences(controller: Controller) -> None:
    reg = await controller.register(1)
    assert reg.fenced is True
    assert reg.broker_epoch >= 1 and reg.metadata_version >= reg.broker_epoch
    assert reg.cluster_id == controller.info.cluster_id and len(reg.cluster_id) == 22
    assert reg.session_timeout_ms == 9000

    # A heartbeat from a broker that has not applied its registration yet keeps it fenced.
    behind = await controller.client.heartbeat(1, broker_epoch=reg.broker_epoch, metadata_version=reg.broker_epoch - 1)
    assert behind.fenced is True
    assert behind.newer_image_available is True

    caught_up = await controller.client.heartbeat(1, broker_epoch=reg.broker_epoch, metadata_version=reg.metadata_version)
    assert caught_up.fenced is False
    # Unfencing is itself a change to the image: the broker is told to pull again.
    assert caught_up.metadata_version == reg.metadata_version + 1
    assert caught_up.newer_image_available is True
    assert (await controller.broker_record(1))["fenced"] is False


async def test_retried_registration_keeps_the_epoch_a_new_incarnation_gets_a_new_one(controller: Controller) -> None:
    first = await controller.register(1, incarnation="a")
    again = await controller.register(1, incarnation="a")
    assert again.broker_epoch == first.broker_epoch
    restarted = await controller.register(1, incarnation="b")
    assert restarted.broker_epoch > first.broker_epoch
    with pytest.raises(ControllerRefused) as info:
        await controller.client.heartbeat(1, broker_epoch=first.broker_epoch, metadata_version=restarted.metadata_version)
    assert (info.value.error, info.value.code, info.value.status) == ("STALE_BROKER_EPOCH", 77, 409)


async def test_heartbeat_from_an_unknown_broker_is_404(controller: Controller) -> None:
    status, body = await controller.request(
        "POST", "/v1/brokers/7/heartbeat", {"broker_epoch": 1, "metadata_version": 1}
    )
    assert status == 404
    assert body["error"] == "BROKER_ID_NOT_REGISTERED" and body["code"] == 102
    assert "7" in body["message"]


async def test_want_fence_fences_the_broker(two_brokers: Controller) -> None:
    ctl = two_brokers
    reply = await ctl.client.heartbeat(2, broker_epoch=ctl.epochs[2], metadata_version=10**6, want_fence=True)
    assert reply.fenced is True
    assert (await ctl.broker_record(2))["fenced"] is True


async def test_a_silent_broker_is_fenced_after_the_session_timeout(tmp_path: Path) -> None:
    ctl = Controller(tmp_path / "state.json", session_timeout_ms=1000)
    await ctl.start()
    try:
        await ctl.start_broker(1)
        await ctl.start_broker(2)
        topic = await ctl.client.create_topic("t", partitions=2, replication_factor=2)
        led_by_1 = [p.partition for p in topic.topic.partitions if p.leader == 1]
        assert led_by_1, "placement spreads leaders over both brokers"

        # Broker 1's last word: its session runs from here (a loaded machine once put 0.4 s between
        # its registration and a clock started after the set-up).
        loop = asyncio.get_running_loop()
        before = loop.time()
        await ctl.client.heartbeat(1, broker_epoch=ctl.epochs[1], metadata_version=10**6)
        started = loop.time()

        async def keep_two_alive() -> None:
            while True:
                await ctl.client.heartbeat(2, broker_epoch=ctl.epochs[2], metadata_version=10**6)
                await asyncio.sleep(0.05)

        beats = asyncio.create_task(keep_two_alive())
        try:
            await asyncio.sleep(0.3)  # well within the timeout: nobody is fenced yet
            assert (await ctl.broker_record(1))["fenced"] is False

            async def one_fenced() -> bool:
                return (await ctl.broker_record(1))["fenced"] is True

            await wait_until_async(one_fenced, timeout=4.0, what="broker 1 fenced")
            fenced_at = loop.time()
            assert fenced_at - before >= 0.95 and fenced_at - started < 3.0
            assert (await ctl.broker_record(2))["fenced"] is False  # heartbeats kept it alive
            after = await ctl.client.describe_topic("t")
            assert all(p.leader == 2 for p in after.partitions)
            assert all(1 not in p.isr for p in after.partitions)
            # It comes back: one caught-up heartbeat unfences it, no new registration needed.
            assert await ctl.catch_up(1) is False
            assert (await ctl.broker_record(1))["epoch"] == ctl.epochs[1]
        finally:
            beats.cancel()
    finally:
        await ctl.stop()


async def test_drain_moves_leadership_away_and_undrain_restores_eligibility(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.client.create_topic("t", partitions=4, replication_factor=2)
    drained = await ctl.client.drain_broker(1)
    assert drained.broker is not None and drained.broker["drained"] is True
    assert drained.leaderships == ()
    assert any(a["type"] == "BrokerDrained" for a in drained.actions)
    topic = await ctl.client.describe_topic("t")
    assert all(p.leader == 2 for p in topic.partitions)

    undrained = await ctl.client.undrain_broker(1)
    assert undrained.broker["drained"] is False
    assert undrained.metadata_version > drained.metadata_version


async def test_unregister_removes_the_broker(two_brokers: Controller) -> None:
    ctl = two_brokers
    reply = await ctl.client.unregister_broker(2)
    assert reply.broker is None
    image = await ctl.image()
    assert [b["broker_id"] for b in image["brokers"]] == [1]
    with pytest.raises(ControllerRefused) as info:
        await ctl.client.drain_broker(2)
    assert info.value.error == "BROKER_ID_NOT_REGISTERED" and info.value.status == 404
