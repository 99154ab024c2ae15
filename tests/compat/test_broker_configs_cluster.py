"""Dynamic broker configs are cluster metadata: kafka-configs.sh through one broker, described through another.

Same commands, same assertions on a 2-broker `tinystream dev` cluster (a controller and two broker
processes: tinystream/dev/cluster.py) and a 2-node Apache Kafka KRaft cluster
(tinystream/testing/peers/apache_kafka_cluster.py):
- `--entity-default --alter` with only the first broker as bootstrap; `--describe --all` of the second
  broker, with only the second as bootstrap, shows the value as DYNAMIC_DEFAULT_BROKER_CONFIG;
- `--entity-name <second> --alter` of follower.replication.throttled.rate: the second broker describes it
  as DYNAMIC_BROKER_CONFIG, the first does not have it.
Single-broker rules: test_broker_configs.py; routing inside TinyStream (a change for broker 2 sent to
broker 1): tests/broker/control/test_cluster_broker_configs.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from compat_helpers import require_client

from tinystream.testing.peers.apache_kafka import run_java_tool

pytestmark = [pytest.mark.compat, pytest.mark.slow]

RATE = "follower.replication.throttled.rate"


def configs(bootstrap: str, *args: str) -> str:
    out = run_java_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", bootstrap, *args], timeout=90)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def entries(described: str) -> dict[str, str]:
    """kafka-configs.sh --describe lines `  name=value sensitive=false synonyms={...}` -> {name: line}."""
    return {m.group(1): m.group(2) for line in described.splitlines() if (m := re.match(r"^\s+([^=\s]+)=(.*)$", line))}


def value(line: str) -> str:
    return line.split(" sensitive=", 1)[0]


@dataclass
class TwoBrokers:
    name: str
    bootstraps: list[str]  # one address per broker, in id order
    ids: list[str]


@pytest.fixture(scope="module", params=["tinystream-dev", "kafka-cluster"])
def two_brokers(request, tmp_path_factory):
    require_client("java")
    if request.param == "tinystream-dev":
        from tinystream.dev.cluster import LocalCluster

        cluster = LocalCluster(brokers=2, data_dir=tmp_path_factory.mktemp("dev") / "data", first_port=0,
                               echo=lambda _: None)
        cluster.open()
        try:
            yield TwoBrokers("tinystream-dev", [b.bootstrap for b in cluster.brokers],
                             [str(b.broker_id) for b in cluster.brokers])
        finally:
            cluster.close()
        return
    from tinystream.testing.peers.apache_kafka_cluster import start_kafka_cluster
    from tinystream.testing.peers.errors import PeerUnavailable

    try:
        kafka = start_kafka_cluster(nodes=2, workdir=tmp_path_factory.mktemp("kafka"))
    except PeerUnavailable as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")
    try:
        yield TwoBrokers("kafka-cluster", [n.bootstrap for n in kafka.nodes], ["1", "2"])
    finally:
        kafka.stop()


def test_a_default_set_through_one_broker_is_described_by_the_other(two_brokers: TwoBrokers):
    first, second = two_brokers.bootstraps
    default = ["--entity-type", "brokers", "--entity-default"]
    try:
        added = configs(first, "--alter", "--add-config", "log.retention.ms=86400000", *default)
        assert "Completed updating default config for brokers in the cluster" in added, added
        on_second = entries(configs(second, "--describe", "--all", "--entity-type", "brokers",
                                    "--entity-name", two_brokers.ids[1]))
        assert value(on_second["log.retention.ms"]) == "86400000", on_second
        assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400000" in on_second["log.retention.ms"]
    finally:
        configs(first, "--alter", "--delete-config", "log.retention.ms", *default)
    assert "log.retention.ms" not in entries(configs(second, "--describe", *default))


def test_a_rate_set_for_one_broker_is_that_brokers_only(two_brokers: TwoBrokers):
    first, second = two_brokers.bootstraps
    target = ["--entity-type", "brokers", "--entity-name", two_brokers.ids[1]]
    try:
        added = configs(first, "--alter", "--add-config", f"{RATE}=1048576", *target)
        assert f"Completed updating config for broker {two_brokers.ids[1]}" in added, added
        described = entries(configs(second, "--describe", *target))
        assert value(described[RATE]) == "1048576", described
        assert f"DYNAMIC_BROKER_CONFIG:{RATE}=1048576" in described[RATE], described
        on_first = entries(configs(first, "--describe", "--entity-type", "brokers", "--entity-name",
                                   two_brokers.ids[0]))
        assert RATE not in on_first, on_first
    finally:
        configs(first, "--alter", "--delete-config", RATE, *target)
    assert RATE not in entries(configs(second, "--describe", *target))
