"""Dynamic broker configs under a controller are cluster metadata: set through one broker, applied by the
broker(s) they name.

A real controller service and three in-process brokers on 127.0.0.1 (tests/broker/conftest.py's
`cluster`). IncrementalAlterConfigs goes to broker 1, which forwards it to the controller; broker 2
gets it with the metadata image, describes it with the source Kafka names and applies it (the open
log's LogConfig, the replication throttle's rate).
"""

from __future__ import annotations

import logging

from tinystream.broker.control.broker_configs import BrokerConfigs
from tinystream.broker.errors import ErrorCode
from tinystream.config.settings import BrokerSettings
from tinystream.testing.broker import entity, request
from tinystream.testing.waiting import wait_until_async

SET, DELETE = 0, 1
BROKER = 4
DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 2, 3, 5
RATE = "follower.replication.throttled.rate"


def alter(name: str, changes, *, validate_only: bool = False):
    return request(44, 1, validate_only=validate_only, resources=(
        entity(44, 1, "AlterConfigsResource", resource_type=BROKER, resource_name=name, configs=tuple(
            entity(44, 1, "AlterableConfig", name=n, config_operation=op, value=v) for n, op, v in changes)),))


async def altered(client, name: str, changes, **kw) -> tuple[int, str | None]:
    response = (await client.request(alter(name, changes, **kw))).responses[0]
    return response.error_code, response.error_message


async def described(client, name: str, key: str):
    result = (await client.request(request(32, 4, include_synonyms=True, include_documentation=False, resources=(
        entity(32, 4, "DescribeConfigsResource", resource_type=BROKER, resource_name=name,
               configuration_keys=(key,)),)))).results[0]
    assert result.error_code == ErrorCode.none, result.error_message
    (config,) = result.configs
    return config


async def test_a_default_set_through_broker_1_is_described_and_applied_by_broker_2(cluster):
    await cluster.admin.create_topic("cfg-t", replica_assignment=[[2]])
    await wait_until_async(lambda: cluster.replica(2, "cfg-t", 0) is not None, what="broker 2 hosting cfg-t-0")
    on_1 = await cluster.client(1)
    assert await altered(on_1, "", [("log.retention.ms", SET, "60000")]) == (ErrorCode.none, None)
    assert (await cluster.admin.metadata()).image["broker_configs"] == {
        "default": {"log.retention.ms": "60000"}, "brokers": {}}

    await wait_until_async(lambda: cluster.replica(2, "cfg-t", 0).log.config.retention_ms == 60000,
                           what="broker 2's log taking the default")
    on_2 = await cluster.client(2)
    config = await described(on_2, "2", "log.retention.ms")
    assert (config.value, config.config_source) == ("60000", DYNAMIC_DEFAULT)
    assert (await described(on_2, "", "log.retention.ms")).value == "60000"
    assert not list(cluster.tmp_path.rglob(BrokerConfigs.FILE))  # under a controller no broker keeps a file

    assert await altered(on_2, "", [("log.retention.ms", DELETE, None)]) == (ErrorCode.none, None)
    await wait_until_async(lambda: all(not b.ctx.broker_configs.layers.default for b in cluster.brokers.values()),
                           what="every broker dropping the default")
    assert (await described(on_1, "1", "log.retention.ms")).config_source == DEFAULT


async def test_a_rate_set_for_broker_2_through_broker_1_applies_on_broker_2_only(cluster):
    on_1 = await cluster.client(1)
    assert await altered(on_1, "2", [(RATE, SET, "1048576")]) == (ErrorCode.none, None)
    await wait_until_async(lambda: cluster.brokers[2].replicas.throttles.follower.limit == 1048576,
                           what="broker 2's follower throttle")
    assert [b.ctx.broker_configs.settings.follower_replication_throttled_rate
            for _, b in sorted(cluster.brokers.items())] == [BrokerSettings().follower_replication_throttled_rate,
                                                             1048576, BrokerSettings().follower_replication_throttled_rate]
    config = await described(await cluster.client(2), "2", RATE)
    assert (config.value, config.config_source) == ("1048576", DYNAMIC_BROKER)
    assert (await described(on_1, "1", RATE)).config_source == DEFAULT


async def test_a_bad_change_is_refused_with_the_reason_and_changes_nothing(cluster):
    on_1 = await cluster.client(1)
    before = (await cluster.admin.metadata()).image["version"]
    error, message = await altered(on_1, "", [("num.partitions", SET, "3")])
    assert error == ErrorCode.invalid_request and "cannot change while the broker runs" in message
    error, message = await altered(on_1, "3", [("log.retention.ms", SET, "soon")])
    assert error == ErrorCode.invalid_config and "invalid broker config value" in message
    error, message = await altered(on_1, "two", [("log.retention.ms", SET, "1")])
    assert error == ErrorCode.invalid_request and "invalid broker name" in message
    assert await altered(on_1, "3", [("max.connections", SET, "100")], validate_only=True) == (ErrorCode.none, None)
    image = (await cluster.admin.metadata()).image
    assert image["version"] == before and "broker_configs" not in image


def test_a_broker_configs_file_is_ignored_under_a_controller(tmp_path, caplog):
    (tmp_path / BrokerConfigs.FILE).write_text('{"default": {"log.retention.ms": "5"}, "broker": {}}')
    with caplog.at_level(logging.WARNING):
        configs = BrokerConfigs.for_mode(tmp_path, BrokerSettings(controller_url="http://127.0.0.1:1"))
    assert not configs.layers.default and configs.path is None
    assert "is ignored" in caplog.text
    standalone = BrokerConfigs.for_mode(tmp_path, BrokerSettings())
    assert dict(standalone.layers.default) == {"log.retention.ms": "5"}


def test_an_image_value_this_broker_refuses_is_skipped_and_the_rest_applied(caplog):
    configs = BrokerConfigs(None, BrokerSettings(broker_id=2))
    seen = []
    configs.subscribe(seen.append)
    with caplog.at_level(logging.ERROR):
        configs.use_image({"default": {"log.retention.ms": "70000", "num.partitions": "4"},
                           "brokers": {"2": {"max.connections": "-5", RATE: "10"}, "3": {RATE: "20"}}})
    assert dict(configs.layers.default) == {"log.retention.ms": "70000"}
    assert dict(configs.layers.broker) == {RATE: "10"}
    assert seen and seen[-1].log_retention_ms == 70000 and seen[-1].follower_replication_throttled_rate == 10
    assert "num.partitions" in caplog.text and "max.connections" in caplog.text
    configs.use_image({})
    assert not configs.layers.default and seen[-1].log_retention_ms == BrokerSettings().log_retention_ms
