"""Topic names, config validation, the persisted topic store, meta.properties, producer ids."""

from __future__ import annotations

import uuid

import pytest

from tinystream.broker.coordinators.producer_ids import FileBlockSource, ProducerIdManager
from tinystream.broker.metadata.topics import InvalidTopicName, TopicSpec, TopicStore, validate_topic_name
from tinystream.broker.storage import meta_properties
from tinystream.broker.topics.config import InvalidConfig, describe, log_config, validate
from tinystream.config.settings import BrokerSettings


@pytest.mark.parametrize("name", ["a", "A-b_c.9", "x" * 249, "__consumer_offsets"])
def test_valid_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "ü", "a\x00", "evil\n", "evil\n-0", None])
def test_invalid_names(name):
    with pytest.raises(InvalidTopicName):
        validate_topic_name(name)


def test_config_validation():
    assert validate({"retention.ms": "-1", "cleanup.policy": "compact,delete"}) == {
        "retention.ms": "-1", "cleanup.policy": "compact,delete"}
    for bad in ({"retention.ms": "-2"}, {"segment.bytes": "13"}, {"cleanup.policy": "keep"},
                {"message.timestamp.type": "Now"}, {"unclean.leader.election.enable": "yes"},
                {"nope": "1"}, {"retention.ms": None}, {"max.message.bytes": str(2**31)}):
        with pytest.raises(InvalidConfig):
            validate(bad)


def test_log_config_layers_broker_defaults_and_overrides():
    settings = BrokerSettings(**{"log.retention.ms": 5000, "log.segment.bytes": 4096})
    config = log_config(settings, {"segment.bytes": "8192", "flush.messages": "1"})
    assert (config.retention_ms, config.segment_bytes, config.flush_messages) == (5000, 8192, 1)
    described = {d.name: d for d in describe(settings, {"segment.bytes": "8192"})}
    assert described["segment.bytes"].source.name == "TOPIC_CONFIG"
    assert described["retention.ms"].source.name == "STATIC_BROKER_CONFIG"
    assert described["cleanup.policy"].source.name == "DEFAULT_CONFIG"


def test_store_persists_and_indexes(tmp_path):
    store = TopicStore(tmp_path)
    spec = TopicSpec("a.b", uuid.uuid4(), 3, 1, {"retention.ms": "1"})
    store.add(spec)
    assert store.colliding("a_b") == "a.b" and store.colliding("a.b") is None
    store.update("a.b", partitions=5)
    again = TopicStore(tmp_path)
    assert again.get("a.b").partitions == 5 and again.by_id(spec.topic_id).name == "a.b"
    again.remove("a.b")
    assert len(TopicStore(tmp_path)) == 0 and not list(tmp_path.glob("*.tmp"))


def test_meta_properties(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    cluster = meta_properties.ensure(dirs, 3)
    assert meta_properties.ensure(dirs, 3) == cluster and len(cluster) == 22
    with pytest.raises(meta_properties.MetaPropertiesError):
        meta_properties.ensure(dirs, 4)


async def test_producer_id_blocks_survive_restart(tmp_path):
    first = ProducerIdManager(FileBlockSource(tmp_path, block_size=10))
    ids = [await first.next_id() for _ in range(12)]
    assert ids == list(range(12))
    second = ProducerIdManager(FileBlockSource(tmp_path, block_size=10))
    assert await second.next_id() == 20  # the rest of the second block is skipped, never reused


def test_partitions_spread_over_log_dirs_and_are_found_again(tmp_path):
    from tinystream.broker.storage.base import LogConfig
    from tinystream.broker.storage.log_manager import LogManager
    from tinystream.broker.storage.topic_partition import TopicPartition

    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = LogManager(dirs)
    for p in range(4):
        logs.open(TopicPartition("t", p), LogConfig(), now_ms=0).close()
    assert sorted(len(list(d.iterdir())) for d in dirs) == [2, 2]
    again = LogManager(dirs)
    assert {again.partition_dir(TopicPartition("t", p)) for p in range(4)} == {
        logs.partition_dir(TopicPartition("t", p)) for p in range(4)}
