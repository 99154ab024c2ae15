"""Option validation: the names and rules of Spark's Kafka source, refused with clear messages."""

from __future__ import annotations

import pytest

from tinystream.spark.errors import InvalidOptionError
from tinystream.spark.offsets import TopicPartition
from tinystream.spark.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    Mode,
    PartitionTimestamps,
    SpecificOffsets,
    Subscribe,
    SubscribePattern,
    TimestampStrategy,
    parse_read_options,
    parse_write_options,
)

pytestmark = pytest.mark.spark

BASE = {"bootstrap.servers": "127.0.0.1:9092", "subscribe": "events"}


def read(mode=Mode.STREAMING, **extra):
    return parse_read_options({**BASE, **extra}, mode)


def test_defaults_match_sparks_kafka_source():
    opts = read()
    assert opts.subscription == Subscribe(("events",))
    assert opts.starting == LatestOffsets()
    assert opts.ending is None
    assert opts.fail_on_data_loss is True
    assert opts.include_headers is False
    assert opts.max_offsets_per_trigger is None
    batch = read(Mode.BATCH)
    assert batch.starting == EarliestOffsets() and batch.ending == LatestOffsets()


def test_names_are_case_insensitive_like_spark_options():
    opts = parse_read_options({"Bootstrap.Servers": "h:1", "subscribePattern": "ev.*", "FAILONDATALOSS": "false",
                               "maxOffsetsPerTrigger": "100"}, Mode.STREAMING)
    assert opts.subscription == SubscribePattern("ev.*")
    assert opts.fail_on_data_loss is False
    assert opts.max_offsets_per_trigger == 100


def test_kafka_prefixed_bootstrap_is_an_alias():
    opts = parse_read_options({"kafka.bootstrap.servers": "h:2", "subscribe": "a"}, Mode.BATCH)
    assert opts.bootstrap_servers == "h:2"
    assert "bootstrap.servers" not in opts.client_conf


def test_bootstrap_is_required():
    with pytest.raises(InvalidOptionError, match="bootstrap.servers"):
        parse_read_options({"subscribe": "a"}, Mode.BATCH)


@pytest.mark.parametrize("subs", [{}, {"subscribe": "a", "assign": '{"a": [0]}'},
                                  {"subscribe": "a", "subscribePattern": "a.*"}])
def test_exactly_one_subscription(subs):
    with pytest.raises(InvalidOptionError, match="exactly one"):
        parse_read_options({"bootstrap.servers": "h:1", **subs}, Mode.STREAMING)


def test_subscribe_list_and_assign_and_pattern():
    assert read(subscribe="b, a,,a").subscription == Subscribe(("a", "b"))
    opts = parse_read_options({"bootstrap.servers": "h:1", "assign": '{"t": [1, 0]}'}, Mode.BATCH)
    assert opts.subscription == Assign((TopicPartition("t", 0), TopicPartition("t", 1)))
    pattern = parse_read_options({"bootstrap.servers": "h:1", "subscribePattern": "ev.*"}, Mode.BATCH).subscription
    assert pattern.matches("events") and not pattern.matches("xevents")  # Java's matches(): full match


def test_bad_pattern_is_refused():
    with pytest.raises(InvalidOptionError, match="subscribePattern"):
        parse_read_options({"bootstrap.servers": "h:1", "subscribePattern": "ev(["}, Mode.BATCH)


def test_starting_offsets_json_with_earliest_and_latest_markers():
    opts = read(startingOffsets='{"events": {"0": 5, "1": -2, "2": -1}}')
    assert opts.starting == SpecificOffsets({TopicPartition("events", 0): 5, TopicPartition("events", 1): -2,
                                             TopicPartition("events", 2): -1})


def test_timestamps_take_precedence_like_spark():
    opts = read(startingOffsets="earliest", startingOffsetsByTimestamp='{"events": {"0": 1000}}',
                startingTimestamp="2000")
    assert opts.starting == GlobalTimestamp(2000)
    opts = read(startingOffsets="earliest", startingOffsetsByTimestamp='{"events": {"0": 1000}}')
    assert opts.starting == PartitionTimestamps({TopicPartition("events", 0): 1000})


def test_batch_only_options():
    with pytest.raises(InvalidOptionError, match="only valid for batch"):
        read(endingOffsets="latest")
    with pytest.raises(InvalidOptionError, match="latest"):
        read(Mode.BATCH, startingOffsets="latest")
    with pytest.raises(InvalidOptionError, match="earliest"):
        read(Mode.BATCH, endingOffsets="earliest")
    with pytest.raises(InvalidOptionError, match="-2"):
        read(Mode.BATCH, endingOffsets='{"events": {"0": -2}}')
    with pytest.raises(InvalidOptionError, match="-1"):
        read(Mode.BATCH, startingOffsets='{"events": {"0": -1}}')
    assert read(Mode.BATCH, endingTimestamp="5").ending == GlobalTimestamp(5)
    assert read(Mode.BATCH, maxOffsetsPerTrigger="10").max_offsets_per_trigger is None  # ignored for batch


@pytest.mark.parametrize(("name", "value", "match"), [
    ("maxOffsetsPerTrigger", "0", ">= 1"),
    ("maxOffsetsPerTrigger", "ten", "integer"),
    ("minPartitions", "0", ">= 1"),
    ("failOnDataLoss", "maybe", "true"),
    ("includeHeaders", "2", "true"),
    ("startingOffsets", "{", "JSON"),
    ("startingTimestamp", "-5", ">= 0"),
    ("startingOffsetsByTimestampStrategy", "oldest", "error"),
    ("minOffsetsPerTrigger", "5", "not supported"),
])
def test_bad_values_name_the_option(name, value, match):
    with pytest.raises(InvalidOptionError, match=match):
        read(**{name: value})


@pytest.mark.parametrize("name", ["auto.offset.reset", "enable.auto.commit", "key.deserializer",
                                  "value.deserializer", "interceptor.classes"])
def test_client_settings_the_connector_owns_are_refused(name):
    with pytest.raises(InvalidOptionError, match=name):
        read(**{f"kafka.{name}": "x"})


def test_other_kafka_options_go_to_the_client():
    opts = read(**{"kafka.fetch.min.bytes": "1024", "kafka.client.id": "job-1", "kafka.group.id": "g"})
    assert dict(opts.client_conf) == {"client.id": "job-1", "fetch.min.bytes": "1024", "group.id": "g"}


def test_strategy_and_timeouts():
    opts = read(startingOffsetsByTimestampStrategy="LATEST", **{"kafkaConsumer.pollTimeoutMs": "5000"})
    assert opts.timestamp_strategy is TimestampStrategy.LATEST
    assert opts.poll_timeout_ms == 5000


def test_write_options():
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": " out ", "kafka.linger.ms": "20"})
    assert (opts.bootstrap_servers, opts.topic, dict(opts.client_conf)) == ("h:1", "out", {"linger.ms": "20"})
    assert parse_write_options({"bootstrap.servers": "h:1"}).topic is None
    with pytest.raises(InvalidOptionError, match="value.serializer"):
        parse_write_options({"bootstrap.servers": "h:1", "kafka.value.serializer": "x"})
