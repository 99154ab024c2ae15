"""Several instances on a cluster with the authorizer on, holding exactly the ACLs the operator gives the
registry's TinyStreamUser (operator/k8s/schema_registry.py: its topic and its election group): they elect a
leader and a write through the follower lands. Without the group ACL no instance can join, so none leads."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402

from tinystream.operator.k8s.schema_registry import GROUP_OPERATIONS, TOPIC, TOPIC_OPERATIONS  # noqa: E402
from tinystream.registry.app import RegistryOptions  # noqa: E402
from tinystream.testing.broker import BrokerThread, sasl_plaintext_settings  # noqa: E402
from tinystream.testing.registry import RegistryThread  # noqa: E402
from tinystream.testing.waiting import wait_until  # noqa: E402

USERS = {"admin": "admin-secret", "registry": "registry-secret"}
GROUP = "demo-schema-registry"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    settings = sasl_plaintext_settings(tmp_path_factory.mktemp("registry-acls"), users=USERS, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"})
    with BrokerThread(settings) as broker:
        yield broker


def _sasl(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": USERS[user]}


def _grant(broker, kind: str, name: str, operations: tuple[str, ...]) -> None:
    """As the user reconciler does from the TinyStreamUser's ACLs (Kafka's operation names)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **_sasl("admin")})
    bindings = [AclBinding(ResourceType[kind], name, ResourcePatternType.LITERAL, "User:registry", "*",
                           AclOperation[re.sub(r"(?<!^)(?=[A-Z])", "_", op).upper()], AclPermissionType.ALLOW)
                for op in operations]
    for future in admin.create_acls(bindings).values():
        future.result(30)


def _start(broker, **options) -> RegistryThread:
    client = (("security_protocol", "SASL_PLAINTEXT"), ("sasl_mechanism", "SCRAM-SHA-512"),
              ("sasl_plain_username", "registry"), ("sasl_plain_password", USERS["registry"]))
    registry = RegistryThread(RegistryOptions(bootstrap=broker.bootstrap, port=0, topic=TOPIC, client_options=client,
                                              session_timeout_ms=6000, leader_wait_s=1.0, **options))
    registry.start()
    return registry


def test_the_operators_acls_let_the_instances_elect_and_forward(acl_broker):
    _grant(acl_broker, "TOPIC", TOPIC, TOPIC_OPERATIONS)
    outsider = _start(acl_broker, group_id="no-acl-group")  # the topic's ACLs but not this group's
    started = [outsider]
    try:
        started += [_start(acl_broker, group_id=GROUP) for _ in range(2)]
        _grant(acl_broker, "GROUP", GROUP, GROUP_OPERATIONS)
        members = started[1:]
        wait_until(lambda: {m.server.leadership.leader_url for m in members} == {members[0].url}
                   or {m.server.leadership.leader_url for m in members} == {members[1].url},
                   timeout=60, what="the two to agree on a leader once the group ACL is there")
        follower = next(m for m in members if m.url != m.server.leadership.leader_url)
        schema = Schema(json.dumps({"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]}), "AVRO")
        assert SchemaRegistryClient({"url": follower.url}).register_schema("a", schema) == 1
        assert outsider.server.leadership.leader_url is None  # refused its group all along: it never led
    finally:
        for registry in started:
            registry.stop()
