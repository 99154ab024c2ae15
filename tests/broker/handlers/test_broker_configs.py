"""Dynamic broker configs (BROKER) and broker loggers (BROKER_LOGGER) over a real socket, in-process broker."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.testing.broker import create_topic, entity, now_batch, produce_request, request, test_settings

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BROKER, BROKER_LOGGER = 4, 8
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, LOGGER_SOURCE = 2, 3, 4, 5, 6


def describe(resource_type: int, name: str, keys=None):
    return request(32, 4, include_synonyms=True, include_documentation=False, resources=(
        entity(32, 4, "DescribeConfigsResource", resource_type=resource_type, resource_name=name,
               configuration_keys=keys),))


def alter(resource_type: int, name: str, changes, *, validate_only: bool = False):
    return request(44, 1, validate_only=validate_only, resources=(
        entity(44, 1, "AlterConfigsResource", resource_type=resource_type, resource_name=name, configs=tuple(
            entity(44, 1, "AlterableConfig", name=n, config_operation=op, value=v) for n, op, v in changes)),))


async def configs(client, resource_type: int, name: str, keys=None) -> dict:
    result = (await client.request(describe(resource_type, name, keys))).results[0]
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c for c in result.configs}


async def altered(client, resource_type: int, name: str, changes, **kw):
    response = (await client.request(alter(resource_type, name, changes, **kw))).responses[0]
    return response.error_code, response.error_message


# -- BROKER --------------------------------------------------------------------------------------------------


async def test_broker_config_set_at_both_levels_applies_live_and_describes_its_source(broker, client):
    await create_topic(client, "live")
    log = broker.replicas.get(("live", 0)).log
    assert (await configs(client, BROKER, "0", ("message.max.bytes",)))["message.max.bytes"].config_source == DEFAULT

    assert await altered(client, BROKER, "", [("message.max.bytes", SET, "3000")]) == (ErrorCode.none, None)
    assert log.config.max_message_bytes == 3000
    entry = (await configs(client, BROKER, "0"))["message.max.bytes"]
    assert (entry.value, entry.config_source, entry.read_only) == ("3000", DYNAMIC_DEFAULT, False)
    assert [(s.value, s.source) for s in entry.synonyms] == [("3000", DYNAMIC_DEFAULT), ("1048588", DEFAULT)]
    assert list(await configs(client, BROKER, "")) == ["message.max.bytes"]  # the default resource: its own only

    assert await altered(client, BROKER, "0", [("message.max.bytes", SET, "2000")]) == (ErrorCode.none, None)
    assert log.config.max_message_bytes == 2000
    entry = (await configs(client, BROKER, "0"))["message.max.bytes"]
    assert (entry.value, entry.config_source) == ("2000", DYNAMIC_BROKER)
    assert [s.source for s in entry.synonyms] == [DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT]
    big = await client.request(produce_request("live", 0, now_batch([(None, b"x" * 2500)])))
    assert big.responses[0].partition_responses[0].error_code == ErrorCode.message_too_large

    # The topic's own describe shows the broker default and where it came from.
    topic = (await configs(client, 2, "live"))["max.message.bytes"]
    assert (topic.value, topic.config_source) == ("2000", DYNAMIC_BROKER)

    assert await altered(client, BROKER, "0", [("message.max.bytes", DELETE, None)]) == (ErrorCode.none, None)
    assert log.config.max_message_bytes == 3000
    assert await altered(client, BROKER, "", [("message.max.bytes", DELETE, None)]) == (ErrorCode.none, None)
    assert log.config.max_message_bytes == 1048588
    assert (await configs(client, BROKER, "0"))["message.max.bytes"].config_source == DEFAULT


async def test_broker_config_validate_only_and_refusals(broker, client):
    await create_topic(client, "v")
    log = broker.replicas.get(("v", 0)).log
    assert await altered(client, BROKER, "0", [("log.retention.ms", SET, "5000")], validate_only=True) == (
        ErrorCode.none, None)
    assert log.config.retention_ms == 7 * 24 * 3600 * 1000
    assert (await configs(client, BROKER, "0"))["log.retention.ms"].config_source == DEFAULT

    for changes, error in [
        ([("log.retention.ms", SET, "soon")], ErrorCode.invalid_config),  # not a number
        ([("log.segment.bytes", SET, "3")], ErrorCode.invalid_config),  # below Kafka's minimum (14)
        ([("no.such.config", SET, "1")], ErrorCode.invalid_config),
        ([("num.partitions", SET, "3")], ErrorCode.invalid_request),  # a broker key that cannot change live
        ([("leader.replication.throttled.rate", SET, "-1")], ErrorCode.invalid_config),  # a rate is >= 0
        ([("replica.alter.log.dirs.io.max.bytes.per.second", SET, "1000")], ErrorCode.invalid_request),  # no such move
        ([("log.cleanup.policy", APPEND, "compact")], ErrorCode.invalid_request),
        ([("log.retention.ms", SET, "1"), ("log.retention.ms", DELETE, None)], ErrorCode.invalid_request),
    ]:
        error_code, message = await altered(client, BROKER, "0", changes)
        assert error_code == error, (changes, message)
        assert message
    # Refused changes left nothing behind, in memory or on disk.
    assert broker.ctx.broker_configs.layers.broker == {}
    assert not (broker.logs.metadata_dir / "broker-configs.json").exists()
    error_code, message = await altered(client, BROKER, "0", [("num.partitions", SET, "3")])
    assert "start-up" in message
    # Another broker's id: not this broker's to change ...
    assert (await altered(client, BROKER, "7", [("log.retention.ms", SET, "1")]))[0] == ErrorCode.invalid_request
    # ... but clearing a key no broker can set there is a no-op success (kafka-reassign-partitions.sh --verify
    # clears the log-dir throttle on every broker).
    assert await altered(client, BROKER, "7", [("replica.alter.log.dirs.io.max.bytes.per.second", DELETE, None)]) == (
        ErrorCode.none, None)


async def test_dynamic_broker_configs_survive_a_restart(tmp_path):
    settings = test_settings(tmp_path / "d")
    b = Broker(settings)
    await b.start()
    try:
        b.topics.create("keep", num_partitions=1)
        client = await KafkaClient.connect(b.info.host, b.info.port)
        try:
            assert (await altered(client, BROKER, "0", [("log.retention.ms", SET, "60000")]))[0] == ErrorCode.none
            assert (await altered(client, BROKER, "", [("log.segment.bytes", SET, "4096")]))[0] == ErrorCode.none
        finally:
            await client.close()
    finally:
        await b.stop()
    b2 = Broker(settings)
    await b2.start()
    try:
        config = b2.replicas.get(("keep", 0)).log.config
        assert (config.retention_ms, config.segment_bytes) == (60000, 4096)
        client = await KafkaClient.connect(b2.info.host, b2.info.port)
        try:
            described = await configs(client, BROKER, "0")
        finally:
            await client.close()
        assert described["log.retention.ms"].config_source == DYNAMIC_BROKER
        assert described["log.segment.bytes"].config_source == DYNAMIC_DEFAULT
    finally:
        await b2.stop()


async def _closed_at_once(broker) -> bool:
    """Whether the broker closes a new connection from 127.0.0.1 without a request (over a connection limit)."""
    reader, writer = await asyncio.open_connection(broker.info.host, broker.info.port)
    try:
        return await asyncio.wait_for(reader.read(1), timeout=5) == b""
    except ConnectionError:
        return True  # reset rather than closed: refused all the same
    except TimeoutError:
        return False
    finally:
        writer.close()


async def test_connection_limits_change_live_for_the_next_connection(broker, client):
    assert await altered(client, BROKER, "0", [("max.connections.per.ip", SET, "2")]) == (ErrorCode.none, None)
    second = await KafkaClient.connect(broker.info.host, broker.info.port)
    try:
        assert await _closed_at_once(broker)  # the third from this host
        assert (await client.request(request(18, 0))).error_code == ErrorCode.none  # open ones stay
        assert await altered(client, BROKER, "0", [("max.connections.per.ip", DELETE, None)]) == (ErrorCode.none, None)
        third = await KafkaClient.connect(broker.info.host, broker.info.port)
        try:
            assert (await third.request(request(18, 0))).error_code == ErrorCode.none
        finally:
            await third.close()
        assert await altered(client, BROKER, "", [("max.connections", SET, "2")]) == (ErrorCode.none, None)
        assert await _closed_at_once(broker)  # the broker-wide limit, from the cluster default
    finally:
        await second.close()
    assert broker.servers[broker.listener.name].quotas.max_connections == 2


async def test_replication_throttle_rates_apply_live_at_both_levels(broker, client):
    throttles = broker.replicas.throttles
    rate, follower = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
    assert await altered(client, BROKER, "", [(rate, SET, "2000000"), (follower, SET, "3000000")]) == (
        ErrorCode.none, None)
    assert await altered(client, BROKER, "0", [(rate, SET, "1000000")]) == (ErrorCode.none, None)
    assert (throttles.leader.limit, throttles.follower.limit) == (1_000_000, 3_000_000)
    described = await configs(client, BROKER, "0", (rate, follower))
    assert (described[rate].value, described[rate].config_source, described[rate].read_only) == (
        "1000000", DYNAMIC_BROKER, False)
    assert (described[follower].value, described[follower].config_source) == ("3000000", DYNAMIC_DEFAULT)
    assert await altered(client, BROKER, "0", [(rate, DELETE, None)]) == (ErrorCode.none, None)
    assert throttles.leader.limit == 2_000_000  # the cluster default shows through again
    assert await altered(client, BROKER, "", [(rate, DELETE, None), (follower, DELETE, None)]) == (
        ErrorCode.none, None)
    assert (throttles.leader.limit, throttles.follower.limit) == (2**63 - 1, 2**63 - 1)


# -- BROKER_LOGGER -------------------------------------------------------------------------------------------


@pytest.fixture
def restore_logger():
    logger = logging.getLogger("tinystream.broker")
    level = logger.level
    yield logger
    logger.setLevel(level)


async def test_broker_loggers_describe_and_alter_live(broker, client, restore_logger):
    loggers = await configs(client, BROKER_LOGGER, "0")
    assert {"root", "tinystream", "tinystream.broker", "tinystream.broker.app"} <= set(loggers)
    entry = loggers["tinystream.broker"]
    assert entry.config_source == LOGGER_SOURCE and entry.read_only is False
    assert entry.value == {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARN", "ERROR": "ERROR",
                           "CRITICAL": "FATAL"}.get(logging.getLevelName(restore_logger.getEffectiveLevel()), "TRACE")

    assert await altered(client, BROKER_LOGGER, "0", [("tinystream.broker", SET, "ERROR")]) == (ErrorCode.none, None)
    assert restore_logger.level == logging.ERROR
    after = await configs(client, BROKER_LOGGER, "0")
    assert after["tinystream.broker"].value == "ERROR"
    assert after["tinystream.broker.app"].value == "ERROR"  # a child without its own level inherits
    assert await altered(client, BROKER_LOGGER, "0", [("tinystream.broker", SET, "TRACE")]) == (ErrorCode.none, None)
    assert (await configs(client, BROKER_LOGGER, "0"))["tinystream.broker"].value == "TRACE"

    assert await altered(client, BROKER_LOGGER, "0", [("tinystream.broker", DELETE, None)]) == (ErrorCode.none, None)
    assert restore_logger.level == logging.NOTSET  # inherits from its parent again

    dry = await altered(client, BROKER_LOGGER, "0", [("tinystream.broker", SET, "FATAL")], validate_only=True)
    assert dry == (ErrorCode.none, None) and restore_logger.level == logging.NOTSET


@pytest.mark.parametrize(("changes", "error"), [
    ([("tinystream.broker", SET, "LOUD")], ErrorCode.invalid_config),
    ([("tinystream.broker", SET, "debug")], ErrorCode.invalid_config),  # Kafka's names are upper-case
    ([("no.such.logger", SET, "DEBUG")], ErrorCode.invalid_config),
    ([("root", DELETE, None)], ErrorCode.invalid_request),
    ([("tinystream.broker", APPEND, "DEBUG")], ErrorCode.invalid_request),
    ([("tinystream.broker", SUBTRACT, "DEBUG")], ErrorCode.invalid_request),
    # One bad change: none is applied.
    ([("tinystream", SET, "FATAL"), ("tinystream.broker", SET, "NOPE")], ErrorCode.invalid_config),
])
async def test_broker_logger_refusals_change_nothing(broker, client, restore_logger, changes, error):
    before = await configs(client, BROKER_LOGGER, "0")
    error_code, message = await altered(client, BROKER_LOGGER, "0", changes)
    assert error_code == error and message
    after = await configs(client, BROKER_LOGGER, "0")
    assert {k: v.value for k, v in after.items()} == {k: v.value for k, v in before.items()}


async def test_broker_logger_resource_names_this_broker(broker, client):
    for name in ("", "5"):
        result = (await client.request(describe(BROKER_LOGGER, name))).results[0]
        assert result.error_code == ErrorCode.invalid_request and not result.configs
        assert (await altered(client, BROKER_LOGGER, name, [("root", SET, "INFO")]))[0] == ErrorCode.invalid_request
