"""`tinystream groups describe` and the dashboard/metrics on a KIP-848 consumer group (confluent-kafka members)."""

from __future__ import annotations

import asyncio
import time

import pytest
from click.testing import CliRunner

from tinystream.broker.server.admin_http import group_rows
from tinystream.cli import cli
from tinystream.testing.broker import BrokerThread, test_settings

confluent_kafka = pytest.importorskip("confluent_kafka")


def test_describe_shows_members_and_assignment(tmp_path) -> None:
    with BrokerThread(test_settings(tmp_path / "data")) as broker:
        ok = CliRunner().invoke(cli, ["topics", "create", "events", "-p", "2", "-b", broker.bootstrap])
        assert ok.exit_code == 0, ok.output
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kip848",
                                             "group.protocol": "consumer", "client.id": "cli-member",
                                             "enable.auto.commit": False})
        consumer.subscribe(["events"])
        try:
            deadline = time.monotonic() + 30
            while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
                consumer.poll(0.1)
            assert len(consumer.assignment()) == 2
            consumer.commit(offsets=[confluent_kafka.TopicPartition("events", 0, 0)], asynchronous=False)
            out = CliRunner().invoke(cli, ["groups", "describe", "kip848", "-b", broker.bootstrap])
            assert out.exit_code == 0, out.output
            lines = out.output.splitlines()
            assert lines[0].startswith("group kip848  type=consumer  state=Stable  epoch=1")
            assert "assignor=uniform  members=1" in lines[0]
            member = [line for line in lines if line.strip().startswith("member ")]
            assert len(member) == 1 and "client=cli-member" in member[0] and "assignment=events:0,1" in member[0]
            assert any(line.split()[:2] == ["events", "0"] for line in lines)  # the committed offsets' lag table

            # The classic DescribeGroups path still serves classic groups.
            classic = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "old-style",
                                                "enable.auto.commit": False})
            classic.commit(offsets=[confluent_kafka.TopicPartition("events", 1, 0)], asynchronous=False)
            classic.close()
            old = CliRunner().invoke(cli, ["groups", "describe", "old-style", "-b", broker.bootstrap])
            assert old.exit_code == 0 and "state=Empty" in old.output and "type=consumer" not in old.output

            listed = CliRunner().invoke(cli, ["groups", "list", "-b", broker.bootstrap])
            assert {"kip848", "old-style"} <= set(listed.output.split())
            text = broker.call(lambda b: b.metrics.exposition()).decode()  # on the broker's loop, as a scrape
            assert 'tinystream_consumer_group_epoch{group="kip848"} 1.0' in text
            assert 'tinystream_consumer_group_members{group="kip848",state="stable"} 1.0' in text
            assert 'tinystream_consumer_group_epoch{group="old-style"}' not in text  # classic groups have none
            # The dashboard's rows (admin HTTP /api/groups) show the members and who owns each partition.
            rows = asyncio.run_coroutine_threadsafe(group_rows(broker.broker.ctx), broker.loop).result(10)
            (row,) = [r for r in rows if r["group_id"] == "kip848"]
            assert (row["state"], row["protocol_type"], row["protocol"]) == ("Stable", "consumer", "uniform")
            assert row["members"][0]["assignment"] == [{"topic": "events", "partitions": [0, 1]}]
            assert row["offsets"][0]["member_id"] == row["members"][0]["member_id"]
        finally:
            consumer.close()
