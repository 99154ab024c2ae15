"""Metadata pull by version, and the long poll that wakes on a change."""

from __future__ import annotations

import asyncio

from service_helpers import Controller


async def test_metadata_without_since_is_the_whole_image(controller: Controller) -> None:
    status, image = await controller.request("GET", "/v1/metadata")
    assert status == 200
    assert set(image) == {"schema_version", "version", "cluster_id", "brokers", "topics"}
    assert image["cluster_id"] == controller.info.cluster_id


async def test_since_current_version_answers_unchanged_at_once(two_brokers: Controller) -> None:
    version = (await two_brokers.image())["version"]
    status, body = await two_brokers.request("GET", "/v1/metadata", params={"since": str(version)})
    assert (status, body) == (200, {"version": version, "unchanged": True})
    older = await two_brokers.client.metadata(since=version - 1)
    assert older.changed and older.version == version and older.image["version"] == version


async def test_long_poll_wakes_on_a_change(two_brokers: Controller) -> None:
    ctl = two_brokers
    version = (await ctl.image())["version"]
    loop = asyncio.get_running_loop()
    started = loop.time()
    poll = asyncio.create_task(ctl.client.metadata(since=version, wait_ms=5000))
    await asyncio.sleep(0.2)
    assert not poll.done()  # it is waiting
    await ctl.client.create_topic("wake", partitions=1)
    reply = await asyncio.wait_for(poll, 2.0)
    assert loop.time() - started < 1.5  # woken by the change, not by the 5 s timeout
    assert reply.changed and reply.version == version + 1
    assert [t["name"] for t in reply.image["topics"]] == ["wake"]


async def test_long_poll_times_out_unchanged(controller: Controller) -> None:
    version = (await controller.image())["version"]
    loop = asyncio.get_running_loop()
    started = loop.time()
    reply = await controller.client.metadata(since=version, wait_ms=250)
    elapsed = loop.time() - started
    assert not reply.changed and reply.version == version
    assert 0.2 <= elapsed < 2.0


async def test_heartbeats_do_not_wake_long_polls(two_brokers: Controller) -> None:
    ctl = two_brokers
    version = (await ctl.image())["version"]
    poll = asyncio.create_task(ctl.client.metadata(since=version, wait_ms=400))
    for _ in range(3):
        hb = await ctl.client.heartbeat(1, broker_epoch=ctl.epochs[1], metadata_version=version)
        assert hb.newer_image_available is False
        await asyncio.sleep(0.05)
    reply = await poll
    assert not reply.changed


async def test_metadata_query_errors_are_400(controller: Controller) -> None:
    for params, fragment in (
        ({"since": "x"}, "since='x'"),
        ({"since": "-5"}, "below -1"),
        ({"since": "1", "wait_ms": "-1"}, "wait_ms"),
        ({"sinse": "1"}, "sinse"),
    ):
        status, body = await controller.request("GET", "/v1/metadata", params=params)
        assert status == 400 and body["error"] == "INVALID_REQUEST", params
        assert fragment in body["message"], (params, body["message"])


async def test_shutdown_releases_long_polls_at_once(tmp_path) -> None:
    ctl = Controller(tmp_path / "s.json")
    await ctl.start()
    client = ctl.client
    version = (await ctl.image())["version"]
    poll = asyncio.create_task(client.metadata(since=version, wait_ms=5000))
    await asyncio.sleep(0.1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    ctl.client = None  # keep the client open until the poll has its answer
    await ctl.stop()
    assert loop.time() - started < 2.0  # not the 5 s poll, nor the 5 s shutdown grace
    reply = await poll
    assert not reply.changed and reply.version == version
    await client.close()
