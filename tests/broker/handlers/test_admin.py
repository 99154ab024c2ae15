"""ApiVersions, Metadata, topic admin, configs, InitProducerId, DescribeCluster over a real socket."""

from __future__ import annotations

import struct

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.api_versions import advertised
from tinystream.broker.protocol.codec import decode_response, millis
from tinystream.testing.broker import (
    create_topic,
    create_topics_request,
    entity,
    fetch_request,
    now_batch,
    produce_request,
    request,
)

# -- ApiVersions ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_api_versions_lists_exactly_the_table(broker, client, version):
    fields = {"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {}
    resp = await client.request(request(18, version, **fields))
    assert resp.error_code == ErrorCode.none
    got = [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]
    assert got == [(a.key, a.min_version, a.max_version) for a in advertised()]


async def test_api_versions_unknown_version_gets_v0_error_and_the_list(broker, client):
    # ApiVersions v9 with a flexible (v2) header: what a newer client sends first.
    header = struct.pack(">hhih", 18, 9, 77, 1) + b"c" + b"\x00"
    frame = header + b"\x02x\x021\x00"  # some body the broker must not need to parse
    resp = await client.send_raw(struct.pack(">i", len(frame)) + frame, api_key=18, api_version=0)
    assert resp.error_code == ErrorCode.unsupported_version
    assert any(k.api_key == 18 and k.max_version == 4 for k in resp.api_keys)
    # The connection stays usable.
    assert (await client.request(request(18, 0))).error_code == ErrorCode.none


# -- Metadata ---------------------------------------------------------------------------------


def metadata(topics: list[str] | None, *, version: int = 12, allow_auto: bool = True):
    if topics is None:
        items = None
    elif version >= 10:
        items = tuple(entity(3, version, "MetadataRequestTopic", name=t, topic_id=None) for t in topics)
    else:
        items = tuple(entity(3, version, "MetadataRequestTopic", name=t) for t in topics)
    return request(3, version, topics=items, allow_auto_topic_creation=allow_auto,
                   include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


@pytest.mark.parametrize("version", [0, 1, 4, 7, 9, 10, 12])
async def test_metadata_auto_creates_and_describes(broker, client, version):
    resp = await client.request(metadata(["auto"], version=version))
    topic = resp.topics[0]
    assert topic.error_code == ErrorCode.none and topic.name == "auto"
    assert [(p.partition_index, p.leader_id) for p in topic.partitions] == [(0, 0)]
    assert resp.brokers[0].port == broker.info.port
    if version >= 2:
        assert resp.cluster_id == broker.cluster.cluster_id


async def test_metadata_does_not_auto_create_a_name_ending_in_a_newline(broker, client):
    """Issue 21: the name check's "$" matched before a final newline, and a directory `evil\\n-0` was made."""
    resp = await client.request(metadata(["evil\n"]))
    assert resp.topics[0].error_code == ErrorCode.invalid_topic_exception
    assert "evil\n" not in broker.topics.store
    assert not [p for d in broker.logs.log_dirs for p in d.iterdir() if p.name.startswith("evil")]


async def test_metadata_without_auto_create(broker, client):
    resp = await client.request(metadata(["absent"], allow_auto=False))
    assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert "absent" not in broker.topics.store


@pytest.mark.parametrize("settings_overrides", [{"auto.create.topics.enable": False}])
async def test_metadata_broker_setting_disables_auto_create(broker, client, settings_overrides):
    resp = await client.request(metadata(["absent"], allow_auto=True))
    assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize("name", ["bad name", "x" * 250, "..", "ü"])
async def test_metadata_invalid_names(broker, client, name):
    resp = await client.request(metadata([name]))
    assert resp.topics[0].error_code == ErrorCode.invalid_topic_exception


async def test_metadata_all_topics_and_by_id(broker, client):
    created = await create_topic(client, "byid", partitions=3)
    everything = await client.request(metadata(None))
    assert [t.name for t in everything.topics] == ["byid"]
    by_id = await client.request(request(3, 12, topics=(entity(3, 12, "MetadataRequestTopic", name=None,
                                                              topic_id=created.topic_id),),
                                         allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert by_id.topics[0].name == "byid" and len(by_id.topics[0].partitions) == 3


# -- CreateTopics / DeleteTopics / CreatePartitions -----------------------------------------------


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (("ok", 3, 1), ErrorCode.none),
        (("defaults", -1, -1), ErrorCode.none),
        (("bad/name", 1, 1), ErrorCode.invalid_topic_exception),
        (("zero", 0, 1), ErrorCode.invalid_partitions),
        (("negative", -5, 1), ErrorCode.invalid_partitions),
        (("huge", 2**31 - 1, 1), ErrorCode.invalid_partitions),
        (("rf0", 1, 0), ErrorCode.invalid_replication_factor),
        (("rf3", 1, 3), ErrorCode.invalid_replication_factor),
        (("cfg", 1, 1, {"retention.ms": "abc"}), ErrorCode.invalid_config),
        (("cfg2", 1, 1, {"no.such.config": "1"}), ErrorCode.invalid_config),
        (("__reserved", 1, 1), ErrorCode.invalid_request),
    ],
)
async def test_create_topics_checks(broker, client, spec, error):
    resp = await client.request(create_topics_request([spec]))
    result = resp.topics[0]
    assert result.error_code == error, result.error_message
    assert (spec[0] in broker.topics.store) == (error == ErrorCode.none)
    if error != ErrorCode.none:
        assert result.error_message


async def test_create_topics_reports_the_new_topic(broker, client):
    result = (await client.request(create_topics_request([("rep", -1, -1, {"cleanup.policy": "compact"})]))).topics[0]
    assert (result.num_partitions, result.replication_factor) == (1, 1)
    configs = {c.name: c.value for c in result.configs}
    assert configs["cleanup.policy"] == "compact" and configs["retention.ms"] == str(7 * 24 * 3600 * 1000)


async def test_create_topics_duplicates_existing_collisions_validate_only(broker, client):
    await create_topic(client, "a.b")
    resp = await client.request(create_topics_request([("a.b", 1, 1), ("a_b", 1, 1), ("dup", 1, 1), ("dup", 1, 1)]))
    assert [t.error_code for t in resp.topics] == [
        ErrorCode.topic_already_exists, ErrorCode.invalid_topic_exception, ErrorCode.invalid_request,
        ErrorCode.invalid_request,
    ]
    dry = await client.request(create_topics_request([("dry", 2, 1)], validate_only=True))
    assert dry.topics[0].error_code == ErrorCode.none and "dry" not in broker.topics.store


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
async def test_create_topics_every_version(broker, client, version):
    resp = await client.request(create_topics_request([(f"v{version}", 1, 1)], version=version))
    assert resp.topics[0].error_code == ErrorCode.none


async def test_delete_topics_by_name_and_id(broker, client):
    first = await create_topic(client, "gone1")
    await create_topic(client, "gone2")
    await client.request(produce_request("gone1", 0, now_batch([(None, b"x")])))
    v1 = await client.request(request(20, 1, topic_names=("gone2", "never"), timeout=millis(1000)))
    assert [r.error_code for r in v1.responses] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    v6 = await client.request(request(20, 6, timeout=millis(1000), topics=(
        entity(20, 6, "DeleteTopicState", name=None, topic_id=first.topic_id),)))
    assert v6.responses[0].error_code == ErrorCode.none and v6.responses[0].name == "gone1"
    assert len(broker.topics.store) == 0
    data = (await client.request(fetch_request([("gone1", 0, 0)]))).responses[0].partitions[0]
    assert data.error_code == ErrorCode.unknown_topic_or_partition


async def test_delete_internal_topic_is_refused(broker, client):
    broker.topics.ensure_offsets_topic()
    resp = await client.request(request(20, 5, topic_names=("__consumer_offsets",), timeout=millis(1000)))
    assert resp.responses[0].error_code == ErrorCode.invalid_topic_exception


def create_partitions(name: str, count: int, *, version: int = 3, validate_only: bool = False):
    return request(37, version, validate_only=validate_only, timeout=millis(1000), topics=(
        entity(37, version, "CreatePartitionsTopic", name=name, count=count, assignments=None),))


async def test_create_partitions_grows_only(broker, client):
    await create_topic(client, "grow", partitions=2)
    ok = (await client.request(create_partitions("grow", 4))).results[0]
    assert ok.error_code == ErrorCode.none and broker.topics.get("grow").partitions == 4
    await client.request(produce_request("grow", 3, now_batch([(None, b"x")])))
    for count, error in [(4, ErrorCode.invalid_partitions), (1, ErrorCode.invalid_partitions),
                         (2**31 - 1, ErrorCode.invalid_partitions)]:
        assert (await client.request(create_partitions("grow", count))).results[0].error_code == error
    missing = (await client.request(create_partitions("nope", 3))).results[0]
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


# -- configs ------------------------------------------------------------------------------------------


def describe_configs(resource_type: int, name: str, keys=None, *, version: int = 4):
    return request(32, version, include_synonyms=True, include_documentation=True, resources=(
        entity(32, version, "DescribeConfigsResource", resource_type=resource_type, resource_name=name,
               configuration_keys=keys),))


def incremental(name: str, changes: list[tuple[str, int, str | None]], *, validate_only: bool = False):
    return request(44, 1, validate_only=validate_only, resources=(
        entity(44, 1, "AlterConfigsResource", resource_type=2, resource_name=name, configs=tuple(
            entity(44, 1, "AlterableConfig", name=n, config_operation=op, value=v) for n, op, v in changes)),))


async def test_describe_topic_and_broker_configs(broker, client):
    await create_topic(client, "dc", configs={"retention.ms": "1000"})
    result = (await client.request(describe_configs(2, "dc"))).results[0]
    configs = {c.name: c for c in result.configs}
    assert configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
    assert configs["segment.bytes"].config_source == 5
    assert configs["retention.ms"].synonyms[-1].name == "log.retention.ms"
    some = (await client.request(describe_configs(2, "dc", ("cleanup.policy",)))).results[0]
    assert [c.name for c in some.configs] == ["cleanup.policy"]
    b = (await client.request(describe_configs(4, "0"))).results[0]
    assert b.error_code == ErrorCode.none and any(c.name == "log.dirs" for c in b.configs)
    missing = (await client.request(describe_configs(2, "nope"))).results[0]
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


async def test_incremental_alter_configs_applies_to_the_open_logs(broker, client):
    await create_topic(client, "iac")
    resp = await client.request(incremental("iac", [("max.message.bytes", 0, "100"), ("cleanup.policy", 2, "compact")]))
    assert resp.responses[0].error_code == ErrorCode.none
    assert broker.topics.get("iac").configs == {"max.message.bytes": "100", "cleanup.policy": "delete,compact"}
    log = broker.replicas.get(("iac", 0)).log
    assert log.config.max_message_bytes == 100 and log.config.compacted
    big = await client.request(produce_request("iac", 0, now_batch([(None, b"x" * 200)])))
    assert big.responses[0].partition_responses[0].error_code == ErrorCode.message_too_large
    back = await client.request(incremental("iac", [("max.message.bytes", 1, None)]))
    assert back.responses[0].error_code == ErrorCode.none and log.config.max_message_bytes == 1048588
    for changes, error in [
        ([("retention.ms", 0, "x")], ErrorCode.invalid_config),
        ([("bogus", 0, "1")], ErrorCode.invalid_config),
        ([("retention.ms", 2, "5")], ErrorCode.invalid_config),
        ([("retention.ms", 9, "5")], ErrorCode.invalid_request),
        ([("retention.ms", 0, "5"), ("retention.ms", 0, "6")], ErrorCode.invalid_request),
    ]:
        assert (await client.request(incremental("iac", changes))).responses[0].error_code == error
    dry = await client.request(incremental("iac", [("retention.ms", 0, "5")], validate_only=True))
    assert dry.responses[0].error_code == ErrorCode.none and "retention.ms" not in broker.topics.get("iac").configs


async def test_alter_configs_replaces_all_overrides(broker, client):
    await create_topic(client, "ac", configs={"retention.ms": "1000"})
    req = request(33, 2, validate_only=False, resources=(entity(33, 2, "AlterConfigsResource", resource_type=2,
                  resource_name="ac", configs=(entity(33, 2, "AlterableConfig", name="segment.ms", value="5000"),)),))
    assert (await client.request(req)).responses[0].error_code == ErrorCode.none
    assert broker.topics.get("ac").configs == {"segment.ms": "5000"}


async def test_topic_metadata_survives_a_restart(tmp_path):
    from tinystream.broker.app import Broker
    from tinystream.testing.broker import test_settings

    settings = test_settings(tmp_path / "d")
    b = Broker(settings)
    await b.start()
    b.topics.create("keep", num_partitions=2, configs={"retention.ms": "123"})
    topic_id = b.topics.get("keep").topic_id
    await b.stop()
    b2 = Broker(settings)
    await b2.start()
    try:
        spec = b2.topics.get("keep")
        assert (spec.partitions, spec.topic_id, dict(spec.configs)) == (2, topic_id, {"retention.ms": "123"})
        assert b2.replicas.get(("keep", 1)).log.config.retention_ms == 123
        assert b2.cluster.cluster_id == b.cluster.cluster_id
    finally:
        await b2.stop()


# -- producer ids, cluster ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_init_producer_id_hands_out_unique_ids(broker, client, version):
    ids = set()
    for _ in range(3):
        resp = await client.request(request(22, version, transactional_id=None, transaction_timeout=millis(60000),
                                            producer_id=-1, producer_epoch=-1))
        assert resp.error_code == ErrorCode.none and resp.producer_epoch == 0
        ids.add(resp.producer_id)
    assert len(ids) == 3
    # A transactional id goes to its coordinator: none is loaded before FindCoordinator creates
    # __transaction_state, so this broker is not (yet) the coordinator, as Kafka answers.
    txn = await client.request(request(22, version, transactional_id="tx", transaction_timeout=millis(60000),
                                       producer_id=-1, producer_epoch=-1))
    assert txn.error_code == ErrorCode.not_coordinator


async def test_producer_ids_are_never_reused_after_restart(tmp_path):
    from tinystream.broker.app import Broker
    from tinystream.testing.broker import test_settings

    settings = test_settings(tmp_path / "d")
    seen = []
    for _ in range(2):
        b = Broker(settings)
        await b.start()
        seen += [await b.ctx.producer_ids.next_id() for _ in range(3)]
        await b.stop()
    assert len(set(seen)) == 6 and seen == sorted(seen)


@pytest.mark.parametrize("version", [0, 1])
async def test_describe_cluster(broker, client, version):
    resp = await client.request(request(60, version, include_cluster_authorized_operations=False, endpoint_type=1))
    assert resp.error_code == ErrorCode.none and resp.cluster_id == broker.cluster.cluster_id
    assert [(b.broker_id, b.port) for b in resp.brokers] == [(0, broker.info.port)]


async def test_admin_http(broker):
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(f"{broker.info.admin_url}/healthz") as r:
            assert r.status == 200 and (await r.json())["status"] == "ok"
        async with http.get(f"{broker.info.admin_url}/readyz") as r:  # standalone: ready once serving
            assert r.status == 200 and (await r.json())["ready"] is True
        broker.topics.create("seen")
        async with http.get(f"{broker.info.admin_url}/metrics") as r:
            text = await r.text()
            assert 'tinystream_log_end_offset{partition="0",topic="seen"}' in text
            assert "tinystream_partitions 1.0" in text
        async with http.get(f"{broker.info.admin_url}/api/topics") as r:
            assert [t["name"] for t in (await r.json())["topics"]] == ["seen"]


def test_decode_response_helper_is_symmetric():
    # encode_response + decode_response agree for a body with a flexible header.
    from tinystream.broker.protocol.codec import RequestHeader, encode_response, schemas

    s = schemas(3, 12)
    body = s.response("MetadataResponse", throttle_time=millis(0), brokers=(), cluster_id="c", controller_id=1, topics=())
    data = encode_response(RequestHeader(3, 12, 42, None), body)
    assert decode_response(3, 12, bytes(data[4:])) == (42, body)


async def test_internal_topic_cannot_grow(broker, client):
    broker.topics.ensure_offsets_topic()
    result = (await client.request(create_partitions("__consumer_offsets", 10))).results[0]
    assert result.error_code == ErrorCode.invalid_request
