"""spec.schemaRegistry's objects (schema_registry.py) and their place in the cluster's plan (reconcile.py)."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import ssl
import tempfile
from pathlib import Path

from tinystream.operator.k8s.certificates import KeyPair, derived_ca, issue
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.reconcile import (
    Apply,
    Delete,
    Observed,
    broker_statefulset_key,
    check_pod_template,
    plan_owned_objects,
)
from tinystream.operator.k8s.registry_tls import registry_dns_names
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


def handshake(ca: KeyPair, server: KeyPair, hostname: str) -> str | None:
    """A TLS handshake over memory BIOs, the client verifying `hostname` against `ca`; None or the error."""
    with tempfile.TemporaryDirectory() as folder:
        chain = Path(folder) / "server.pem"
        chain.write_text(server.cert_pem + server.key_pem)
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(chain)
    client_ctx = ssl.create_default_context(cadata=ca.cert_pem)
    bios = [ssl.MemoryBIO() for _ in range(4)]  # client in, client out, server in, server out
    client = client_ctx.wrap_bio(bios[0], bios[1], server_hostname=hostname)
    srv = server_ctx.wrap_bio(bios[2], bios[3], server_side=True)
    for _ in range(10):
        for side, out, into in ((client, bios[1], bios[2]), (srv, bios[3], bios[0])):
            try:
                side.do_handshake()
                if side is client:
                    return None
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as exc:
                return str(exc)
            into.write(out.read())
    return "no handshake"


def by_kind(objects):
    return {o["kind"]: o for o in objects}


def test_no_field_no_objects_and_no_status():
    spec = cluster()
    assert registry_objects(spec, image="x") == []
    assert registry_status(spec) is None


def test_a_secured_cluster_gets_a_scram_user_with_acls_on_schemas_only_and_a_pod_that_logs_in_as_it():
    spec = cluster(schemaRegistry={"resources": {"limits": {"memory": "256Mi"}}})
    assert "StatefulSet" not in by_kind(registry_objects(spec, image="img:1"))  # waits for its certificate
    spec = dataclasses.replace(spec, registry_certificate="abc1")
    objects = by_kind(registry_objects(spec, image="img:1"))
    assert set(objects) == {"TinyStreamUser", "Service", "StatefulSet"}
    user = objects["TinyStreamUser"]
    assert user["metadata"]["name"] == "demo-schema-registry"
    assert user["spec"]["authentication"] == {"type": "scram-sha-512"}
    acl, group = user["spec"]["authorization"]["acls"]
    assert acl["resource"] == {"type": "topic", "name": "_schemas", "patternType": "literal"}
    assert "All" not in acl["operations"] and "Write" in acl["operations"]
    # The election's consumer group: Read (JoinGroup, SyncGroup, Heartbeat) on that group alone.
    assert group == {"resource": {"type": "group", "name": "demo-schema-registry", "patternType": "literal"},
                     "operations": ["Describe", "Read"]}
    pod = objects["StatefulSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[:3] == ["schema-registry", "--bootstrap", "demo-kafka.ns.svc:9092"]
    assert args[args.index("--security-protocol") + 1] == "SASL_SSL"
    assert args[args.index("--sasl-username") + 1] == "demo-schema-registry"
    assert "--ssl-cafile" in args and "--users-file" in args and "--tls-certfile" in args
    template = objects["StatefulSet"]["spec"]["template"]["metadata"]
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
    args = objects["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--security-protocol") + 1] == "SSL"
    assert "--ssl-certfile" in args and "--sasl-username" not in args


def test_an_open_cluster_gets_no_user():
    spec = cluster(schemaRegistry={}, listeners={"tls": False, "authentication": {"type": "none"}},
                   authorization={"type": "none"})
    assert set(by_kind(registry_objects(spec, image="img"))) == {"Service", "StatefulSet"}
    assert registry_status(spec) == {"url": "http://demo-schema-registry.ns.svc:8081"}


def test_the_plan_applies_the_objects_and_deletes_them_once_the_field_is_removed():
    spec = dataclasses.replace(cluster(schemaRegistry={"replicas": 1}), registry_certificate="1")
    applied = {a.key for a in plan_owned_objects(spec, Observed(), CTX, replicas=3) if isinstance(a, Apply)}
    assert {("StatefulSet", "demo-schema-registry"), ("Service", "demo-schema-registry"),
            ("Service", "demo-schema-registry-headless"), ("TinyStreamUser", "demo-schema-registry")} <= applied
    there = {key: {} for key in applied}
    removed = plan_owned_objects(cluster(), Observed(objects=there), CTX, replicas=3)
    deleted = {(a.kind, a.name) for a in removed if isinstance(a, Delete)}
    assert deleted == {("StatefulSet", "demo-schema-registry"), ("Service", "demo-schema-registry"),
                       ("Service", "demo-schema-registry-headless"), ("TinyStreamUser", "demo-schema-registry")}


def _services(objects):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}


def test_several_replicas_are_one_group_each_pod_advertising_its_own_name():
    spec = dataclasses.replace(cluster(schemaRegistry={"replicas": 3}), registry_certificate="s1")
    objects = registry_objects(spec, image="img")
    sts = by_kind(objects)["StatefulSet"]
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["serviceName"] == "demo-schema-registry-headless"
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[args.index("--group-id") + 1] == "demo-schema-registry"
    # $(POD_NAME): the kubelet expands it from the container's env, the pod's own name (downward API).
    assert args[args.index("--advertised-url") + 1] == "https://$(POD_NAME).demo-schema-registry-headless.ns.svc:8081"
    assert container["env"] == [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    assert args[args.index("--forward-cafile") + 1] == "/etc/tinystream-cluster-ca/ca.crt"  # the cluster CA's bundle
    services = _services(objects)
    headless, client = services["demo-schema-registry-headless"], services["demo-schema-registry"]
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert headless["spec"]["selector"] == client["spec"]["selector"] == sts["spec"]["selector"]["matchLabels"]
    assert client["spec"]["type"] == "ClusterIP"  # what clients call: any instance
    assert registry_status(spec)["url"] == "https://demo-schema-registry.ns.svc:8081"

    plain = cluster(schemaRegistry={"replicas": 2}, listeners={"tls": False, "authentication": {"type": "none"}},
                    authorization={"type": "none"})
    args = by_kind(registry_objects(plain, image="img"))["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--advertised-url") + 1] == "http://$(POD_NAME).demo-schema-registry-headless.ns.svc:8081"
    assert "--forward-cafile" not in args


def test_the_deployment_of_an_earlier_release_is_deleted_and_the_statefulset_takes_over():
    spec = dataclasses.replace(cluster(schemaRegistry={}), registry_certificate="1")
    old = Observed(objects={("Deployment", "demo-schema-registry"): {}, ("Service", "demo-schema-registry"): {}})
    actions = plan_owned_objects(spec, old, CTX, replicas=3)
    assert [(a.kind, a.name) for a in actions if isinstance(a, Delete)] == [("Deployment", "demo-schema-registry")]
    assert ("StatefulSet", "demo-schema-registry") in {a.key for a in actions if isinstance(a, Apply)}
    fresh = plan_owned_objects(spec, Observed(), CTX, replicas=3)
    assert not [a for a in fresh if isinstance(a, Delete)]  # nothing to delete on a new cluster


def test_the_registry_statefulset_is_no_broker_statefulset():
    """An existing registry StatefulSet is patched as it is (the brokers' keep their claim templates) and a
    change to it starts no broker roll."""
    spec = dataclasses.replace(cluster(schemaRegistry={"replicas": 2}), registry_certificate="1")
    current = by_kind(registry_objects(spec, image="img"))["StatefulSet"]
    grown = dataclasses.replace(cluster(schemaRegistry={"replicas": 3}), registry_certificate="1")
    actions = plan_owned_objects(grown, Observed(objects={("StatefulSet", "demo-schema-registry"): current}), CTX,
                                 replicas=3)
    (patch,) = [a for a in actions if isinstance(a, Apply) and a.key == ("StatefulSet", "demo-schema-registry")]
    assert patch.obj["spec"]["replicas"] == 3 and "volumeClaimTemplates" not in patch.obj["spec"]
    assert not patch.create
    assert broker_statefulset_key(grown) == ("StatefulSet", "demo-broker")


def test_the_certificate_names_every_pod_and_a_client_verifies_one_by_its_name():
    """A real TLS handshake (memory BIOs): the wildcard for the headless Service's names matches a pod's name,
    as a follower checks the leader's; a name outside it is refused."""
    spec = cluster(schemaRegistry={"replicas": 3})
    names = registry_dns_names(spec, CTX)
    assert {"*.demo-schema-registry-headless.ns.svc", "*.demo-schema-registry-headless.ns.svc.cluster.local",
            "demo-schema-registry.ns.svc"} <= names
    now = datetime.datetime.now(datetime.UTC)
    ca = derived_ca(b"seed", "demo", "ns", created=now, days=30)
    assert handshake(ca, issue(ca, "demo-schema-registry", names, now=now, days=30),
                     "demo-schema-registry-2.demo-schema-registry-headless.ns.svc") is None
    refused = handshake(ca, issue(ca, "demo-schema-registry", names, now=now, days=30), "demo-broker-0.ns.svc")
    assert refused is not None and "hostname" in refused.lower()


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
    deployment = by_kind(registry_objects(spec, image="img"))["StatefulSet"]
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"]["team"] == "data"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "schema-registry"  # the operator's win
    assert pod["metadata"]["annotations"] == {"note": "x", "tinystream.io/registry-certificate": "s1"}
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd"} and pod["spec"]["tolerations"]
    assert pod["spec"]["securityContext"] == {"runAsNonRoot": True}
    plain = by_kind(registry_objects(dataclasses.replace(cluster(schemaRegistry={}), registry_certificate="s1"),
                                     image="img"))["StatefulSet"]
    assert (deployment["metadata"]["annotations"]["tinystream.io/pod-template"]
            != plain["metadata"]["annotations"]["tinystream.io/pod-template"])  # removing the template is seen

    bad = cluster(schemaRegistry={"template": {"pod": {"metadata": {"labels": {"tinystream.io/x": "y"}}}}})
    end = check_pod_template(bad)
    assert end is not None and "spec.schemaRegistry.template.pod" in end.message
