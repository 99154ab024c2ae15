"""broker.rack.file: the rack an init container wrote becomes the broker's broker.rack at start-up, and a
real client (kafka-python's admin DescribeCluster, via Metadata) sees it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient

from tinystream.broker.app import BrokerInfo, run_broker
from tinystream.broker.assembly.rack import rack_from_text, with_rack_file
from tinystream.testing.broker import test_settings


@pytest.mark.parametrize(("text", "rack"), [("zone-a\n", "zone-a"), ("  zone-b  ", "zone-b"), ("zone-c\nmore\n", "zone-c"),
                                            ("", None), ("\n  \n", None)])
def test_the_rack_is_the_files_first_line(text, rack):
    assert rack_from_text(text) == rack


def test_the_file_sets_broker_rack(tmp_path: Path):
    (tmp_path / "rack").write_text("zone-a\n")
    settings = with_rack_file(test_settings(tmp_path / "data", **{"broker.rack.file": str(tmp_path / "rack")}))
    assert settings.broker_rack == "zone-a"


def test_an_empty_file_means_no_rack(tmp_path: Path, caplog):
    (tmp_path / "rack").write_text("")
    settings = with_rack_file(test_settings(tmp_path / "data", **{"broker.rack.file": str(tmp_path / "rack")}))
    assert settings.broker_rack is None
    assert "runs without broker.rack" in caplog.text


def test_an_explicit_broker_rack_wins(tmp_path: Path):
    (tmp_path / "rack").write_text("zone-a\n")
    settings = with_rack_file(test_settings(tmp_path / "data", **{"broker.rack": "mine",
                                                                   "broker.rack.file": str(tmp_path / "rack")}))
    assert settings.broker_rack == "mine"


def test_a_missing_file_is_an_error(tmp_path: Path):
    with pytest.raises(ValueError, match="broker.rack.file .*cannot be read"):
        with_rack_file(test_settings(tmp_path / "data", **{"broker.rack.file": str(tmp_path / "absent")}))


async def test_a_started_broker_advertises_the_rack_from_its_file(tmp_path: Path):
    (tmp_path / "rack").write_text("zone-a\n")
    settings = test_settings(tmp_path / "data", **{"broker.rack.file": str(tmp_path / "rack")})
    started: asyncio.Future[BrokerInfo] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_broker(settings, ready=started.set_result))
    try:
        info = await asyncio.wait_for(asyncio.shield(started), 60)
        cluster = await asyncio.to_thread(_describe_cluster, f"{info.host}:{info.port}")
        assert [(b["broker_id"], b["rack"]) for b in cluster["brokers"]] == [(settings.broker_id, "zone-a")], cluster
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _describe_cluster(bootstrap: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="rack-test")
    try:
        return admin.describe_cluster()
    finally:
        admin.close()


async def test_a_broker_whose_file_is_missing_refuses_to_start(tmp_path: Path):
    settings = test_settings(tmp_path / "data", **{"broker.rack.file": str(tmp_path / "absent")})
    with pytest.raises(SystemExit, match="broker.rack.file"):
        await run_broker(settings)
