"""Dynamic broker configs and broker loggers through Kafka's own kafka-configs.sh, against both brokers.

Same commands, same assertions on TinyStream and Apache Kafka (one broker each):
- `--entity-type brokers --entity-name <id>`: message.max.bytes is added, described
  as a DYNAMIC_BROKER_CONFIG, deleted again;
- `--entity-type brokers --entity-default`: log.retention.ms is added, described at
  the default level and, on the broker, as a DYNAMIC_DEFAULT_BROKER_CONFIG, deleted;
- a broker config that cannot change live (num.partitions) is refused;
- `--entity-type broker-loggers`: the loggers with their levels (root among them);
  one is set to DEBUG and read back, then deleted (back to what it was); a level
  Kafka does not know is refused.
Per-level rules and live effects: tests/broker/handlers/test_broker_configs.py.
"""

from __future__ import annotations

import re

import compat_helpers as ch
import pytest
from compat_helpers import require_client

from tinystream.testing.peers.apache_kafka import run_java_tool

pytestmark = pytest.mark.compat

CONFIG_COMMAND = "kafka.admin.ConfigCommand"


def run(bootstrap: str, *args: str):
    return run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", bootstrap, *args], timeout=90)


def configs(bootstrap: str, *args: str) -> str:
    out = run(bootstrap, *args)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def entries(described: str) -> dict[str, str]:
    """kafka-configs.sh --describe lines `  name=value sensitive=false synonyms={...}` -> {name: line}."""
    found = {}
    for line in described.splitlines():
        match = re.match(r"^\s+([^=\s]+)=(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def value(line: str) -> str:
    return line.split(" sensitive=", 1)[0]


@pytest.fixture
def broker_id(bootstrap) -> str:
    admin = ch.confluent_admin(bootstrap)
    (node,) = admin.describe_cluster().result(timeout=30).nodes
    return str(node.id)


def test_kafka_configs_alters_describes_and_deletes_a_broker_config(bootstrap, broker_id):
    require_client("java")
    broker = ["--entity-type", "brokers", "--entity-name", broker_id]
    try:
        added = configs(bootstrap, "--alter", "--add-config", "message.max.bytes=2000000", *broker)
        assert f"Completed updating config for broker {broker_id}" in added, added
        described = entries(configs(bootstrap, "--describe", *broker))
        assert value(described["message.max.bytes"]) == "2000000", described
        assert "DYNAMIC_BROKER_CONFIG:message.max.bytes=2000000" in described["message.max.bytes"], described
        everything = entries(configs(bootstrap, "--describe", "--all", *broker))
        assert value(everything["message.max.bytes"]) == "2000000"
        assert "DEFAULT_CONFIG:message.max.bytes=1048588" in everything["message.max.bytes"], everything
    finally:
        configs(bootstrap, "--alter", "--delete-config", "message.max.bytes", *broker)
    assert "message.max.bytes" not in entries(configs(bootstrap, "--describe", *broker))
    everything = entries(configs(bootstrap, "--describe", "--all", *broker))
    assert value(everything["message.max.bytes"]) == "1048588"


def test_kafka_configs_alters_describes_and_deletes_the_cluster_default(bootstrap, broker_id):
    require_client("java")
    default = ["--entity-type", "brokers", "--entity-default"]
    try:
        added = configs(bootstrap, "--alter", "--add-config", "log.retention.ms=86400000", *default)
        assert "Completed updating default config for brokers in the cluster" in added, added
        described = entries(configs(bootstrap, "--describe", *default))
        assert value(described["log.retention.ms"]) == "86400000", described
        assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400000" in described["log.retention.ms"]
        on_broker = entries(configs(bootstrap, "--describe", "--all", "--entity-type", "brokers",
                                    "--entity-name", broker_id))
        assert value(on_broker["log.retention.ms"]) == "86400000"
        assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400000" in on_broker["log.retention.ms"]
    finally:
        configs(bootstrap, "--alter", "--delete-config", "log.retention.ms", *default)
    assert "log.retention.ms" not in entries(configs(bootstrap, "--describe", *default))


def test_kafka_configs_refuses_a_broker_config_that_cannot_change_live(bootstrap, broker_id):
    require_client("java")
    out = run(bootstrap, "--alter", "--add-config", "num.partitions=3", "--entity-type", "brokers",
              "--entity-name", broker_id)
    assert out.returncode != 0
    assert "num.partitions" in out.stdout + out.stderr


def test_kafka_configs_describes_and_alters_broker_loggers(bootstrap, broker_id):
    require_client("java")
    loggers = ["--entity-type", "broker-loggers", "--entity-name", broker_id]
    before = {name: value(line) for name, line in entries(configs(bootstrap, "--describe", *loggers)).items()}
    assert "root" in before, before
    levels = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF", "ALL"}
    assert set(before.values()) <= levels, before
    # TinyStream's own package logger, else the first of Kafka's that is not at DEBUG already.
    name = "tinystream.broker" if "tinystream.broker" in before else next(
        n for n, level in sorted(before.items()) if n != "root" and level != "DEBUG")
    try:
        configs(bootstrap, "--alter", "--add-config", f"{name}=DEBUG", *loggers)
        after = {n: value(line) for n, line in entries(configs(bootstrap, "--describe", *loggers)).items()}
        assert after[name] == "DEBUG", after
        refused = run(bootstrap, "--alter", "--add-config", f"{name}=LOUD", *loggers)
        assert refused.returncode != 0
    finally:
        configs(bootstrap, "--alter", "--delete-config", name, *loggers)
    again = {n: value(line) for n, line in entries(configs(bootstrap, "--describe", *loggers)).items()}
    assert again[name] == before[name], (before[name], again.get(name))
