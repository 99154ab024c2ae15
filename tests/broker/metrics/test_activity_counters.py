"""Group and log activity counters, read back from a real broker's /metrics.

kafka-python consumers join, commit, leave and let a session time out; a
topic with tiny segments and a short retention loses its old segments. The
counters in broker/groups/stats.py and on Partition must say exactly that.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import uuid

from prometheus_client.parser import text_string_to_metric_families

from tinystream.testing.broker import BrokerThread, test_settings
from tinystream.testing.waiting import wait_until

QUIET_CONSUMER = """
import sys, time
from kafka import KafkaConsumer
bootstrap, group, topic = sys.argv[1:]
c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=6000, heartbeat_interval_ms=1000,
                  enable_auto_commit=False)
c.subscribe([topic])
while not c.assignment():
    c.poll(timeout_ms=200)
print("assigned", flush=True)
time.sleep(60)
"""


def scrape(broker: BrokerThread) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"{broker.info.admin_url}/metrics", timeout=5) as r:  # noqa: S310 - loopback
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_group_counters_count_joins_leaves_timeouts_rebalances_and_commits(tmp_path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.structs import OffsetAndMetadata

    topic, group = f"act-{uuid.uuid4().hex[:6]}", "act-readers"
    with BrokerThread(test_settings(tmp_path / "data")) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(topic, 1, 1)])  # metadata known before anyone joins: no extra rejoin
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(30):
            producer.send(topic, b"r%d" % i, partition=0)
        producer.flush()
        producer.close()

        def consumer(**kw):
            c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                              auto_offset_reset="earliest", **kw)
            c.subscribe([topic])
            return c

        first = consumer()
        seen = 0
        while seen < 30:
            seen += sum(len(rs) for rs in first.poll(timeout_ms=500).values())
        first.commit({TopicPartition(topic, 0): OffsetAndMetadata(10, "", -1)})
        first.commit({TopicPartition(topic, 0): OffsetAndMetadata(30, "", -1)})
        first.close()  # LeaveGroup

        # A consumer process killed with SIGKILL never leaves: its session times out.
        quiet = subprocess.Popen([sys.executable, "-c", QUIET_CONSUMER, broker.bootstrap, group, topic],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert quiet.stdout.readline().strip() == "assigned"
        finally:
            quiet.kill()
            quiet.wait()
        wait_until(lambda: value(scrape(broker), "tinystream_consumer_group_expirations_total", group=group) == 1,
                   timeout=20, interval=0.2, what="the group's expiration counted")
        samples = scrape(broker)
        assert value(samples, "tinystream_consumer_group_joins_total", group=group) == 2
        assert value(samples, "tinystream_consumer_group_leaves_total", group=group) == 1
        assert value(samples, "tinystream_consumer_group_commits_total", group=group) == 2
        assert value(samples, "tinystream_consumer_group_records_committed_total", group=group) == 20
        by_cause = {c: value(samples, "tinystream_consumer_group_rebalances_total", group=group, cause=c)
                    for c in ("join", "leave", "session_timeout", "sync_timeout", "assignment_error")}
        # kafka-python rejoins once right after its first generation (its leader re-checks the metadata it
        # assigned from), so "join" is at least one per consumer; the other causes are exact.
        assert by_cause["join"] >= 2
        assert {c: n for c, n in by_cause.items() if c != "join"} == {
            "leave": 1, "session_timeout": 1, "sync_timeout": 0, "assignment_error": 0}
        assert value(samples, "tinystream_log_records_appended_total", topic=topic, partition="0") == 30
        assert value(samples, "tinystream_log_records_read_total", topic=topic, partition="0") == 30


def test_log_counters_count_records_expired_by_retention(tmp_path) -> None:
    from kafka import KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    topic = f"expiring-{uuid.uuid4().hex[:6]}"
    settings = test_settings(tmp_path / "data", **{"log.retention.check.interval.ms": 200})
    with BrokerThread(settings) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"segment.bytes": "1024", "retention.ms": "600000"})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, batch_size=1)
        for _ in range(40):
            producer.send(topic, b"x" * 100, partition=0).get(timeout=10)
        producer.close()
        samples = scrape(broker)
        assert value(samples, "tinystream_log_records_appended_total", topic=topic, partition="0") == 40
        assert value(samples, "tinystream_log_records_expired_total", topic=topic, partition="0") == 0

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "1",
                                                                                       "segment.bytes": "1024"})])
        admin.close()
        wait_until(lambda: value(scrape(broker), "tinystream_log_records_expired_total", topic=topic, partition="0") > 0,
                   timeout=20, interval=0.2, what="expired records counted")
        samples = scrape(broker)
        expired = value(samples, "tinystream_log_records_expired_total", topic=topic, partition="0")
        start = value(samples, "tinystream_log_start_offset", topic=topic, partition="0")
        assert expired == start > 0  # every offset retention removed is counted, once
        assert value(samples, "tinystream_log_records_read_total", topic=topic, partition="0") == 0
