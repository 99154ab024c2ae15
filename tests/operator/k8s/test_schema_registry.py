"""spec.schemaRegistry's objects (schema_registry.py) and their place in the cluster's plan (reconcile.py)."""

from __future__ import annotations

import base64
import dataclasses
import json

from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.reconcile import Apply, Delete, Observed, check_pod_template, plan_owned_objects
from tinystream.operator.k8s.schema_registry import (
    OPERATOR_LOGIN,
    operator_password,
    registry_objects,
    registry_status,
    scram_logins,
    users_json,
    users_secret,
)
from tinystream.scram_users import UserStore

CTX = OperatorContext(broker_image="tinystream:test")


def cluster(**spec) -> ClusterSpec:
    return ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "ns", "uid": "u1"},
                                      "spec": {"brokers": 3, **spec}})


def by_kind(objects):
    return {o["kind"]: o for o in objects}


def test_no_field_no_objects_and_no_status():
    spec = cluster()
    assert registry_objects(spec, image="x") == []
    assert registry_status(spec) is None


def test_a_secured_cluster_gets_a_scram_user_with_acls_on_schemas_only_and_a_pod_that_logs_in_as_it():
    spec = cluster(schemaRegistry={"resources": {"limits": {"memory": "256Mi"}}})
    assert "Deployment" not in by_kind(registry_objects(spec, image="img:1"))  # waits for its certificate
    spec = dataclasses.replace(spec, registry_certificate="abc1")
    objects = by_kind(registry_objects(spec, image="img:1"))
    assert set(objects) == {"TinyStreamUser", "Service", "Deployment"}
    user = objects["TinyStreamUser"]
    assert user["metadata"]["name"] == "demo-schema-registry"
    assert user["spec"]["authentication"] == {"type": "scram-sha-512"}
    (acl,) = user["spec"]["authorization"]["acls"]
    assert acl["resource"] == {"type": "topic", "name": "_schemas", "patternType": "literal"}
    assert "All" not in acl["operations"] and "Write" in acl["operations"]
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[:3] == ["schema-registry", "--bootstrap", "demo-kafka.ns.svc:9092"]
    assert args[args.index("--security-protocol") + 1] == "SASL_SSL"
    assert args[args.index("--sasl-username") + 1] == "demo-schema-registry"
    assert "--ssl-cafile" in args and "--users-file" in args and "--tls-certfile" in args
    template = objects["Deployment"]["spec"]["template"]["metadata"]
    assert template["annotations"] == {"tinystream.io/registry-certificate": "abc1"}  # a renewal restarts it
    assert container["resources"] == {"limits": {"memory": "256Mi"}}
    # Its Secret volumes are mode 0440: readable by the non-root registry user through fsGroup only (seen on kind).
    assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["fsGroup"] == 10001
    assert all(v["secret"]["defaultMode"] == 0o440 for v in pod["volumes"] if "secret" in v)
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"demo-schema-registry-users", "demo-schema-registry", "demo-cluster-ca-cert",
                       "demo-schema-registry-tls"}
    assert objects["Service"]["spec"]["ports"][0]["port"] == 8081
    assert registry_status(spec) == {"url": "https://demo-schema-registry.ns.svc:8081", "user": "demo-schema-registry"}


def test_a_tls_authenticated_cluster_gives_the_registry_a_client_certificate():
    spec = dataclasses.replace(cluster(schemaRegistry={}, listeners={"tls": True, "authentication": {"type": "tls"}}),
                               registry_certificate="1")
    objects = by_kind(registry_objects(spec, image="img"))
    assert objects["TinyStreamUser"]["spec"]["authentication"] == {"type": "tls"}
    args = objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--security-protocol") + 1] == "SSL"
    assert "--ssl-certfile" in args and "--sasl-username" not in args


def test_an_open_cluster_gets_no_user():
    spec = cluster(schemaRegistry={}, listeners={"tls": False, "authentication": {"type": "none"}},
                   authorization={"type": "none"})
    assert set(by_kind(registry_objects(spec, image="img"))) == {"Service", "Deployment"}
    assert registry_status(spec) == {"url": "http://demo-schema-registry.ns.svc:8081"}


def test_the_plan_applies_the_objects_and_deletes_them_once_the_field_is_removed():
    spec = dataclasses.replace(cluster(schemaRegistry={"replicas": 1}), registry_certificate="1")
    applied = {a.key for a in plan_owned_objects(spec, Observed(), CTX, replicas=3) if isinstance(a, Apply)}
    assert {("Deployment", "demo-schema-registry"), ("Service", "demo-schema-registry"),
            ("TinyStreamUser", "demo-schema-registry")} <= applied
    there = {key: {} for key in applied}
    removed = plan_owned_objects(cluster(), Observed(objects=there), CTX, replicas=3)
    deleted = {(a.kind, a.name) for a in removed if isinstance(a, Delete)}
    assert deleted == {("Deployment", "demo-schema-registry"), ("Service", "demo-schema-registry"),
                       ("TinyStreamUser", "demo-schema-registry")}


def test_the_users_file_holds_the_operator_and_the_scram_users_and_is_deterministic(tmp_path):
    spec = cluster(schemaRegistry={})
    content = users_json("master", spec, [("alice", "pw-a")])
    assert content == users_json("master", spec, [("alice", "pw-a")])  # same users: same bytes, no-op patch
    path = tmp_path / "users.json"
    path.write_text(content)
    store = UserStore.load(path)
    assert store.check_plain(OPERATOR_LOGIN, operator_password("master", spec))
    assert store.check_plain("alice", "pw-a")
    assert not store.check_plain("alice", "wrong")
    secret = users_secret(spec, content)
    assert json.loads(base64.b64decode(secret["data"]["users.json"])) == json.loads(content)


def test_only_the_clusters_scram_users_become_logins():
    users = [{"metadata": {"name": "a"}, "spec": {"cluster": "demo", "authentication": {"type": "scram-sha-512"}}},
             {"metadata": {"name": "b"}, "spec": {"cluster": "demo", "authentication": {"type": "tls"}}},
             {"metadata": {"name": "c"}, "spec": {"cluster": "other", "authentication": {"type": "scram-sha-512"}}}]
    assert [name for name, _ in scram_logins(users, cluster())] == ["a"]


def test_the_template_reaches_the_registry_pod_and_its_reserved_keys_stop_the_pass():
    template = {"pod": {"metadata": {"labels": {"team": "data"}, "annotations": {"note": "x"}},
                        "nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "k", "operator": "Exists"}],
                        "securityContext": {"runAsNonRoot": True}}}
    spec = dataclasses.replace(cluster(schemaRegistry={"template": template}), registry_certificate="s1")
    deployment = by_kind(registry_objects(spec, image="img"))["Deployment"]
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"]["team"] == "data"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "schema-registry"  # the operator's win
    assert pod["metadata"]["annotations"] == {"note": "x", "tinystream.io/registry-certificate": "s1"}
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd"} and pod["spec"]["tolerations"]
    assert pod["spec"]["securityContext"] == {"runAsNonRoot": True}
    plain = by_kind(registry_objects(dataclasses.replace(cluster(schemaRegistry={}), registry_certificate="s1"),
                                     image="img"))["Deployment"]
    assert (deployment["metadata"]["annotations"]["tinystream.io/pod-template"]
            != plain["metadata"]["annotations"]["tinystream.io/pod-template"])  # removing the template is seen

    bad = cluster(schemaRegistry={"template": {"pod": {"metadata": {"labels": {"tinystream.io/x": "y"}}}}})
    end = check_pod_template(bad)
    assert end is not None and "spec.schemaRegistry.template.pod" in end.message
