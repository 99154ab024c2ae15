"""Cluster admin through Kafka's own tools and the clients' admin APIs, against both brokers.

Same requests, same assertions on TinyStream and Apache Kafka (one broker each):
- log dirs (kafka-log-dirs.sh, kafka-python): every partition of the topic is in
  one log dir, the dir has no error, the sizes add up to what was written;
- leader election (kafka-leader-election.sh, confluent-kafka): on one broker the
  preferred replica always leads, so every election is "not needed"; an unknown
  partition is named as such. The election that moves a leader needs several
  brokers: tests/broker/handlers/test_elect_leaders.py;
- reassignment (kafka-reassign-partitions.sh): on one broker a partition can only be
  "moved" to where it is, which completes at once; a broker that does not exist is
  refused with Kafka's reason. Moves between brokers: test_partition_reassignments.py;
- reassignment throttles (KIP-73): `--execute --throttle` sets both rates on the
  broker and the topic's throttled-replicas lists (read back with DescribeConfigs),
  `--verify` removes them again. A throttle acting on a move: tests/broker/replication/
  test_throttle_cluster.py.
"""

from __future__ import annotations

import json

import compat_helpers as ch
import pytest
from compat_helpers import require_client

from tinystream.testing.peers.apache_kafka import run_java_tool

pytestmark = pytest.mark.compat

LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand"
LEADER_ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


@pytest.fixture
def written_topic(bootstrap, new_topic) -> str:
    name = new_topic(partitions=2)
    ch.produce("confluent", bootstrap, name, ch.make_records(40, pad_to=200))
    return name


def test_kafka_log_dirs_describe(bootstrap, written_topic):
    require_client("java")
    out = run_java_tool(LOG_DIRS_COMMAND, ["--bootstrap-server", bootstrap, "--describe",
                                           "--topic-list", written_topic], timeout=90)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    (broker,) = report["brokers"]
    partitions = {p["partition"]: p for d in broker["logDirs"] for p in d["partitions"]}
    assert all(d["error"] is None and d["logDir"].startswith("/") for d in broker["logDirs"])
    assert set(partitions) == {f"{written_topic}-0", f"{written_topic}-1"}
    assert sum(p["size"] for p in partitions.values()) > 40 * 200
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in partitions.values())


def test_kafka_python_describe_log_dirs(bootstrap, written_topic):
    require_client("kafka-python")
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        answer = admin.describe_log_dirs({written_topic: [0, 1]})
    finally:
        admin.close()
    text = json.dumps(answer, default=str)
    assert written_topic in text, text[:2000]
    sizes = [p["partition_size"] for broker in _as_list(answer) for d in _dirs(broker) for t in d["topics"]
             if t["name"] == written_topic for p in t["partitions"]]
    assert len(sizes) == 2 and sum(sizes) > 40 * 200, text[:2000]


def _as_list(answer):
    return answer if isinstance(answer, list) else list(answer.values())


def _dirs(broker):
    return broker["results"] if "results" in broker else broker["log_dirs"]


def test_kafka_leader_election_preferred(bootstrap, written_topic):
    require_client("java")
    out = run_java_tool(LEADER_ELECTION_COMMAND, ["--bootstrap-server", bootstrap, "--election-type", "preferred",
                                                  "--topic", written_topic, "--partition", "1"], timeout=90)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"Valid replica already elected for partitions {written_topic}-1" in out.stdout, out.stdout
    everything = run_java_tool(LEADER_ELECTION_COMMAND, ["--bootstrap-server", bootstrap, "--election-type",
                                                         "preferred", "--all-topic-partitions"], timeout=90)
    assert everything.returncode == 0, everything.stdout[-2000:] + everything.stderr[-2000:]
    assert "Successfully completed" not in everything.stdout  # nothing to move on one broker


def test_confluent_elect_leaders(bootstrap, written_topic):
    require_client("confluent")
    from confluent_kafka import ElectionType, TopicPartition

    admin = ch.confluent_admin(bootstrap)
    wanted = [TopicPartition(written_topic, 0), TopicPartition(written_topic + "-absent", 0)]
    answers = admin.elect_leaders(ElectionType.PREFERRED, wanted).result(timeout=30)
    by_topic = {tp.topic: error and error.name() for tp, error in answers.items()}  # a KafkaError per partition
    assert by_topic == {written_topic: "ELECTION_NOT_NEEDED", written_topic + "-absent": "UNKNOWN_TOPIC_OR_PART"}  # librdkafka's name


def test_kafka_reassign_partitions_execute_verify_and_refuse(bootstrap, written_topic, tmp_path):
    require_client("java")
    admin = ch.confluent_admin(bootstrap)  # held: librdkafka fails the futures of a handle that is collected
    (broker_id,) = [n.id for n in admin.describe_cluster().result(timeout=30).nodes]
    plan = tmp_path / "plan.json"

    def reassign(action: str, replicas: list[int]):
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": written_topic, "partition": 0, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}]}))
        return run_java_tool(REASSIGN_COMMAND, ["--bootstrap-server", bootstrap, action,
                                                "--reassignment-json-file", str(plan)], timeout=90)

    executed = reassign("--execute", [broker_id])
    assert executed.returncode == 0, executed.stdout[-2000:] + executed.stderr[-2000:]
    assert "Successfully started partition reassignment" in executed.stdout, executed.stdout
    verified = reassign("--verify", [broker_id])
    assert verified.returncode == 0, verified.stdout[-2000:] + verified.stderr[-2000:]
    assert f"Reassignment of partition {written_topic}-0 is completed" in verified.stdout, verified.stdout
    refused = reassign("--execute", [broker_id + 100])
    assert refused.returncode != 0
    assert "Unknown broker id" in refused.stdout + refused.stderr or "INVALID_REPLICA_ASSIGNMENT" in (
        refused.stdout + refused.stderr).upper().replace(" ", "_"), refused.stdout[-2000:] + refused.stderr[-2000:]


THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def _described(admin, resource) -> dict:
    (future,) = admin.describe_configs([resource]).values()
    return future.result(timeout=30)


def test_kafka_reassign_partitions_throttle_is_set_and_verify_clears_it(bootstrap, written_topic, tmp_path):
    require_client("java")
    from confluent_kafka.admin import ConfigResource, ConfigSource

    admin = ch.confluent_admin(bootstrap)
    (broker_id,) = [n.id for n in admin.describe_cluster().result(timeout=30).nodes]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": written_topic, "partition": 0, "replicas": [broker_id], "log_dirs": ["any"]}]}))
    broker = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    topic = ConfigResource(ConfigResource.Type.TOPIC, written_topic)

    def reassign(*args: str):
        out = run_java_tool(REASSIGN_COMMAND, ["--bootstrap-server", bootstrap, *args,
                                               "--reassignment-json-file", str(plan)], timeout=90)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        return out.stdout

    executed = reassign("--execute", "--throttle", "1000000")
    assert "The inter-broker throttle limit was set to 1000000 B/s" in executed, executed
    rates = _described(admin, broker)
    for key in THROTTLE_RATES:
        assert rates[key].value == "1000000" and rates[key].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, (
            rates[key])
    listed = _described(admin, topic)
    assert listed["leader.replication.throttled.replicas"].value == f"0:{broker_id}"
    assert listed["leader.replication.throttled.replicas"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    verified = reassign("--verify")
    assert f"Reassignment of partition {written_topic}-0 is completed" in verified, verified
    assert "Clearing broker-level throttles" in verified, verified
    rates = _described(admin, broker)
    assert all(rates[key].source != ConfigSource.DYNAMIC_BROKER_CONFIG.value for key in THROTTLE_RATES if key in rates)
    cleared = _described(admin, topic)
    assert all(cleared[key].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value for key in THROTTLED_REPLICAS if key in cleared)
