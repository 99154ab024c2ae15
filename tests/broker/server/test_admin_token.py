"""admin.token.file: the admin HTTP's data needs a bearer token; the kubelet's probes do not (issue 12)."""

from __future__ import annotations

import aiohttp
import pytest

from tinystream.broker.app import Broker
from tinystream.operator.dashboard import HttpClusterSource
from tinystream.testing.broker import test_settings


@pytest.fixture
async def guarded(tmp_path):
    (tmp_path / "admin.token").write_text("s3cret-token\n")
    broker = Broker(test_settings(tmp_path / "data", **{"admin.token.file": str(tmp_path / "admin.token")}))
    await broker.start()
    yield broker
    await broker.stop()


async def test_the_admin_api_needs_the_token_and_probes_do_not(guarded):
    base = guarded.info.admin_url
    async with aiohttp.ClientSession() as http:
        for path in ("/healthz", "/readyz"):
            async with http.get(base + path) as r:
                assert r.status == 200, path
        for path in ("/metrics", "/api/broker", "/api/topics", "/api/partitions", "/api/groups"):
            async with http.get(base + path) as r:
                assert r.status == 401 and "admin token" in (await r.json())["message"], path
            async with http.get(base + path, headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401, path
            async with http.get(base + path, headers={"Authorization": "Bearer s3cret-token"}) as r:
                assert r.status == 200, path


async def test_the_dashboard_source_reads_a_guarded_broker_with_the_token(guarded):
    guarded.topics.create("visible")
    urls = {0: guarded.info.admin_url}
    source = HttpClusterSource(None, admin_urls=lambda _meta: urls, admin_token="s3cret-token")
    refused = HttpClusterSource(None, admin_urls=lambda _meta: urls)
    try:
        seen = await source.snapshot()
        blind = await refused.snapshot()
    finally:
        await source.close()
        await refused.close()
    assert seen.brokers[0].up and any(p.get("topic") == "visible" for p in seen.brokers[0].partitions)
    assert not blind.brokers[0].up


async def test_public_metrics_open_metrics_alone(tmp_path):
    (tmp_path / "admin.token").write_text("s3cret-token\n")
    broker = Broker(test_settings(tmp_path / "data", **{"admin.token.file": str(tmp_path / "admin.token"),
                                                         "admin.metrics.public": True}))
    await broker.start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(broker.info.admin_url + "/metrics") as r:
                assert r.status == 200 and "tinystream_" in await r.text()
            for path in ("/api/broker", "/api/topics", "/api/partitions", "/api/groups"):
                async with http.get(broker.info.admin_url + path) as r:
                    assert r.status == 401, path
    finally:
        await broker.stop()


async def test_a_token_file_not_there_yet_refuses_everyone_and_is_read_once_it_appears(tmp_path):
    """On an upgrade the Secret's new admin-token key may reach a pod's volume after the broker starts:
    the broker serves (probes pass), lets nobody into its data, and takes the token once it is there."""
    token_file = tmp_path / "admin.token"
    broker = Broker(test_settings(tmp_path / "data", **{"admin.token.file": str(token_file)}))
    await broker.start()
    try:
        base = broker.info.admin_url
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/readyz") as r:
                assert r.status == 200
            for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer anything"}):
                async with http.get(base + "/api/broker", headers=headers) as r:
                    assert r.status == 401 and "cannot be read" in (await r.json())["message"]
            token_file.write_text("late-token\n")
            async with http.get(base + "/api/broker", headers={"Authorization": "Bearer late-token"}) as r:
                assert r.status == 200
    finally:
        await broker.stop()
