"""A TinyStreamUser's ACLs and credential against the cluster's metadata (operator/k8s/users.py): pure."""

from __future__ import annotations

import base64

from tinystream.acls import AclBinding
from tinystream.operator.controller.image import AclRecord
from tinystream.operator.k8s.model import UserSpec
from tinystream.operator.k8s.users import plan_user_access, plan_user_removal, scram_record
from tinystream.scram_users import ScramCredential

BODY = {"metadata": {"name": "app", "namespace": "ns", "uid": "u1"}, "spec": {
    "cluster": "secure", "authentication": {"type": "scram-sha-512"}, "authorization": {"acls": [
        {"resource": {"type": "topic", "name": "orders-", "patternType": "prefix"}, "operations": ["Read", "Write"]},
        {"resource": {"type": "group", "name": "app"}, "operations": ["Read"]},
        {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
        {"resource": {"type": "topic", "name": "secrets"}, "operations": ["All"], "type": "deny"},
    ]}}}
USER = UserSpec.from_resource(BODY)


def other(principal: str) -> AclRecord:
    return AclRecord(resource_type="TOPIC", resource_name="x", pattern_type="LITERAL", principal=principal,
                     host="*", operation="READ", permission="ALLOW")


def test_a_new_user_gets_every_acl_it_asks_for_and_a_credential() -> None:
    plan = plan_user_access(USER, [other("User:someone")], [], password="pw")
    assert len(plan.create) == 5 and not plan.delete
    for record in plan.create:
        AclBinding.from_dict({
            f: getattr(record, f) for f in ("resource_type", "resource_name", "pattern_type", "principal", "host",
                                            "operation", "permission")})  # each is a valid Kafka ACL
    by_op = {(r.resource_type, r.operation): r for r in plan.create}
    assert by_op[("TOPIC", "READ")].pattern_type == "PREFIXED" and by_op[("TOPIC", "READ")].principal == "User:app"
    assert by_op[("CLUSTER", "IDEMPOTENT_WRITE")].resource_name == "kafka-cluster"
    assert by_op[("TOPIC", "ALL")].permission == "DENY"
    upsert, = plan.upsert
    credential = ScramCredential(*(base64.b64decode(getattr(upsert, k)) for k in ("salt", "stored_key", "server_key")),
                                 upsert.iterations)
    assert upsert.user == "app" and credential.matches_password("SCRAM-SHA-512", "pw")


def test_a_user_in_force_needs_nothing_and_stray_acls_of_its_principal_go() -> None:
    first = plan_user_access(USER, [], [], password="pw")
    held = [*first.create, other("User:app"), other("User:someone")]
    again = plan_user_access(USER, held, first.upsert, password="pw")
    assert not again.create and not again.upsert
    assert [f.principal for f in again.delete] == ["User:app"] and again.delete[0].resource_name == "x"
    assert plan_user_access(USER, held, first.upsert, password="rotated").upsert  # another password: set again


def test_removal_takes_every_acl_and_credential_of_the_user_only() -> None:
    first = plan_user_access(USER, [], [], password="pw")
    gone = plan_user_removal(USER, [*first.create, other("User:someone")],
                             [*first.upsert, scram_record("someone", "x")])
    assert len(gone.delete) == 5 and {f.principal for f in gone.delete} == {"User:app"}
    assert [(d.user, d.mechanism) for d in gone.remove] == [("app", "SCRAM-SHA-512")]


def test_a_tls_user_is_named_by_its_certificate() -> None:
    tls = UserSpec.from_resource({**BODY, "spec": {**BODY["spec"], "authentication": {"type": "tls"}}})
    plan = plan_user_access(tls, [], [], password=None)
    assert {r.principal for r in plan.create} == {"User:CN=app"} and not plan.upsert
