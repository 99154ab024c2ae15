"""Bounded-time fuzzing of the wire protocol against a real broker.

A corpus of real requests (encoded with kio at several versions) is sent
mutated -- bit flips, overwritten bytes, interesting integers, cuts, junk
tails, wrong versions and sizes -- plus frames of random bytes, over many
connections. Afterwards:

- no handler raised (every decodable request got an answer or a deliberate close),
- the broker still serves a real client (kafka-python produces and consumes),
- a topic the corpus never names ("precious") holds exactly what it held before.

The authorizer is on with the (anonymous) fuzzing client a super user, so
every handler runs past its checks and the ACL and SCRAM APIs change real
state (ACLs for other principals, credentials) while being fuzzed.

A second run fuzzes a SASL_SSL listener: the login exchange (SaslHandshake,
SaslAuthenticate with PLAIN and SCRAM messages) mutated inside TLS, the same
corpus sent before any login, and raw bytes where a TLS handshake is due.
Budget cases ride along: frames announced past the 512 KiB allowed before
login, allowed sizes cut short, whole requests with trailing bytes. Nobody gets
in, nothing crashes, every byte reserved for an unfinished frame is given back,
and a client with the right password still logs in and finds its data unchanged.

The seed is printed; set TINYSTREAM_FUZZ_SEED to replay, TINYSTREAM_FUZZ_SECONDS to run longer.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import random
import ssl
import struct
import time
import uuid

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import encode_request, millis
from tinystream.broker.storage.batch import Compression
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import (
    acl_creation,
    alter_client_quotas_request,
    create_acls_request,
    create_topic,
    create_topics_request,
    describe_client_quotas_request,
    entity,
    fetch_request,
    now_batch,
    produce_request,
    request,
)


@pytest.fixture
def settings_overrides() -> dict:
    return {"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"}


SECONDS = float(os.environ.get("TINYSTREAM_FUZZ_SECONDS", "4"))
TARGET = "fuzz-target"


def corpus() -> list[bytes]:
    batch = now_batch([(b"k", b"v" * 20), (None, b"w")])
    zbatch = now_batch([(b"k", b"z" * 100)], compression=Compression.ZSTD)
    idem = now_batch([(None, b"i")], producer_id=5, producer_epoch=0, base_sequence=0)
    bodies = [
        request(18, 0), request(18, 3, client_software_name="fuzz", client_software_version="1"),
        request(3, 1, topics=(entity(3, 1, "MetadataRequestTopic", name=TARGET),)),
        request(3, 9, topics=None, allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False),
        request(3, 12, topics=(entity(3, 12, "MetadataRequestTopic", name="fuzz-auto", topic_id=None),),
                allow_auto_topic_creation=True, include_topic_authorized_operations=False),
        produce_request(TARGET, 0, batch, version=3), produce_request(TARGET, 0, batch, version=9),
        produce_request(TARGET, 0, zbatch, version=11), produce_request(TARGET, 0, idem, version=8, acks=-1),
        produce_request(TARGET, 0, batch, version=9, acks=0),
        fetch_request([(TARGET, 0, 0)], version=4, max_wait_ms=10), fetch_request([(TARGET, 0, 0)], version=11),
        fetch_request([(TARGET, 0, 0)], version=12, max_wait_ms=5, min_bytes=1, last_fetched_epoch=0),
        request(2, 7, replica_id=-1, isolation_level=0, topics=(entity(2, 7, "ListOffsetsTopic", name=TARGET,
                partitions=(entity(2, 7, "ListOffsetsPartition", partition_index=0, timestamp=-3,
                                   current_leader_epoch=-1),)),)),
        request(23, 4, replica_id=-1, topics=(entity(23, 4, "OffsetForLeaderTopic", topic=TARGET, partitions=(
            entity(23, 4, "OffsetForLeaderPartition", partition=0, current_leader_epoch=-1, leader_epoch=0),)),)),
        create_topics_request([("fuzz-new", 1, 1, {"retention.ms": "1000"})]),
        create_topics_request([("fuzz-old", 1, 1)], version=2),
        request(37, 0, validate_only=True, timeout=millis(10), topics=(
            entity(37, 0, "CreatePartitionsTopic", name=TARGET, count=2, assignments=None),)),
        request(32, 4, include_synonyms=True, include_documentation=True, resources=(
            entity(32, 4, "DescribeConfigsResource", resource_type=2, resource_name=TARGET, configuration_keys=None),)),
        request(44, 1, validate_only=True, resources=(entity(44, 1, "AlterConfigsResource", resource_type=2,
                resource_name=TARGET, configs=(entity(44, 1, "AlterableConfig", name="retention.ms",
                                                      config_operation=0, value="100"),)),)),
        request(22, 4, transactional_id=None, transaction_timeout=millis(1000), producer_id=-1, producer_epoch=-1),
        request(10, 3, key="fuzz-group", key_type=0),
        request(10, 4, key_type=0, coordinator_keys=("a", "b")),
        request(11, 5, group_id="fuzz-group", session_timeout=millis(6000), rebalance_timeout=millis(100),
                member_id="", group_instance_id=None, protocol_type="consumer",
                protocols=(entity(11, 5, "JoinGroupRequestProtocol", name="range", metadata=b"m"),)),
        request(12, 4, group_id="fuzz-group", generation_id=1, member_id="m", group_instance_id=None),
        request(8, 2, group_id="fuzz-group", generation_id_or_member_epoch=-1, member_id="",
                retention_time=datetime.timedelta(milliseconds=-1), topics=(entity(8, 2, "OffsetCommitRequestTopic",
                name=TARGET, partitions=(entity(8, 2, "OffsetCommitRequestPartition", partition_index=0,
                                                committed_offset=1, committed_metadata=""),)),)),
        request(9, 8, require_stable=False, groups=(entity(9, 8, "OffsetFetchRequestGroup", group_id="fuzz-group",
                                                           topics=None),)),
        request(15, 5, groups=("fuzz-group",), include_authorized_operations=True),
        request(16, 4, states_filter=("Stable",)),
        request(60, 1, include_cluster_authorized_operations=True, endpoint_type=1),
        request(21, 2, timeout=millis(10), topics=(entity(21, 2, "DeleteRecordsTopic", name=TARGET, partitions=(
            entity(21, 2, "DeleteRecordsPartition", partition_index=0, offset=0),)),)),
        create_acls_request(acl_creation("TOPIC", "fuzz-", "User:someone", "READ", pattern="PREFIXED"),
                            acl_creation("GROUP", "*", "User:*", "ALL", permission="DENY")),
        create_acls_request(acl_creation("TRANSACTIONAL_ID", "tx", "User:x", "WRITE", version=1), version=1),
        request(29, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1),
        request(29, 1, resource_type_filter=2, resource_name_filter="fuzz-x", pattern_type_filter=2,
                principal_filter="User:someone", host_filter="*", operation=3, permission_type=3),
        request(31, 3, filters=(entity(31, 3, "DeleteAclsFilter", resource_type_filter=3, resource_name_filter=None,
                                       pattern_type_filter=1, principal_filter=None, host_filter=None,
                                       operation=1, permission_type=1),)),
        request(48, 1, components=(), strict=False),
        alter_client_quotas_request(([("user", None), ("client-id", "fuzz")], [("producer_byte_rate", 1e6, False)]),
                                    validate_only=True),
        describe_client_quotas_request([("client-id", 2, None)], strict=True, version=0),
        request(50, 0, users=None),
        request(51, 0, deletions=(entity(51, 0, "ScramCredentialDeletion", name="nobody", mechanism=1),),
                upsertions=(entity(51, 0, "ScramCredentialUpsertion", name="fuzz-user", mechanism=2, iterations=4096,
                                   salt=b"salt-salt", salted_password=b"x" * 64),)),
    ]
    return [encode_request(b, correlation_id=i + 1, client_id="fuzz") for i, b in enumerate(bodies)]


INTERESTING = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(8)
        if kind == 0 and len(data) > 4:  # flip bits in the payload
            i = rng.randrange(4, len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif kind == 1 and len(data) > 4:  # overwrite a byte
            data[rng.randrange(4, len(data))] = rng.randrange(256)
        elif kind == 2 and len(data) > 8:  # an interesting integer somewhere
            value = rng.choice(INTERESTING)
            width = rng.choice((1, 2, 4))
            i = rng.randrange(4, len(data) - width + 1)
            data[i : i + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "big")
        elif kind == 3 and len(data) > 6:  # cut, fixing the size prefix
            del data[rng.randrange(6, len(data)) :]
            data[:4] = struct.pack(">i", len(data) - 4)
        elif kind == 4:  # junk tail, size fixed
            data += rng.randbytes(rng.randrange(1, 32))
            data[:4] = struct.pack(">i", len(data) - 4)
        elif kind == 5 and len(data) > 8:  # another version of the same API
            data[6:8] = struct.pack(">h", rng.randrange(-2, 20))
        elif kind == 6:  # a lying size prefix
            data[:4] = struct.pack(">i", rng.choice([len(data) - 3, len(data) + 10, 2**31 - 1, -5, 0]))
        else:  # the correlation id / client id length region
            i = rng.randrange(8, min(len(data), 16)) if len(data) > 9 else 4
            data[i] = rng.randrange(256)
    return bytes(data)


def random_frame(rng: random.Random) -> bytes:
    payload = struct.pack(">hh", rng.randrange(-1, 70), rng.randrange(-1, 15)) + rng.randbytes(rng.randrange(4, 80))
    return struct.pack(">i", len(payload)) + payload


async def blast(host: str, port: int, frames: list[bytes], tls: ssl.SSLContext | None = None) -> None:
    """Send frames on one connection (over TLS with `tls`), draining answers, until done or closed."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None), 2)
    except (TimeoutError, OSError, ssl.SSLError):
        return
    drain = asyncio.ensure_future(reader.read(1 << 20))
    try:
        for frame in frames:
            writer.write(frame)
            await asyncio.wait_for(writer.drain(), 1)
            await asyncio.sleep(0)
        await asyncio.sleep(0.005)
    except (TimeoutError, OSError):
        pass
    finally:
        drain.cancel()
        writer.close()


def budget_frame(rng: random.Random) -> bytes:
    """What a client that never logs in sends to make the broker hold memory (issue 21, item 1): a frame
    announced past sasl.server.max.receive.size (512 KiB), or an allowed size cut short, or a whole
    request padded with trailing bytes."""
    kind = rng.randrange(3)
    if kind == 0:
        return struct.pack(">i", rng.choice([512 * 1024 + 1, 100 << 20, 2**31 - 1])) + bytes(rng.randrange(64))
    if kind == 1:
        return struct.pack(">i", rng.randrange(1024, 512 * 1024)) + bytes(rng.randrange(1, 1024))
    body = encode_request(request(18, 3, client_software_name="fuzz", client_software_version="1"),
                          correlation_id=1, client_id="fuzz")[4:] + bytes(rng.randrange(1, 64 * 1024))
    return struct.pack(">i", len(body)) + body


def snapshot(broker, name: str) -> tuple:
    p = broker.replicas.get(TopicPartition(name, 0))
    data = bytes(p.log.read(p.log_start_offset, 1 << 24).data)
    spec = broker.topics.get(name)
    return p.log_start_offset, p.log_end_offset, data, dict(spec.configs), spec.partitions, spec.topic_id


async def test_fuzzed_requests_leave_the_broker_serving_and_data_intact(broker, client, caplog):
    caplog.set_level(logging.ERROR, logger="tinystream")
    seed = int(os.environ.get("TINYSTREAM_FUZZ_SEED", random.randrange(2**32)))
    print(f"fuzz seed {seed}")
    rng = random.Random(seed)
    await create_topic(client, "precious", configs={"retention.ms": "-1"})
    await create_topic(client, TARGET)
    for i in range(5):
        await client.request(produce_request("precious", 0, now_batch([(b"key%d" % i, b"value%d" % i)])))
    before = snapshot(broker, "precious")

    frames = corpus()
    host, port = broker.info.host, broker.info.port
    deadline = time.monotonic() + SECONDS
    sent = 0
    while time.monotonic() < deadline:
        batch = []
        for _ in range(rng.randrange(1, 12)):
            roll = rng.random()
            if roll < 0.15:
                batch.append(rng.choice(frames))
            elif roll < 0.85:
                batch.append(mutate(rng, rng.choice(frames)))
            else:
                batch.append(random_frame(rng))
        await asyncio.gather(*(blast(host, port, batch[i::2]) for i in range(2)))
        sent += len(batch)
    print(f"fuzz: {sent} frames")

    crashes = [r for r in caplog.records if "request failed" in r.getMessage()]
    assert not crashes, crashes[0].exc_text
    assert snapshot(broker, "precious") == before

    # A real client still works.
    def kafka_python_round_trip() -> list[bytes]:
        from kafka import KafkaConsumer, KafkaProducer

        topic = f"after-fuzz-{uuid.uuid4().hex[:8]}"
        producer = KafkaProducer(bootstrap_servers=broker.info.bootstrap)
        for i in range(3):
            producer.send(topic, b"after%d" % i).get(timeout=10)
        producer.close()
        consumer = KafkaConsumer(topic, bootstrap_servers=broker.info.bootstrap, auto_offset_reset="earliest",
                                 consumer_timeout_ms=3000)
        values = [m.value for m in consumer]
        consumer.close()
        return values

    assert await asyncio.to_thread(kafka_python_round_trip) == [b"after0", b"after1", b"after2"]
    resp = await client.request(fetch_request([("precious", 0, 0)]))
    assert resp.responses[0].partitions[0].error_code == ErrorCode.none


def sasl_corpus() -> list[bytes]:
    """The login exchange at each version, then requests that must wait for a login."""
    bodies = [
        request(17, 0, mechanism="PLAIN"), request(17, 1, mechanism="SCRAM-SHA-512"),
        request(17, 1, mechanism="GSSAPI"),
        request(36, 0, auth_bytes=b"\x00alice\x00guess"), request(36, 1, auth_bytes=b"alice\x00alice\x00x"),
        request(36, 2, auth_bytes=b"n,,n=alice,r=" + b"r" * 24),
        request(36, 2, auth_bytes=b"c=biws,r=" + b"r" * 48 + b",p=" + b"A" * 88),
    ]
    login = [encode_request(b, correlation_id=i + 1, client_id="fuzz") for i, b in enumerate(bodies)]
    return login + corpus()


async def test_fuzzed_logins_over_tls_get_nobody_in(tmp_path, caplog):
    import trustme  # noqa: F401 -- the test extra that makes the throwaway CA

    from tinystream.broker.app import Broker
    from tinystream.broker.protocol.client import KafkaClient, SaslLogin, SaslRefused
    from tinystream.testing.broker import sasl_ssl_settings

    caplog.set_level(logging.ERROR, logger="tinystream")
    seed = int(os.environ.get("TINYSTREAM_FUZZ_SEED", random.randrange(2**32)))
    print(f"fuzz seed {seed}")
    rng = random.Random(seed)
    settings, truststore = sasl_ssl_settings(tmp_path, users={"alice": "alice-secret"})
    broker = Broker(settings)
    await broker.start()
    try:
        tls = ssl.create_default_context(cafile=str(truststore))
        login = SaslLogin("SCRAM-SHA-512", "alice", "alice-secret")
        host, port = broker.info.host, broker.info.port
        alice = await KafkaClient.connect(host, port, ssl_context=tls, sasl=login)
        await create_topic(alice, "precious", configs={"retention.ms": "-1"})
        await alice.request(produce_request("precious", 0, now_batch([(b"k", b"kept")])))
        before = snapshot(broker, "precious")
        frames = sasl_corpus()
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            batch = [mutate(rng, rng.choice(frames)) if rng.random() < 0.8 else rng.choice(frames)
                     for _ in range(rng.randrange(1, 8))]
            await asyncio.gather(blast(host, port, batch, tls), blast(host, port, [random_frame(rng)]),
                                 blast(host, port, [budget_frame(rng)], tls))

        # Every byte reserved for frames that never completed was given back once their connections went.
        server = broker.servers[broker.listener.name]
        deadline = time.monotonic() + 10
        while server.requests.used or server.answers.used:
            assert time.monotonic() < deadline, (server.requests.used, server.answers.used)
            await asyncio.sleep(0.05)
        crashes = [r for r in caplog.records if "request failed" in r.getMessage()]
        assert not crashes, crashes[0].exc_text
        assert snapshot(broker, "precious") == before
        assert broker.topics.get("fuzz-new") is None and broker.topics.get("fuzz-auto") is None  # nobody got in
        with pytest.raises(SaslRefused):
            await KafkaClient.connect(host, port, ssl_context=tls, sasl=SaslLogin("SCRAM-SHA-512", "alice", "guess"))
        again = await KafkaClient.connect(host, port, ssl_context=tls, sasl=login)
        fetched = await again.request(fetch_request([("precious", 0, 0)]))
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.none
        assert b"kept" in bytes(fetched.responses[0].partitions[0].records)
        await again.close()
        await alice.close()
    finally:
        await broker.stop()
