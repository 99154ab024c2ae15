"""Client quotas set and read back with Kafka's own kafka-configs.sh, against both brokers.

Same commands, same assertions on TinyStream and Apache Kafka: a client-id
quota and a user quota (producer_byte_rate, consumer_byte_rate) are added,
described, one key deleted, described again. Enforcement is in
tests/broker/quotas/test_throttling.py (it measures a throttled producer) and
test_request_quota.py; controller_mutation_rate (KIP-599) is enforced here on
both brokers with kafka-topics.sh: the create that crosses the quota is done,
the next one refused.
"""

from __future__ import annotations

import uuid

import pytest
from compat_helpers import require_client

from tinystream.testing.peers.apache_kafka import TOPIC_COMMAND, run_java_tool

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


def test_controller_mutation_rate_lets_the_crossing_create_through_and_refuses_the_next(bootstrap, tmp_path):
    require_client("java")
    tag = uuid.uuid4().hex[:8]
    client_id, first_topic, second_topic = f"mut-{tag}", f"mut-a-{tag}", f"mut-b-{tag}"
    entity = ["--entity-type", "clients", "--entity-name", client_id]
    # burst 0.1 x 11 s: 1.1 partitions; 20 cross it, and refilling takes ~190 s
    configs(bootstrap, "--alter", "--add-config", "controller_mutation_rate=0.1", *entity)
    assert "controller_mutation_rate=0.1" in configs(bootstrap, "--describe", *entity)
    props = tmp_path / "admin.properties"
    # The admin client retries a throttled topic until its API timeout (KIP-599): keep that short.
    props.write_text(f"client.id={client_id}\ndefault.api.timeout.ms=6000\nrequest.timeout.ms=5000\n")

    def create(topic: str):
        return run_java_tool(TOPIC_COMMAND, ["--bootstrap-server", bootstrap, "--command-config", str(props),
                                             "--create", "--topic", topic, "--partitions", "20",
                                             "--replication-factor", "1"], timeout=90)

    try:
        first = create(first_topic)
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
        second = create(second_topic)
        out = second.stdout + second.stderr
        assert second.returncode != 0, out[-2000:]
        assert "ThrottlingQuotaExceededException" in out or "throttling quota has been exceeded" in out, out[-2000:]
        listed = run_java_tool(TOPIC_COMMAND, ["--bootstrap-server", bootstrap, "--list"], timeout=90).stdout
        assert first_topic in listed.split() and second_topic not in listed.split(), listed
    finally:
        configs(bootstrap, "--alter", "--delete-config", "controller_mutation_rate", *entity)


def test_kafka_configs_sets_request_percentage_and_controller_mutation_rate_and_refuses_zero(bootstrap):
    require_client("java")
    entity = ["--entity-type", "users", "--entity-name", f"rq-{uuid.uuid4().hex[:8]}"]
    configs(bootstrap, "--alter", "--add-config", "request_percentage=12.5,controller_mutation_rate=3.5", *entity)
    described = configs(bootstrap, "--describe", *entity)
    assert "request_percentage=12.5" in described and "controller_mutation_rate=3.5" in described, described
    refused = run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", bootstrap, "--alter", "--add-config",
                                             "request_percentage=0", *entity], timeout=90)
    assert refused.returncode != 0, refused.stdout[-2000:]
    assert "request_percentage=12.5" in configs(bootstrap, "--describe", *entity)  # unchanged
