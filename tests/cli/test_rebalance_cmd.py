"""`tinystream rebalance` on a real 3-broker dev cluster: a topic skewed onto two brokers is spread over
three with a throttle, and every record stays readable with confluent-kafka, also with a broker gone."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from tinystream.cli import cli
from tinystream.cli.rebalance_cmd import partition_sizes, render
from tinystream.controller_auth import write_token_file
from tinystream.controller_client import ControllerClient
from tinystream.dev.cluster import LocalCluster
from tinystream.testing.waiting import wait_until

RECORDS = 1200
THROTTLE = 1_000_000


def _replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    meta = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(topic, timeout=10)
    return {p.id: list(p.replicas) for p in meta.topics[topic].partitions.values()}


def _dynamic_configs(admin, topic: str, broker: str) -> set[str]:  # noqa: ANN001 - confluent's AdminClient
    from confluent_kafka.admin import ConfigResource, ConfigSource  # noqa: PLC0415

    dynamic = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, topic), ConfigResource(ConfigResource.Type.BROKER, broker)]
    found = set()
    for future in admin.describe_configs(resources).values():
        found |= {name for name, entry in future.result(30).items() if entry.source in dynamic}
    return found


def _broker_configs(cluster: LocalCluster) -> dict:
    async def get() -> dict:
        async with ControllerClient(cluster.controller_url, token=cluster.admin_token) as client:
            return ((await client.metadata()).image or {}).get("broker_configs", {})

    return asyncio.run(get())


def _read_all(bootstrap: str, group: str) -> list[bytes]:
    from confluent_kafka import Consumer  # noqa: PLC0415

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.subscribe(["skewed"])
    values: list[bytes] = []
    try:
        def more() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            return len(values) >= RECORDS

        wait_until(more, timeout=60, interval=0, what=lambda: f"{len(values)}/{RECORDS} records")
    finally:
        consumer.close()
    return values


RATES = {"leader.replication.throttled.rate": str(THROTTLE), "follower.replication.throttled.rate": str(THROTTLE)}


def _watch_rates(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The controller image's broker configs as each /verify the CLI sends finds them (the first one comes
    after execute, while the moves still run or right when they end, before verify takes the rates out)."""
    seen: list[dict] = []
    verify = ControllerClient.rebalance_verify

    async def watching(self: ControllerClient, moves, **kwargs):  # noqa: ANN001, ANN202 - the wrapped method's
        seen.append(((await self.metadata()).image or {}).get("broker_configs", {}))
        return await verify(self, moves, **kwargs)

    monkeypatch.setattr(ControllerClient, "rebalance_verify", watching)
    return seen


def test_rebalance_spreads_a_skewed_topic_and_keeps_every_record(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    cluster = LocalCluster(brokers=3, data_dir=tmp_path / "data", first_port=0, echo=lambda _: None)
    cluster.open()
    try:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        topic = NewTopic("skewed", num_partitions=6, replica_assignment=[[0, 1], [1, 0]] * 3)
        admin.create_topics([topic])["skewed"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
        sent = [f"{i:06d}".encode() + b"x" * 1000 for i in range(RECORDS)]
        for i, value in enumerate(sent):
            producer.produce("skewed", value, partition=i % 6)
        assert producer.flush(30) == 0
        token = tmp_path / "admin.token"
        write_token_file(token, cluster.admin_token)
        base = ["rebalance", "--bootstrap-server", bootstrap, "--controller", cluster.controller_url,
                "--controller-token-file", str(token)]

        preview = CliRunner().invoke(cli, [*base, "--mode", "full", "--json"])
        assert preview.exit_code == 0, preview.output
        proposal = json.loads(preview.output)
        assert proposal["num_replica_movements"] == 4
        assert proposal["data_to_move_bytes"] > 4 * (RECORDS // 6) * 1000
        assert _replicas(bootstrap, "skewed") == {p: [[0, 1], [1, 0]][p % 2] for p in range(6)}  # untouched

        seen = _watch_rates(monkeypatch)
        done = CliRunner().invoke(cli, [*base, "--mode", "full", "--execute", "--throttle", str(THROTTLE)])
        assert done.exit_code == 0, done.output
        assert "done: 4 replica(s) moved" in done.output
        # while moving, the controller had the rate on the brokers moved from (0, 1) and to (2); then none
        assert seen[0]["brokers"] == {"0": RATES, "1": RATES, "2": RATES}, seen[0]
        assert _broker_configs(cluster).get("brokers", {}) == {}

        replicas = _replicas(bootstrap, "skewed")
        assert Counter(b for r in replicas.values() for b in r) == {0: 4, 1: 4, 2: 4}
        assert {r[0] for r in replicas.values()} == {0, 1, 2}
        throttles = {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas", *RATES}
        for broker in ("0", "1", "2"):  # all taken out again, once each broker applied the image
            wait_until(lambda b=broker: not _dynamic_configs(admin, "skewed", b) & throttles, timeout=30,
                       what=lambda b=broker: f"broker {b} without throttles")
        again = CliRunner().invoke(cli, [*base, "--mode", "full"])
        assert "nothing to move" in again.output, again.output

        assert sorted(_read_all(bootstrap, "after-rebalance")) == sent
        cluster.broker(0).stop()
        rest = ",".join(b.bootstrap or "" for b in cluster.brokers[1:])
        assert sorted(_read_all(rest, "without-broker-0")) == sent
    finally:
        cluster.close()


def test_sizes_and_render_read_what_the_clients_give() -> None:
    answer = [{"broker": 0, "log_dirs": [{"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "partition_size": 10}, {"partition_index": 1, "partition_size": 3}]}]}]},
              {"broker": 1, "log_dirs": [{"topics": [{"name": "t", "partitions": [
                  {"partition_index": 0, "partition_size": 7}]}]}]}]
    assert partition_sizes(answer) == {("t", 0): 10, ("t", 1): 3}
    proposal = {"mode": "remove-brokers", "brokers": [2], "num_replica_movements": 1, "num_leader_movements": 0,
                "data_to_move_bytes": 2_000_000, "score_before": 1.5, "score_after": 0.0,
                "loads_before": [{"broker_id": 1, "replicas": 1, "leaders": 1, "disk_bytes": 0},
                                 {"broker_id": 2, "replicas": 1, "leaders": 0, "disk_bytes": 2_000_000}],
                "loads_after": [{"broker_id": 1, "replicas": 1, "leaders": 1, "disk_bytes": 0}],
                "moves": [{"topic": "t", "partition": 0, "before": [1, 2], "after": [1, 3]}]}
    text = "\n".join(render(proposal, sizes_measured=2))
    assert "data to move 2.0 MB" in text and "[1, 2] -> [1, 3]" in text and "1.5000 -> 0.0000" in text
