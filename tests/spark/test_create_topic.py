"""The pipelines' topics take the cluster's replication factor (CreateTopics with -1, KIP-464).

Found on a real cluster (e2e/kind, min.insync.replicas=2): topics created with replication factor 1
took no acks=all write at all. A one-broker cluster whose default.replication.factor is 2 shows which
factor the request asked for: the cluster's default is refused there, a hard-coded 1 is not.
"""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka.admin import AdminClient  # noqa: E402

from tinystream.spark.events import create_topic  # noqa: E402
from tinystream.testing.broker import BrokerThread, test_settings  # noqa: E402


@pytest.fixture
def broker_rf2(tmp_path):
    thread = BrokerThread(test_settings(tmp_path, **{"default.replication.factor": 2}))
    info = thread.start()
    yield f"127.0.0.1:{info.port}"
    thread.stop()


def test_create_topic_asks_for_the_cluster_default_replication_factor(broker_rf2) -> None:
    with pytest.raises(Exception, match="REPLICATION_FACTOR"):  # 2 replicas on 1 broker: the default was used
        create_topic(broker_rf2, "events", partitions=1)
    create_topic(broker_rf2, "explicit", partitions=1, replication_factor=1)
    topics = AdminClient({"bootstrap.servers": broker_rf2}).list_topics(timeout=10).topics
    assert "explicit" in topics and "events" not in topics
