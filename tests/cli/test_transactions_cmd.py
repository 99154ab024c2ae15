"""`tinystream transactions list | describe | hanging` against a broker with an open transaction (confluent-kafka)."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from tinystream.cli import cli
from tinystream.testing.broker import BrokerThread, test_settings

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    settings = test_settings(tmp_path_factory.mktemp("data"), **{"transaction.state.log.num.partitions": 3})
    with BrokerThread(settings) as running:
        ok = CliRunner().invoke(cli, ["topics", "create", "orders", "-p", "2", "-b", running.bootstrap])
        assert ok.exit_code == 0, ok.output
        producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "transactional.id": "cli-tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("orders", value=b"open", partition=1)
        assert producer.flush(20) == 0
        yield running
        producer.abort_transaction(30)


def run(broker, *args: str):
    result = CliRunner().invoke(cli, ["transactions", *args, "-b", broker.bootstrap])
    assert result.exit_code == 0, result.output
    return result.output


def test_list_and_describe(broker) -> None:
    listed = orjson.loads(run(broker, "list", "--json"))
    assert [(t["transactional_id"], t["state"]) for t in listed] == [("cli-tx", "Ongoing")]
    assert "cli-tx" in run(broker, "list", "--state", "Ongoing")
    assert orjson.loads(run(broker, "list", "--state", "CompleteCommit", "--json")) == []
    described = orjson.loads(run(broker, "describe", "cli-tx", "--json"))
    assert described["state"] == "Ongoing" and described["partitions"] == ["orders-1"]


def test_hanging(broker) -> None:
    assert "no hanging transactions" in run(broker, "hanging")  # its coordinator is finishing it
    rows = orjson.loads(run(broker, "hanging", "--max-transaction-timeout", "0", "--json"))
    assert [(r["topic"], r["partition"], r["start_offset"]) for r in rows] == [("orders", 1, 0)]


def test_group_lag_by_isolation_level(broker) -> None:
    """An open transaction holds the last stable offset: lag to it is smaller than lag to the high watermark."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lagging",
                                         "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("orders", 1, 0)], asynchronous=False)
    consumer.close()

    def lag(isolation: str) -> str:
        out = CliRunner().invoke(cli, ["groups", "describe", "lagging", "--isolation", isolation,
                                       "-b", broker.bootstrap])
        assert out.exit_code == 0, out.output
        return [line.split() for line in out.output.splitlines() if line.startswith("orders")][0]

    assert lag("read_uncommitted")[2:] == ["0", "1", "1"]  # committed, end (HW), lag
    assert lag("read_committed")[2:] == ["0", "0", "0"]  # the open transaction starts at 0: LSO 0


def test_metrics_show_the_open_transaction(broker) -> None:
    text = broker.call(lambda b: b.metrics.exposition()).decode()  # on the broker's loop, as a scrape
    assert 'tinystream_open_transactions{partition="1",topic="orders"} 1.0' in text
    assert 'tinystream_last_stable_offset{partition="1",topic="orders"} 0.0' in text
    assert 'tinystream_high_watermark{partition="1",topic="orders"} 1.0' in text
    assert 'tinystream_transactional_ids{state="Ongoing"} 1.0' in text
