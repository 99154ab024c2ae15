"""Client quotas set and read back with Kafka's own kafka-configs.sh, against both brokers.

Same commands, same assertions on TinyStream and Apache Kafka: a client-id
quota and a user quota (producer_byte_rate, consumer_byte_rate) are added,
described, one key deleted, described again. Enforcement is in
tests/broker/quotas/test_throttling.py (it measures a throttled producer).
"""

from __future__ import annotations

import uuid

import pytest
from compat_helpers import require_client

from tinystream.testing.peers.apache_kafka import run_java_tool

pytestmark = pytest.mark.compat

CONFIG_COMMAND = "kafka.admin.ConfigCommand"


def configs(bootstrap: str, *args: str) -> str:
    out = run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", bootstrap, *args], timeout=90)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


@pytest.mark.parametrize("entity_type", ["clients", "users"])
def test_kafka_configs_sets_describes_and_deletes_quotas(bootstrap, entity_type):
    require_client("java")
    name = f"quota-{uuid.uuid4().hex[:8]}"
    entity = ["--entity-type", entity_type, "--entity-name", name]
    added = configs(bootstrap, "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
                    *entity)
    assert "Completed updating config" in added, added
    described = configs(bootstrap, "--describe", *entity)
    assert "producer_byte_rate=1048576.0" in described and "consumer_byte_rate=2097152.0" in described, described
    assert name in described, described
    configs(bootstrap, "--alter", "--delete-config", "consumer_byte_rate", *entity)
    again = configs(bootstrap, "--describe", *entity)
    assert "producer_byte_rate=1048576.0" in again and "consumer_byte_rate" not in again, again
    everything = configs(bootstrap, "--describe", "--entity-type", entity_type)  # all entities of the type
    assert name in everything, everything


def test_kafka_configs_refuses_an_unknown_quota_key(bootstrap):
    require_client("java")
    out = run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", bootstrap, "--alter", "--add-config",
                                         "no_such_rate=5", "--entity-type", "clients", "--entity-name", "x"],
                        timeout=90)
    assert out.returncode != 0
    assert "no_such_rate" in out.stdout + out.stderr
