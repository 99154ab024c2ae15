"""The authorizer in the handlers, over real sockets: one broker on SASL_PLAINTEXT with ACLs on.

`admin` is a super user; `alice` and `bob` start with no ACLs. Each test
shows a refusal with Kafka's error code, then the same call allowed once an
ACL grants it. The broker has no controller, so its ACLs live in its own
access.json (control/access.py); the replicated case is in test_acls_cluster.py.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import os
import uuid

import pytest

from tinystream.acls import AclOperation
from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers import HANDLERS
from tinystream.broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from tinystream.broker.handlers.shared.authz import RULES
from tinystream.broker.protocol.client import KafkaClient, SaslLogin, SaslRefused
from tinystream.broker.storage.batch import Record
from tinystream.testing.broker import (
    acl_creation,
    create_acls_request,
    create_topics_request,
    entity,
    fetch_request,
    now_batch,
    produce_request,
    request,
    sasl_plaintext_settings,
    test_settings,
)

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


@pytest.fixture
async def secured(tmp_path):
    settings = sasl_plaintext_settings(tmp_path, users=USERS, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"})
    broker = Broker(settings)
    await broker.start()
    clients: list[KafkaClient] = []

    async def login(user: str, password: str | None = None, mechanism: str = "SCRAM-SHA-512") -> KafkaClient:
        c = await KafkaClient.connect(broker.info.host, broker.info.port,
                                      sasl=SaslLogin(mechanism, user, password or USERS[user]))
        clients.append(c)
        return c

    try:
        yield broker, login
    finally:
        for c in clients:
            await c.close()
        await broker.stop()


async def grant(admin: KafkaClient, *creations) -> None:
    reply = await admin.request(create_acls_request(*creations))
    assert [r.error_code for r in reply.results] == [ErrorCode.none] * len(creations), reply


def one_partition_error(reply) -> ErrorCode:
    """The first partition's error of a Produce or Fetch answer."""
    topic = reply.responses[0]
    return (topic.partition_responses if hasattr(topic, "partition_responses") else topic.partitions)[0].error_code


def batch(**kwargs) -> bytes:
    return now_batch([Record(value=b"v")], **kwargs)


def txn_batch() -> bytes:
    return batch(producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)


def test_every_served_api_has_an_authorization_rule():
    assert set(HANDLERS) == set(RULES)


async def test_acl_apis_create_describe_delete_for_the_admin_only(secured):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    refused = await alice.request(create_acls_request(acl_creation("TOPIC", "t", "User:alice", "READ")))
    assert refused.results[0].error_code == ErrorCode.cluster_authorization_failed
    described = await alice.request(request(29, 3, resource_type_filter=1, resource_name_filter=None,
                                            pattern_type_filter=1, principal_filter=None, host_filter=None,
                                            operation=1, permission_type=1))
    assert described.error_code == ErrorCode.cluster_authorization_failed
    reply = await admin.request(create_acls_request(
        acl_creation("TOPIC", "t", "User:alice", "READ"), acl_creation("GROUP", "g-", "User:alice", "READ",
                                                                       pattern="PREFIXED"),
        acl_creation("TOPIC", "t", "alice", "READ"), acl_creation("TOPIC", "t", "User:alice", "CLUSTER_ACTION")))
    assert [r.error_code for r in reply.results] == [0, 0, ErrorCode.invalid_request, ErrorCode.invalid_request]
    assert "principal" in reply.results[2].error_message
    described = await admin.request(request(29, 3, resource_type_filter=1, resource_name_filter=None,
                                            pattern_type_filter=1, principal_filter="User:alice", host_filter=None,
                                            operation=1, permission_type=1))
    assert described.error_code == 0
    got = {(r.resource_type, r.resource_name, r.pattern_type, a.operation) for r in described.resources for a in r.acls}
    assert got == {(2, "t", 3, AclOperation.READ), (3, "g-", 4, AclOperation.READ)}
    matched = await admin.request(request(29, 3, resource_type_filter=3, resource_name_filter="g-orders",
                                          pattern_type_filter=2, principal_filter=None, host_filter=None,
                                          operation=1, permission_type=1))
    assert [r.resource_name for r in matched.resources] == ["g-"]
    deleted = await alice.request(request(31, 3, filters=(entity(
        31, 3, "DeleteAclsFilter", resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1),)))
    assert deleted.filter_results[0].error_code == ErrorCode.cluster_authorization_failed
    deleted = await admin.request(request(31, 3, filters=(entity(
        31, 3, "DeleteAclsFilter", resource_type_filter=2, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1),)))
    assert [a.resource_name for a in deleted.filter_results[0].matching_acls] == ["t"]
    left = await admin.request(request(29, 3, resource_type_filter=1, resource_name_filter=None,
                                       pattern_type_filter=1, principal_filter=None, host_filter=None,
                                       operation=1, permission_type=1))
    assert [r.resource_name for r in left.resources] == ["g-"]


async def test_acl_apis_without_an_authorizer_answer_security_disabled(client):
    reply = await client.request(create_acls_request(acl_creation("TOPIC", "t", "User:alice", "READ")))
    assert reply.results[0].error_code == ErrorCode.security_disabled


async def test_produce_and_fetch_need_write_and_read(secured):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    topic = f"t-{uuid.uuid4().hex[:6]}"
    await admin.request(create_topics_request([(topic, 1, 1)]))
    assert one_partition_error(await alice.request(produce_request(topic, 0, batch()))) == \
        ErrorCode.topic_authorization_failed
    assert one_partition_error(await alice.request(fetch_request([(topic, 0, 0)]))) == \
        ErrorCode.topic_authorization_failed
    await grant(admin, acl_creation("TOPIC", topic, "User:alice", "WRITE"),
                acl_creation("TOPIC", topic[:3], "User:alice", "READ", pattern="PREFIXED"))
    assert one_partition_error(await alice.request(produce_request(topic, 0, batch()))) == ErrorCode.none
    fetched = await alice.request(fetch_request([(topic, 0, 0)]))
    assert one_partition_error(fetched) == ErrorCode.none and fetched.responses[0].partitions[0].records
    # deny overrides allow, and a follower's replica_id from alice is not believed
    await grant(admin, acl_creation("TOPIC", topic, "User:alice", "READ", permission="DENY"))
    assert one_partition_error(await alice.request(fetch_request([(topic, 0, 0)]))) == \
        ErrorCode.topic_authorization_failed
    assert one_partition_error(await admin.request(fetch_request([(topic, 0, 0)], replica_id=1))) == \
        ErrorCode.topic_authorization_failed  # the super user is allowed, but broker 1 is not a peer here


async def test_metadata_hides_what_the_caller_may_not_describe(secured):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    await admin.request(create_topics_request([("visible", 1, 1), ("hidden", 1, 1)]))
    await grant(admin, acl_creation("TOPIC", "visible", "User:alice", "READ"))  # READ implies DESCRIBE
    every = await alice.request(request(3, 12, topics=None, allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False))
    assert [t.name for t in every.topics] == ["visible"]
    named = await alice.request(request(3, 12, topics=tuple(
        entity(3, 12, "MetadataRequestTopic", name=n, topic_id=None) for n in ("hidden", "missing")),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert [t.error_code for t in named.topics] == [ErrorCode.topic_authorization_failed] * 2
    await grant(admin, acl_creation("TOPIC", "missing", "User:alice", "DESCRIBE"))
    named = await alice.request(request(3, 12, topics=(entity(3, 12, "MetadataRequestTopic", name="missing",
                                                              topic_id=None),),
                                        allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert named.topics[0].error_code == ErrorCode.topic_authorization_failed  # auto-create needs CREATE
    await grant(admin, acl_creation("TOPIC", "missing", "User:alice", "CREATE"))
    named = await alice.request(request(3, 12, topics=(entity(3, 12, "MetadataRequestTopic", name="missing",
                                                              topic_id=None),),
                                        allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert named.topics[0].error_code == ErrorCode.none and named.topics[0].partitions


async def test_topic_admin_needs_create_delete_and_alter(secured):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    refused = await alice.request(create_topics_request([("team-a.orders", 1, 1)]))
    assert refused.topics[0].error_code == ErrorCode.topic_authorization_failed
    await grant(admin, acl_creation("TOPIC", "team-a.", "User:alice", "ALL", pattern="PREFIXED"))
    created = await alice.request(create_topics_request([("team-a.orders", 1, 1), ("team-b.orders", 1, 1)]))
    assert [t.error_code for t in created.topics] == [ErrorCode.none, ErrorCode.topic_authorization_failed]
    deleted = await alice.request(request(20, 6, topics=tuple(
        entity(20, 6, "DeleteTopicState", name=n, topic_id=uuid.UUID(int=0)) for n in ("team-a.orders", "x")),
        timeout=datetime.timedelta(seconds=5)))
    assert [r.error_code for r in deleted.responses] == [ErrorCode.none, ErrorCode.topic_authorization_failed]


async def test_groups_need_read_and_describe_on_the_group(secured):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    found = await alice.request(request(10, 3, key="g1", key_type=0))
    assert found.error_code == ErrorCode.group_authorization_failed
    joined = await alice.request(request(11, 5, group_id="g1", session_timeout=datetime.timedelta(seconds=10),
                                         rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                                         group_instance_id=None, protocol_type="consumer", protocols=(
                                             entity(11, 5, "JoinGroupRequestProtocol", name="range", metadata=b""),)))
    assert joined.error_code == ErrorCode.group_authorization_failed
    await grant(admin, acl_creation("GROUP", "g1", "User:alice", "READ"))
    found = await alice.request(request(10, 3, key="g1", key_type=0))
    assert found.error_code == ErrorCode.none
    listed = await alice.request(request(16, 4, states_filter=()))
    assert listed.error_code == ErrorCode.none


async def test_both_describe_apis_refuse_a_group_with_an_empty_row(secured):
    # handlers/described_group.py: the refusal is the row of a description with only the error and the id.
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    await grant(admin, acl_creation("GROUP", "seen", "User:alice", "DESCRIBE"))
    assert (await alice.request(request(10, 3, key="seen", key_type=0))).error_code == ErrorCode.none
    classic = await alice.request(request(15, 5, groups=("hidden", "seen"), include_authorized_operations=False))
    assert [(g.group_id, g.error_code) for g in classic.groups] == [
        ("hidden", ErrorCode.group_authorization_failed), ("seen", ErrorCode.none)]
    hidden = classic.groups[0]
    assert (hidden.group_state, hidden.protocol_type, hidden.protocol_data, hidden.members) == ("", "", "", ())
    consumer = await alice.request(request(69, 1, group_ids=("seen", "hidden"), include_authorized_operations=False))
    assert [(g.group_id, g.error_code) for g in consumer.groups] == [
        ("hidden", ErrorCode.group_authorization_failed), ("seen", ErrorCode.group_id_not_found)]
    hidden = consumer.groups[0]
    assert (hidden.error_message, hidden.group_state, hidden.group_epoch, hidden.assignment_epoch,
            hidden.assignor_name, hidden.members) == (None, "", -1, -1, "", ())
    assert hidden.authorized_operations == classic.groups[0].authorized_operations == AUTHORIZED_OPERATIONS_OMITTED


async def test_idempotent_and_transactional_producers(secured):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    idempotent = request(22, 4, transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                         producer_id=-1, producer_epoch=-1)
    assert (await alice.request(idempotent)).error_code == ErrorCode.cluster_authorization_failed
    await grant(admin, acl_creation("TOPIC", "anything", "User:alice", "WRITE"))  # KIP-679: WRITE on any topic
    assert (await alice.request(idempotent)).error_code == ErrorCode.none
    transactional = request(22, 4, transactional_id="tx-1", transaction_timeout=datetime.timedelta(seconds=60),
                            producer_id=-1, producer_epoch=-1)
    assert (await alice.request(transactional)).error_code == ErrorCode.transactional_id_authorization_failed
    produced = await alice.request(produce_request("anything", 0, txn_batch(), transactional_id="tx-1"))
    assert one_partition_error(produced) == ErrorCode.transactional_id_authorization_failed
    # As Kafka: only transactional batches need the transactional id (and then cannot go without one).
    await admin.request(create_topics_request([("anything", 1, 1)]))
    plain = await alice.request(produce_request("anything", 0, batch(), transactional_id="tx-1"))
    assert one_partition_error(plain) == ErrorCode.none
    anonymous = await alice.request(produce_request("anything", 0, txn_batch()))
    assert one_partition_error(anonymous) == ErrorCode.transactional_id_authorization_failed
    markers = await alice.request(request(27, 1, markers=(entity(
        27, 1, "WritableTxnMarker", producer_id=1, producer_epoch=0, transaction_result=True,
        topics=(entity(27, 1, "WritableTxnMarkerTopic", name="anything", partition_indexes=(0,)),),
        coordinator_epoch=0),)))
    assert markers.markers[0].topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed


async def test_scram_credentials_altered_through_kafkas_api(secured):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    salt, iterations = os.urandom(16), 4096
    salted = hashlib.pbkdf2_hmac("sha512", b"carol-pw", salt, iterations)
    upsert = request(51, 0, deletions=(), upsertions=(entity(
        51, 0, "ScramCredentialUpsertion", name="carol", mechanism=2, iterations=iterations, salt=salt,
        salted_password=salted),))
    refused = await alice.request(upsert)
    assert refused.results[0].error_code == ErrorCode.cluster_authorization_failed
    with pytest.raises(SaslRefused):
        await login("carol", "carol-pw")
    done = await admin.request(upsert)
    assert done.results[0].error_code == ErrorCode.none, done
    carol = await login("carol", "carol-pw")
    assert carol is not None
    with pytest.raises(SaslRefused):
        await login("carol", "carol-pw", mechanism="SCRAM-SHA-256")  # only SHA-512 was set
    described = await admin.request(request(50, 0, users=(entity(50, 0, "UserName", name="carol"),
                                                          entity(50, 0, "UserName", name="nobody"))))
    assert [(r.user, r.error_code) for r in described.results] == [("carol", 0), ("nobody",
                                                                                  ErrorCode.resource_not_found)]
    assert [(c.mechanism, c.iterations) for c in described.results[0].credential_infos] == [(2, 4096)]
    assert (await alice.request(request(50, 0, users=None))).error_code == ErrorCode.cluster_authorization_failed
    bad = await admin.request(request(51, 0, deletions=(entity(51, 0, "ScramCredentialDeletion", name="nobody",
                                                               mechanism=1),), upsertions=(entity(
        51, 0, "ScramCredentialUpsertion", name="dave", mechanism=2, iterations=10, salt=salt,
        salted_password=salted),)))
    assert [(r.user, r.error_code) for r in bad.results] == [("nobody", ErrorCode.resource_not_found),
                                                            ("dave", ErrorCode.unacceptable_credential)]
    gone = await admin.request(request(51, 0, upsertions=(), deletions=(
        entity(51, 0, "ScramCredentialDeletion", name="carol", mechanism=2),)))
    assert gone.results[0].error_code == ErrorCode.none
    with pytest.raises(SaslRefused):
        await login("carol", "carol-pw")


async def test_a_standalone_broker_keeps_its_acls_across_a_restart(tmp_path):
    settings = sasl_plaintext_settings(tmp_path, users=USERS, **{"authorizer.class.name": "acl",
                                                                 "super.users": "User:admin"})
    broker = Broker(settings)
    info = await broker.start()
    admin = await KafkaClient.connect(info.host, info.port, sasl=SaslLogin("PLAIN", "admin", USERS["admin"]))
    await grant(admin, acl_creation("TOPIC", "kept", "User:alice", "READ"))
    await admin.close()
    await broker.stop()
    again = Broker(settings)
    await again.start()
    try:
        assert again.ctx.authorizer is not None
        assert again.ctx.authorizer.authorize("User:alice", "127.0.0.1", AclOperation.READ, 2, "kept")
    finally:
        await again.stop()


def test_the_authorizers_super_users_are_the_brokers_principals(tmp_path):
    # One set (listener.super_users): who may do anything is who may act as a broker on the inter-broker listener.
    settings = sasl_plaintext_settings(tmp_path, users=USERS, **{
        "authorizer.class.name": "acl", "super.users": "User:admin", "inter.broker.sasl.username": "broker"})
    broker = Broker(settings)
    assert broker.ctx.authorizer is not None
    assert broker.ctx.authorizer.super_users == broker.ctx.broker_principals == {"User:admin", "User:broker"}


def test_an_unknown_authorizer_class_stops_the_broker_at_start(tmp_path):
    from tinystream.broker.security.authorizer import AuthorizerConfigError  # noqa: PLC0415

    with pytest.raises(AuthorizerConfigError, match="not known"):
        Broker(test_settings(tmp_path, **{"authorizer.class.name": "com.example.Mine"}))


# -- every API, one caller without ACLs ------------------------------------------------------

T = "guarded"  # a topic that exists (created by the admin), with no ACL for alice
TOPIC_DENIED, GROUP_DENIED = ErrorCode.topic_authorization_failed, ErrorCode.group_authorization_failed
CLUSTER_DENIED, TXN_DENIED = ErrorCode.cluster_authorization_failed, ErrorCode.transactional_id_authorization_failed
ms = datetime.timedelta


def _errors(value) -> list[int]:
    """Every error code in an answer (the fields named error_code, partition_error_code, or top-level)."""
    import dataclasses  # noqa: PLC0415

    found: list[int] = []
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name in ("error_code", "partition_error_code"):
                found.append(int(item))
            else:
                found += _errors(item)
    elif isinstance(value, tuple):
        for item in value:
            found += _errors(item)
    return found


REFUSALS = [
    ("Produce", lambda: produce_request(T, 0, batch()), TOPIC_DENIED),
    ("Produce-transactional", lambda: produce_request(T, 0, txn_batch(), transactional_id="tx"), TXN_DENIED),
    ("Fetch", lambda: fetch_request([(T, 0, 0)]), TOPIC_DENIED),
    ("ListOffsets", lambda: request(2, 7, replica_id=-1, isolation_level=0, topics=(entity(
        2, 7, "ListOffsetsTopic", name=T, partitions=(entity(2, 7, "ListOffsetsPartition", partition_index=0,
                                                             timestamp=-1, current_leader_epoch=-1),)),)),
     TOPIC_DENIED),
    ("OffsetForLeaderEpoch", lambda: request(23, 4, replica_id=-1, topics=(entity(
        23, 4, "OffsetForLeaderTopic", topic=T, partitions=(entity(
            23, 4, "OffsetForLeaderPartition", partition=0, current_leader_epoch=-1, leader_epoch=0),)),)),
     TOPIC_DENIED),
    ("OffsetForLeaderEpoch-follower", lambda: request(23, 4, replica_id=2, topics=(entity(
        23, 4, "OffsetForLeaderTopic", topic=T, partitions=(entity(
            23, 4, "OffsetForLeaderPartition", partition=0, current_leader_epoch=-1, leader_epoch=0),)),)),
     CLUSTER_DENIED),
    ("Metadata", lambda: request(3, 12, topics=(entity(3, 12, "MetadataRequestTopic", name=T, topic_id=None),),
                                 allow_auto_topic_creation=False, include_topic_authorized_operations=False),
     TOPIC_DENIED),
    ("OffsetCommit", lambda: request(8, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                     group_instance_id=None, topics=(entity(
                                         8, 8, "OffsetCommitRequestTopic", name=T, partitions=(entity(
                                             8, 8, "OffsetCommitRequestPartition", partition_index=0,
                                             committed_offset=1, committed_leader_epoch=-1,
                                             committed_metadata=""),)),)), GROUP_DENIED),
    ("OffsetFetch", lambda: request(9, 8, require_stable=False, groups=(entity(
        9, 8, "OffsetFetchRequestGroup", group_id="g", topics=None),)), GROUP_DENIED),
    ("FindCoordinator-group", lambda: request(10, 3, key="g", key_type=0), GROUP_DENIED),
    ("FindCoordinator-txn", lambda: request(10, 3, key="tx", key_type=1), TXN_DENIED),
    ("JoinGroup", lambda: request(11, 5, group_id="g", session_timeout=ms(seconds=10),
                                  rebalance_timeout=ms(seconds=10), member_id="", group_instance_id=None,
                                  protocol_type="consumer", protocols=()), GROUP_DENIED),
    ("Heartbeat", lambda: request(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None),
     GROUP_DENIED),
    ("LeaveGroup", lambda: request(13, 5, group_id="g", members=(entity(
        13, 5, "MemberIdentity", member_id="m", group_instance_id=None, reason=None),)), GROUP_DENIED),
    ("SyncGroup", lambda: request(14, 5, group_id="g", generation_id=1, member_id="m", group_instance_id=None,
                                  protocol_type="consumer", protocol_name="range", assignments=()), GROUP_DENIED),
    ("DescribeGroups", lambda: request(15, 5, groups=("g",), include_authorized_operations=False), GROUP_DENIED),
    ("CreateTopics", lambda: create_topics_request([("alices", 1, 1)]), TOPIC_DENIED),
    ("DeleteTopics", lambda: request(20, 6, topics=(entity(20, 6, "DeleteTopicState", name=T,
                                                           topic_id=uuid.UUID(int=0)),), timeout=ms(seconds=5)),
     TOPIC_DENIED),
    ("DeleteRecords", lambda: request(21, 2, timeout=ms(seconds=1), topics=(entity(
        21, 2, "DeleteRecordsTopic", name=T, partitions=(entity(21, 2, "DeleteRecordsPartition", partition_index=0,
                                                                offset=0),)),)), TOPIC_DENIED),
    ("InitProducerId", lambda: request(22, 4, transactional_id=None, transaction_timeout=ms(seconds=60),
                                       producer_id=-1, producer_epoch=-1), CLUSTER_DENIED),
    ("InitProducerId-txn", lambda: request(22, 4, transactional_id="tx", transaction_timeout=ms(seconds=60),
                                           producer_id=-1, producer_epoch=-1), TXN_DENIED),
    ("AddPartitionsToTxn", lambda: request(24, 3, v3_and_below_transactional_id="tx", v3_and_below_producer_id=1,
                                           v3_and_below_producer_epoch=0, v3_and_below_topics=(entity(
                                               24, 3, "AddPartitionsToTxnTopic", name=T, partitions=(0,)),)),
     TXN_DENIED),
    ("AddPartitionsToTxn-broker", lambda: request(24, 4, transactions=(entity(
        24, 4, "AddPartitionsToTxnTransaction", transactional_id="tx", producer_id=1, producer_epoch=0,
        verify_only=True, topics=()),)), CLUSTER_DENIED),
    ("AddOffsetsToTxn", lambda: request(25, 3, transactional_id="tx", producer_id=1, producer_epoch=0,
                                        group_id="g"), TXN_DENIED),
    ("EndTxn", lambda: request(26, 3, transactional_id="tx", producer_id=1, producer_epoch=0, committed=True),
     TXN_DENIED),
    ("WriteTxnMarkers", lambda: request(27, 1, markers=(entity(
        27, 1, "WritableTxnMarker", producer_id=1, producer_epoch=0, transaction_result=True,
        topics=(entity(27, 1, "WritableTxnMarkerTopic", name=T, partition_indexes=(0,)),), coordinator_epoch=0),)),
     CLUSTER_DENIED),
    ("TxnOffsetCommit", lambda: request(28, 3, transactional_id="tx", group_id="g", producer_id=1,
                                        producer_epoch=0, generation_id=-1, member_id="", group_instance_id=None,
                                        topics=(entity(28, 3, "TxnOffsetCommitRequestTopic", name=T, partitions=(
                                            entity(28, 3, "TxnOffsetCommitRequestPartition", partition_index=0,
                                                   committed_offset=1, committed_leader_epoch=-1,
                                                   committed_metadata=""),)),)), TXN_DENIED),
    ("DescribeAcls", lambda: request(29, 3, resource_type_filter=1, resource_name_filter=None,
                                     pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                                     permission_type=1), CLUSTER_DENIED),
    ("CreateAcls", lambda: create_acls_request(acl_creation("TOPIC", T, "User:alice", "ALL")), CLUSTER_DENIED),
    ("DeleteAcls", lambda: request(31, 3, filters=(entity(
        31, 3, "DeleteAclsFilter", resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1),)), CLUSTER_DENIED),
    ("DescribeConfigs-topic", lambda: request(32, 4, include_synonyms=False, include_documentation=False,
                                              resources=(entity(32, 4, "DescribeConfigsResource", resource_type=2,
                                                                resource_name=T, configuration_keys=None),)),
     TOPIC_DENIED),
    ("DescribeConfigs-broker", lambda: request(32, 4, include_synonyms=False, include_documentation=False,
                                               resources=(entity(32, 4, "DescribeConfigsResource", resource_type=4,
                                                                 resource_name="", configuration_keys=None),)),
     CLUSTER_DENIED),
    ("DescribeConfigs-broker-logger", lambda: request(32, 4, include_synonyms=False, include_documentation=False,
                                                      resources=(entity(32, 4, "DescribeConfigsResource",
                                                                        resource_type=8, resource_name="0",
                                                                        configuration_keys=None),)),
     CLUSTER_DENIED),
    ("AlterConfigs", lambda: request(33, 2, validate_only=True, resources=(entity(
        33, 2, "AlterConfigsResource", resource_type=2, resource_name=T, configs=(entity(
            33, 2, "AlterableConfig", name="retention.ms", value="1"),)),)), TOPIC_DENIED),
    ("CreatePartitions", lambda: request(37, 3, validate_only=True, timeout=ms(seconds=1), topics=(entity(
        37, 3, "CreatePartitionsTopic", name=T, count=2, assignments=None),)), TOPIC_DENIED),
    ("DeleteGroups", lambda: request(42, 2, groups_names=("g",)), GROUP_DENIED),
    ("IncrementalAlterConfigs", lambda: request(44, 1, validate_only=True, resources=(entity(
        44, 1, "AlterConfigsResource", resource_type=2, resource_name=T, configs=(entity(
            44, 1, "AlterableConfig", name="retention.ms", config_operation=0, value="1"),)),)), TOPIC_DENIED),
    ("IncrementalAlterConfigs-broker", lambda: request(44, 1, validate_only=True, resources=(entity(
        44, 1, "AlterConfigsResource", resource_type=4, resource_name="0", configs=(entity(
            44, 1, "AlterableConfig", name="message.max.bytes", config_operation=0, value="2000"),)),)),
     CLUSTER_DENIED),
    ("IncrementalAlterConfigs-broker-default", lambda: request(44, 1, validate_only=True, resources=(entity(
        44, 1, "AlterConfigsResource", resource_type=4, resource_name="", configs=(entity(
            44, 1, "AlterableConfig", name="log.retention.ms", config_operation=0, value="60000"),)),)),
     CLUSTER_DENIED),
    ("IncrementalAlterConfigs-broker-logger", lambda: request(44, 1, validate_only=True, resources=(entity(
        44, 1, "AlterConfigsResource", resource_type=8, resource_name="0", configs=(entity(
            44, 1, "AlterableConfig", name="tinystream.broker", config_operation=0, value="DEBUG"),)),)),
     CLUSTER_DENIED),
    ("DescribeLogDirs", lambda: request(35, 4, topics=None), CLUSTER_DENIED),
    ("AlterReplicaLogDirs", lambda: request(34, 2, dirs=(entity(34, 2, "AlterReplicaLogDir", path="/nowhere", topics=(
        entity(34, 2, "AlterReplicaLogDirTopic", name=T, partitions=(0,)),)),)), CLUSTER_DENIED),
    ("ElectLeaders", lambda: request(43, 2, election_type=0, topic_partitions=(entity(
        43, 2, "TopicPartitions", topic=T, partitions=(0,)),)), CLUSTER_DENIED),
    ("AlterPartitionReassignments", lambda: request(45, 1, timeout=ms(seconds=5), allow_replication_factor_change=True,
                                                    topics=(entity(45, 1, "ReassignableTopic", name=T, partitions=(
                                                        entity(45, 1, "ReassignablePartition", partition_index=0,
                                                               replicas=(1,)),)),)), CLUSTER_DENIED),
    ("ListPartitionReassignments", lambda: request(46, 0, timeout=ms(seconds=5), topics=None), CLUSTER_DENIED),
    ("DescribeClientQuotas", lambda: request(48, 1, components=(), strict=False), CLUSTER_DENIED),
    ("AlterClientQuotas", lambda: request(49, 1, validate_only=False, entries=(entity(
        49, 1, "EntryData", entity=(entity(49, 1, "EntityData", entity_type="client-id", entity_name="c"),),
        ops=(entity(49, 1, "OpData", key="producer_byte_rate", value=1024.0, remove=False),)),)), CLUSTER_DENIED),
    ("AlterClientQuotas-request_percentage", lambda: request(49, 1, validate_only=False, entries=(entity(
        49, 1, "EntryData", entity=(entity(49, 1, "EntityData", entity_type="user", entity_name="alice"),),
        ops=(entity(49, 1, "OpData", key="request_percentage", value=0.5, remove=False),)),)), CLUSTER_DENIED),
    ("DescribeUserScramCredentials", lambda: request(50, 0, users=None), CLUSTER_DENIED),
    ("AlterUserScramCredentials", lambda: request(51, 0, upsertions=(), deletions=(entity(
        51, 0, "ScramCredentialDeletion", name="alice", mechanism=2),)), CLUSTER_DENIED),
    ("DescribeProducers", lambda: request(61, 0, topics=(entity(61, 0, "TopicRequest", name=T,
                                                                 partition_indexes=(0,)),)), TOPIC_DENIED),
    ("DescribeTransactions", lambda: request(65, 0, transactional_ids=("tx",)), TXN_DENIED),
    ("ConsumerGroupHeartbeat", lambda: request(68, 0, group_id="g", member_id="", member_epoch=0, instance_id=None,
                                               rack_id=None, rebalance_timeout=ms(seconds=30),
                                               subscribed_topic_names=(T,), server_assignor=None,
                                               topic_partitions=()), GROUP_DENIED),
    ("ConsumerGroupDescribe", lambda: request(69, 0, group_ids=("g",), include_authorized_operations=False),
     GROUP_DENIED),
]


@pytest.mark.parametrize(("name", "make", "expected"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_every_api_refuses_a_caller_without_acls(secured, name, make, expected):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    await admin.request(create_topics_request([(T, 1, 1)]))
    reply = await alice.request(make())
    errors = {e for e in _errors(reply) if e}  # top-level 0 beside per-partition refusals is Kafka's shape
    assert errors == {expected}, (name, reply)
    again = await admin.request(make())  # the super user is not refused
    assert expected not in _errors(again), (name, again)


async def test_broker_configs_need_describe_configs_and_alter_configs_on_the_cluster(secured):
    """Kafka's rule for BROKER and BROKER_LOGGER resources: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster."""
    broker, login = secured
    admin, alice = await login("admin"), await login("alice")

    def alter(resource_type: int, name: str, key: str, value: str):
        return request(44, 1, validate_only=False, resources=(entity(
            44, 1, "AlterConfigsResource", resource_type=resource_type, resource_name=name, configs=(entity(
                44, 1, "AlterableConfig", name=key, config_operation=0, value=value),)),))

    def describe(resource_type: int, name: str):
        return request(32, 4, include_synonyms=False, include_documentation=False, resources=(entity(
            32, 4, "DescribeConfigsResource", resource_type=resource_type, resource_name=name,
            configuration_keys=None),))

    await grant(admin, acl_creation("CLUSTER", "kafka-cluster", "User:alice", "DESCRIBE_CONFIGS"))
    assert (await alice.request(describe(4, "0"))).results[0].error_code == ErrorCode.none
    assert (await alice.request(describe(8, "0"))).results[0].error_code == ErrorCode.none
    refused = await alice.request(alter(4, "0", "message.max.bytes", "2000"))
    assert refused.responses[0].error_code == ErrorCode.cluster_authorization_failed
    refused = await alice.request(alter(8, "0", "tinystream.broker", "DEBUG"))
    assert refused.responses[0].error_code == ErrorCode.cluster_authorization_failed
    assert broker.ctx.broker_configs.layers.broker == {}
    # ALTER_CONFIGS on a topic is not enough: the broker's configs belong to the cluster.
    await grant(admin, acl_creation("TOPIC", "*", "User:alice", "ALTER_CONFIGS"))
    refused = await alice.request(alter(4, "", "log.retention.ms", "60000"))
    assert refused.responses[0].error_code == ErrorCode.cluster_authorization_failed
    refused = await alice.request(alter(4, "0", "leader.replication.throttled.rate", "1000"))  # KIP-73's rates too
    assert refused.responses[0].error_code == ErrorCode.cluster_authorization_failed
    assert broker.replicas.throttles.leader.limit == 2**63 - 1
    await grant(admin, acl_creation("CLUSTER", "kafka-cluster", "User:alice", "ALTER_CONFIGS"))
    allowed = await alice.request(alter(4, "0", "message.max.bytes", "2000"))
    assert allowed.responses[0].error_code == ErrorCode.none
    allowed = await alice.request(alter(4, "0", "leader.replication.throttled.rate", "1000"))
    assert allowed.responses[0].error_code == ErrorCode.none and broker.replicas.throttles.leader.limit == 1000
    assert broker.ctx.broker_configs.settings.message_max_bytes == 2000
    # bob, with no ACL at all, may not even look.
    bob = await login("bob")
    assert (await bob.request(describe(4, "0"))).results[0].error_code == ErrorCode.cluster_authorization_failed


def test_every_checked_api_has_a_refusal_test():
    from tinystream.broker.protocol.api_versions import api_name  # noqa: PLC0415

    covered = {r[0].split("-")[0] for r in REFUSALS}
    unchecked = {"ApiVersions", "SaslHandshake", "SaslAuthenticate", "DescribeCluster",
                 "ListGroups", "ListTransactions"}  # none, or filtering (tested above and below)
    assert {api_name(k) for k in RULES} - unchecked == covered


async def test_listings_show_only_what_the_caller_may_describe(secured):
    _, login = secured
    admin, alice = await login("admin"), await login("alice")
    await admin.request(create_topics_request([(T, 1, 1)]))
    commit = request(8, 8, group_id="listed", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                     topics=(entity(8, 8, "OffsetCommitRequestTopic", name=T, partitions=(entity(
                         8, 8, "OffsetCommitRequestPartition", partition_index=0, committed_offset=0,
                         committed_leader_epoch=-1, committed_metadata=""),)),))
    assert (await admin.request(request(10, 3, key="listed", key_type=0))).error_code == 0  # makes the offsets topic
    for _ in range(100):
        if _errors(await admin.request(commit)) == [0]:
            break
        await asyncio.sleep(0.05)
    assert _errors(await admin.request(commit)) == [0]
    assert [g.group_id for g in (await admin.request(request(16, 4, states_filter=()))).groups] == ["listed"]
    assert (await alice.request(request(16, 4, states_filter=()))).groups == ()
    await grant(admin, acl_creation("GROUP", "list", "User:alice", "DESCRIBE", pattern="PREFIXED"))
    assert [g.group_id for g in (await alice.request(request(16, 4, states_filter=()))).groups] == ["listed"]
    listed = await alice.request(request(66, 1, state_filters=(), producer_id_filters=(), duration_filter=-1))
    assert listed.error_code == ErrorCode.none and listed.transaction_states == ()
    cluster = await alice.request(request(60, 1, include_cluster_authorized_operations=False, endpoint_type=1))
    assert cluster.error_code == ErrorCode.none  # Kafka answers DescribeCluster to anyone authenticated


def test_a_broken_access_file_stops_the_broker_with_its_path(tmp_path):
    settings = test_settings(tmp_path / "data", **{"authorizer.class.name": "acl"})
    (tmp_path / "data").mkdir(parents=True)
    (tmp_path / "data" / "access.json").write_text("{not json")
    with pytest.raises(ValueError, match="access.json: not an ACL and credential file"):
        Broker(settings)


async def test_mtls_principals_are_authorized_by_their_certificate_name(tmp_path):
    import ssl  # noqa: PLC0415

    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    keystore, truststore = tmp_path / "broker.pem", tmp_path / "ca.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(truststore))
    broker = Broker(test_settings(tmp_path / "data", **{
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(truststore), "ssl.client.auth": "required",
        "authorizer.class.name": "acl", "super.users": "User:CN=admin",
        # trustme's subjects hold more than the CN (the principal is the whole DN by default): keep the CN
        "ssl.principal.mapping.rules": "RULE:^(CN=[^,]*).*$/$1/"}))
    info = await broker.start()
    clients = []

    async def connect(name: str) -> KafkaClient:
        pem = tmp_path / f"{name}.pem"
        ca.issue_cert(f"{name}.clients", common_name=name).private_key_and_cert_chain_pem.write_to_path(str(pem))
        context = ssl.create_default_context(cafile=str(truststore))
        context.load_cert_chain(str(pem))
        client = await KafkaClient.connect(info.host, info.port, ssl_context=context)
        clients.append(client)
        return client

    try:
        admin, alice = await connect("admin"), await connect("alice")
        await admin.request(create_topics_request([("certs", 1, 1)]))
        assert one_partition_error(await alice.request(produce_request("certs", 0, batch()))) == \
            ErrorCode.topic_authorization_failed
        await grant(admin, acl_creation("TOPIC", "certs", "User:CN=alice", "WRITE"))
        assert one_partition_error(await alice.request(produce_request("certs", 0, batch()))) == ErrorCode.none
    finally:
        for c in clients:
            await c.close()
        await broker.stop()


def consumer_heartbeat(group: str, regex: str, epoch: int = 0, member: str = "m-1"):
    from tinystream.broker.protocol.codec import millis
    return request(68, 1, group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                   rebalance_timeout=millis(30_000), subscribed_topic_names=None, subscribed_topic_regex=regex,
                   server_assignor=None, topic_partitions=None if epoch else ())


async def test_a_regex_subscription_and_a_group_description_reveal_no_hidden_topic(secured):
    """Issue 21, item 8: KIP-848 regexes match only what the member may DESCRIBE, and ConsumerGroupDescribe
    of a group that names a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED (Kafka's)."""
    broker, login = secured
    admin, alice, bob = await login("admin"), await login("alice"), await login("bob")
    created = await admin.request(create_topics_request([("orders-eu", 1, 1), ("orders-secret", 1, 1)]))
    assert [t.error_code for t in created.topics] == [ErrorCode.none] * 2
    await grant(admin, acl_creation("GROUP", "readers", "User:alice", "READ"),
                acl_creation("GROUP", "readers", "User:bob", "DESCRIBE"),
                acl_creation("TOPIC", "orders-eu", "User:alice", "DESCRIBE"),
                acl_creation("TOPIC", "orders-eu", "User:bob", "DESCRIBE"))
    await alice.request(request(10, 3, key="readers", key_type=0))
    for _ in range(100):
        joined = await alice.request(consumer_heartbeat("readers", "orders-.*"))
        if joined.error_code != ErrorCode.coordinator_load_in_progress:
            break
        await asyncio.sleep(0.05)
    assert joined.error_code == ErrorCode.none, joined
    assigned = {broker.topics.store.by_id(t.topic_id).name for t in joined.assignment.topic_partitions}
    assert assigned == {"orders-eu"}  # orders-secret matches the regex, but alice may not see it
    described = await bob.request(request(69, 1, group_ids=("readers",), include_authorized_operations=False))
    assert described.groups[0].error_code == ErrorCode.none  # every topic it names, bob may see

    await grant(admin, acl_creation("TOPIC", "orders-secret", "User:alice", "DESCRIBE"))
    for epoch in range(joined.member_epoch, joined.member_epoch + 50):  # alice's next heartbeats see it
        beat = await alice.request(consumer_heartbeat("readers", "orders-.*", epoch=epoch,
                                                      member=joined.member_id))
        group = broker.groups.coordinator.consumer_group("readers")
        if "orders-secret" in group.target.get(joined.member_id, {}):
            break
        await asyncio.sleep(0.05)
    assert "orders-secret" in group.target[joined.member_id], beat
    described = await bob.request(request(69, 1, group_ids=("readers",), include_authorized_operations=False))
    assert described.groups[0].error_code == ErrorCode.topic_authorization_failed  # bob may not see it
    assert "not authorized to describe" in described.groups[0].error_message
    assert not described.groups[0].members
