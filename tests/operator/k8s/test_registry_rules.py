"""The registry's rules from the TinyStreamUsers' topic ACLs (registry_rules.py), checked through the
registry's own parser and decision (tinystream/registry/authz.py), and how the pod gets them and the clients CA."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from tinystream.operator.k8s.model import ClusterSpec, UserSpec
from tinystream.operator.k8s.registry_rules import rules_json, user_rules
from tinystream.operator.k8s.schema_registry import (
    CLIENTS_CA_MOUNT,
    USERS_MOUNT,
    registry_rules,
    statefulset,
    users_secret,
)
from tinystream.registry.authz import Operation, allowed, parse_rules

R, W, A = Operation.READ, Operation.WRITE, Operation.ADMIN


def user(name: str, *acls: dict, authentication: str = "scram-sha-512", cluster: str = "demo") -> UserSpec:
    return UserSpec.from_resource({"metadata": {"name": name, "namespace": "ns", "uid": name},
                                   "spec": {"cluster": cluster, "authentication": {"type": authentication},
                                            "authorization": {"acls": list(acls)}}})


def topic(name: str, *operations: str, pattern: str = "literal", **extra) -> dict:
    return {"resource": {"type": "topic", "name": name, "patternType": pattern}, "operations": list(operations),
            **extra}


def decide(users, admins=("User:tinystream-operator",)):
    rules = parse_rules(json.loads(rules_json(users, admins=admins)))  # what the registry reads, as it reads it
    return lambda principal, operation, subject: allowed(rules, principal, operation, subject)


@pytest.mark.parametrize("acl, principal, operation, subject, expected", [
    (topic("orders", "Read"), "User:app", R, "orders-value", True),
    (topic("orders", "Read"), "User:app", R, "orders-key", True),
    (topic("orders", "Read"), "User:app", W, "orders-value", False),  # Read gives no register
    (topic("orders", "Read"), "User:app", R, "orders-eu-value", False),  # literal: that topic only
    (topic("orders", "Write"), "User:app", W, "orders-value", True),
    (topic("orders", "Write"), "User:app", R, "orders-value", True),  # a writer looks up what it wrote
    (topic("orders", "All"), "User:app", W, "orders-key", True),
    (topic("orders", "Describe", "Create"), "User:app", R, "orders-value", False),  # Read or Write needed
    (topic("orders", "Read", pattern="prefix"), "User:app", R, "orders-eu-value", True),
    (topic("orders", "Read", pattern="prefix"), "User:app", R, "payments-value", False),
    (topic("*", "Write"), "User:app", W, "anything-value", True),
    (topic("orders", "Write"), "User:app", A, None, False),  # global config, hard deletes: admins only
    (topic("orders", "Write"), "User:other", R, "orders-value", False),
    (topic("orders", "Read", host="10.0.0.1"), "User:app", R, "orders-value", False),  # no host in the rules
    ({"resource": {"type": "group", "name": "orders"}, "operations": ["Read"]}, "User:app", R, "orders-value",
     False),
])
def test_topic_acls_become_subject_rules(acl, principal, operation, subject, expected):
    assert decide([user("app", acl)])(principal, operation, subject) is expected


def test_a_tls_user_is_named_as_the_broker_names_it():
    may = decide([user("alice", topic("orders", "Write"), authentication="tls")])
    assert may("User:CN=alice", W, "orders-value") and not may("User:alice", R, "orders-value")


def test_a_deny_takes_what_it_could_take():
    denied_read = user("app", topic("orders", "All"), topic("secret", "Read", type="deny"))
    assert user_rules(denied_read) == []  # the rules have no deny: nothing rather than too much
    denied_write = user("app", topic("orders", "All"), topic("secret", "Write", type="deny"))
    may = decide([denied_write])
    assert may("User:app", R, "orders-value") and not may("User:app", W, "orders-value")


def test_admins_may_everything_and_the_content_is_deterministic():
    users = [user("b", topic("x", "Read")), user("a", topic("y", "Write"), topic("x", "Read"))]
    may = decide(users, admins=("User:tinystream-operator", "User:ops"))
    assert may("User:ops", A, None) and may("User:tinystream-operator", W, "z-value")
    assert rules_json(users, admins=["User:ops"]) == rules_json(list(reversed(users)), admins=["User:ops"])


def cluster(**spec) -> ClusterSpec:
    return ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "ns", "uid": "u1"},
                                      "spec": {"brokers": 3, "schemaRegistry": {}, **spec}})


def test_the_rules_go_into_the_users_secret_for_the_clusters_users_only():
    spec = cluster(authorization={"type": "simple", "superUsers": ["ops"]})
    rules = registry_rules(spec, [user("app", topic("orders", "Read")),
                                  user("elsewhere", topic("orders", "All"), cluster="other")])
    assert rules is not None
    content = json.loads(rules)
    assert content["admins"] == ["User:ops", "User:tinystream-operator"]
    assert {r["principal"] for r in content["rules"]} == {"User:app"}
    data = users_secret(spec, "{}", rules)["data"]
    assert json.loads(base64.b64decode(data["rules.json"])) == content
    args = statefulset(spec, spec.schema_registry, image="i")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--rules-file") + 1] == f"{USERS_MOUNT}/rules.json"


def test_authorization_none_deploys_no_rules():
    spec = cluster(authorization={"type": "none"})
    assert registry_rules(spec, [user("app", topic("orders", "Read"))]) is None
    assert "rules.json" not in users_secret(spec, "{}", None)["data"]
    args = statefulset(spec, spec.schema_registry, image="i")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--rules-file" not in args


def test_a_cluster_with_tls_users_gives_the_registry_the_clients_ca_and_restarts_it_on_a_rotation():
    spec = dataclasses.replace(cluster(listeners={"tls": True, "authentication": {"type": "tls"}}),
                               clients_ca_marker="gen-2")
    pod = statefulset(spec, spec.schema_registry, image="i")["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["args"][container["args"].index("--tls-client-cafile") + 1] == f"{CLIENTS_CA_MOUNT}/ca.crt"
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "clients-ca")
    assert volume["secret"] == {"secretName": "demo-clients-ca-cert", "defaultMode": 0o440}
    assert pod["spec"]["securityContext"]["fsGroup"] == 10001  # 0440 files are the registry's group's
    assert {"name": "clients-ca", "mountPath": CLIENTS_CA_MOUNT, "readOnly": True} in container["volumeMounts"]
    assert "gen-2" in pod["metadata"]["annotations"].values()


def test_a_scram_cluster_gets_no_clients_ca():
    spec = cluster(listeners={"tls": True, "authentication": {"type": "scram-sha-512"}})
    pod = statefulset(spec, spec.schema_registry, image="i")["spec"]["template"]
    assert "--tls-client-cafile" not in pod["spec"]["containers"][0]["args"]
    assert all(v["name"] != "clients-ca" for v in pod["spec"]["volumes"])
