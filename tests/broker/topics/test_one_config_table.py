"""One topic-config table: a key is accepted or refused the same way on a standalone broker and under a controller.

The bug this guards: `preallocate` (a Kafka config TinyStream does not act on)
passed the controller's table and was then dropped by the broker, while a
standalone broker refused it. Now both accept and keep it, show it in
DescribeConfigs as set and not applied, and both refuse a bad value.
"""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode
from tinystream.broker.storage.base import LogConfig
from tinystream.config.topic_configs import TOPIC_CONFIGS, AppliedBy
from tinystream.testing.broker import create_topics_request, entity, request

TOPIC = 2  # DescribeConfigs resource type


def describe_topic(name: str, *, version: int = 4):
    return request(32, version, include_synonyms=True, include_documentation=True, resources=(
        entity(32, version, "DescribeConfigsResource", resource_type=TOPIC, resource_name=name, configuration_keys=None),
    ))


async def _create_and_describe(client, name: str, configs: dict[str, str]):
    created = (await client.request(create_topics_request([(name, 1, 1, configs)]))).topics[0]
    described = None
    if created.error_code == ErrorCode.none:
        result = (await client.request(describe_topic(name))).results[0]
        described = {c.name: c for c in result.configs}
    return created, described


async def _check(client) -> None:
    created, described = await _create_and_describe(client, "kept", {"preallocate": "true", "retention.ms": "60000"})
    assert created.error_code == ErrorCode.none, created.error_message
    assert described["preallocate"].value == "true"
    assert "does not apply" in described["preallocate"].documentation
    assert described["retention.ms"].value == "60000"
    assert "compression.type" not in described  # keys nobody applies show only when set

    refused, _ = await _create_and_describe(client, "refused", {"preallocate": "maybe"})
    assert refused.error_code == ErrorCode.invalid_config and "preallocate" in refused.error_message
    out_of_range, _ = await _create_and_describe(client, "tiny-segments", {"segment.bytes": "13"})
    assert out_of_range.error_code == ErrorCode.invalid_config and "segment.bytes" in out_of_range.error_message
    unknown, _ = await _create_and_describe(client, "typo", {"retention.msec": "1"})
    assert unknown.error_code == ErrorCode.invalid_config


async def test_standalone_broker_accepts_and_keeps_a_config_it_does_not_apply(client) -> None:
    await _check(client)


async def test_forwarded_to_the_controller_the_same_keys_pass_and_fail(cluster) -> None:
    await _check(await cluster.client(1))


def test_every_key_says_who_applies_it_and_the_log_reads_only_log_keys() -> None:
    assert all(isinstance(k.applied_by, AppliedBy) and k.doc for k in TOPIC_CONFIGS.values())
    for name in LogConfig.KAFKA_NAMES:
        assert TOPIC_CONFIGS[name].applied_by in (AppliedBy.LOG, AppliedBy.CONTROLLER)
