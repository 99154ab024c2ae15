"""The CRDs as a real kube-apiserver enforces them: schema, defaults, CEL rules (also on update), subresources.

The same manifests and mistakes as tests/operator/k8s/test_crds.py (which
re-does admission in Python, and once missed that a real server could not
compile the cluster CRD's CEL at all); the expected messages here are the API
server's own. Creates use `dryRun=All` (nothing stored) and
`fieldValidation=Strict`, as `kubectl apply` does.
"""

from __future__ import annotations

import copy

import pytest
from test_crds import CLUSTER, DELETE, POD_TEMPLATE, TOPIC, with_spec

from tinystream.testing.kube_control_plane import KubeControlPlane

GROUP = "/apis/tinystream.io/v1alpha1"


def create(cp: KubeControlPlane, namespace: str, obj: dict, *, dry_run: bool = True) -> tuple[int, dict]:
    plural = {"TinyStreamCluster": "tinystreamclusters", "Topic": "topics"}[obj["kind"]]
    query = "?fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
    return cp.request("POST", f"{GROUP}/namespaces/{namespace}/{plural}{query}", obj)


def refusal(status: int, body: dict) -> str:
    assert status == 422 or status == 400, (status, body)
    return body["message"]


def test_the_crds_are_established_and_serve_status_and_scale(control_plane: KubeControlPlane) -> None:
    status, crd = control_plane.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                               "tinystreamclusters.tinystream.io")
    assert status == 200
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
    subresources = crd["spec"]["versions"][0]["subresources"]
    assert subresources["scale"]["specReplicasPath"] == ".spec.brokers" and "status" in subresources


def test_a_full_cluster_is_stored_with_its_defaults(control_plane: KubeControlPlane, namespace: str) -> None:
    bare = {"apiVersion": CLUSTER["apiVersion"], "kind": "TinyStreamCluster", "metadata": {"name": "bare"},
            "spec": {"brokers": 3}}
    status, stored = create(control_plane, namespace, bare, dry_run=False)
    assert status == 201, stored
    # The server's defaults: secure (issue 21), TLS, SCRAM and ACLs.
    assert stored["spec"]["listeners"] == {"kafka": 9092, "admin": 8080, "tls": True,
                                           "authentication": {"type": "scram-sha-512"}}
    assert stored["spec"]["authorization"] == {"type": "simple"}
    assert stored["spec"]["certificates"] == {"validityDays": 365, "renewalDays": 30}
    status, full = create(control_plane, namespace, CLUSTER)
    assert status == 201, full
    assert full["spec"]["config"]["auto.create.topics.enable"] == "false"


def test_a_secured_cluster_is_accepted(control_plane, namespace) -> None:
    secured = with_spec(CLUSTER, listeners__tls=True, listeners__authentication={"type": "scram-sha-512"},
                        authorization={"type": "simple", "superUsers": ["admin"]})
    status, stored = create(control_plane, namespace, secured)
    assert status == 201, stored
    assert stored["spec"]["authorization"]["superUsers"] == ["admin"]
    opted_out = dict(CLUSTER, metadata={"name": "open"},  # every opt-out, each an explicit field
                     spec={**CLUSTER["spec"], "listeners": {"tls": False, "authentication": {"type": "none"}},
                           "authorization": {"type": "none"}})
    status, stored = create(control_plane, namespace, opted_out)
    assert status == 201, stored
    assert stored["spec"]["listeners"]["tls"] is False and stored["spec"]["authorization"] == {"type": "none"}


def test_external_listeners_are_accepted_with_their_defaults(control_plane, namespace) -> None:
    external = [{"name": "ext", "port": 9094, "type": "nodeport", "bootstrap": {"nodePort": 30900},
                 "brokers": [{"broker": 0, "nodePort": 30901, "advertisedHost": "kafka-0.example.com"}]},
                {"name": "lb", "port": 9095, "type": "loadbalancer", "authentication": {"type": "tls"}}]
    status, stored = create(control_plane, namespace, with_spec(CLUSTER, listeners__external=external))
    assert status == 201, stored
    ext, lb = stored["spec"]["listeners"]["external"]
    assert (ext["tls"], ext["authentication"]) == (True, {"type": "scram-sha-512"})
    assert (lb["tls"], lb["authentication"]) == (True, {"type": "tls"})


def test_a_pod_template_is_stored_whole(control_plane, namespace) -> None:
    """Kubernetes' own types (affinity, tolerations, spread constraints, securityContext) keep every field."""
    status, stored = create(control_plane, namespace, with_spec(CLUSTER, template={"pod": POD_TEMPLATE}))
    assert status == 201, stored
    assert stored["spec"]["template"]["pod"] == POD_TEMPLATE


@pytest.mark.parametrize("change,expected", [
    ({"brokers": 0}, "should be greater than or equal to 1"),
    ({"brokers": 101}, "should be less than or equal to 100"),
    ({"brokers": "three"}, 'must be of type integer'),
    ({"storage__size": "ten gigs"}, "should match"),
    ({"imagePullPolicy": "Sometimes"}, "Unsupported value"),
    ({"listeners__kafka": 80}, "should be greater than or equal to 1024"),
    ({"listeners__admin": 9092}, "listeners.kafka and listeners.admin must differ"),
    ({"config__broker.id": 7}, "set by the operator"),
    ({"config__log.dirs": "/tmp"}, "set by the operator"),
    ({"config__log.retention.ms": {"nested": 1}}, "spec.config.log.retention.ms"),  # strict decoding refuses it first
    ({"config__auto.create.topics.enable": False}, "must be of type integer,string"),
    ({"unknownField": 1}, 'unknown field "spec.unknownField"'),
    ({"rack__topologyKey": ""}, "should be at least 1 chars long"),
    ({"config__super.users": "User:mallory"}, "comes from spec.listeners and spec.authorization"),
    ({"config__listeners": "PLAINTEXT://0.0.0.0:9092"}, "comes from spec.listeners and spec.authorization"),
    ({"config__listener.name.replication.ssl.client.auth": "none"}, "comes from spec.listeners"),
    ({"listeners__authentication": {"type": "tls"}, "listeners__tls": False},
     "listeners.authentication.type tls needs listeners.tls"),
    ({"listeners__authentication": {"type": "kerberos"}}, "Unsupported value"),
    ({"listeners__authentication": {"type": "none"}}, "authorization needs listeners.authentication"),
    ({"certificates": {"validityDays": 10, "renewalDays": 10}}, "renewalDays must be below"),
    # spec.listeners.external (issue 23)
    ({"listeners__external": [{"name": "Ext", "port": 9094, "type": "nodeport"}]}, "should match"),
    ({"listeners__external": [{"name": "external12345", "port": 9094, "type": "nodeport"}]}, "Too long"),
    ({"listeners__external": [{"name": "ext", "port": 9094, "type": "ingress"}]}, "Unsupported value"),
    ({"listeners__external": [{"name": "ext", "port": 80, "type": "nodeport"}]}, "greater than or equal to 1024"),
    ({"listeners__external": [{"name": "ext", "type": "nodeport"}]}, "Required value"),
    ({"listeners__external": [{"name": "client", "port": 9094, "type": "nodeport"}]},
     "must not be client or replication"),
    ({"listeners__external": [{"name": "ext", "port": 9093, "type": "nodeport"}]}, "replication listener"),
    ({"listeners__external": [{"name": "ext", "port": 9092, "type": "nodeport"}]},
     "must differ from listeners.kafka and listeners.admin"),
    ({"listeners__external": [{"name": "a", "port": 9094, "type": "nodeport"},
                              {"name": "a", "port": 9095, "type": "nodeport"}]}, "name must be unique"),
    ({"listeners__external": [{"name": "a", "port": 9094, "type": "nodeport"},
                              {"name": "b", "port": 9094, "type": "nodeport"}]}, "port must be unique"),
    ({"listeners__tls": False, "listeners__authentication": {"type": "none"}, "authorization": {"type": "none"},
      "listeners__external": [{"name": "ext", "port": 9094, "type": "nodeport"}]},
     "an external listener with tls needs listeners.tls"),
    ({"listeners__external": [{"name": "ext", "port": 9094, "type": "nodeport", "tls": False,
                               "authentication": {"type": "tls"}}]}, "authentication.type tls needs tls"),
    ({"listeners__external": [{"name": "ext", "port": 9094, "type": "loadbalancer",
                               "bootstrap": {"nodePort": 30000}}]}, "nodePort is for type nodeport only"),
    ({"listeners__external": [{"name": "ext", "port": 9094, "type": "nodeport",
                               "brokers": [{"broker": 0}, {"broker": 0}]}]}, "names each broker once"),
    ({"listeners__external": [{"name": "ext", "port": 9094, "type": "nodeport",
                               "brokers": [{"broker": 0, "advertisedHost": "a host"}]}]}, "should match"),
    ({"listeners__external": [{"name": "ext", "port": 9094, "type": "nodeport",
                               "brokers": [{"broker": 0, "nodePort": 70000}]}]}, "less than or equal to 65535"),
    # spec.template.pod (issue 23): wrong types, and the operator's own labels and annotations
    ({"template__pod__tolerations": "dedicated"}, "must be of type array"),
    ({"template__pod__tolerations": [{"key": "a", "operator": "Maybe"}]}, "Unsupported value"),
    ({"template__pod__nodeSelector": {"pool": 1}}, "must be of type string"),
    ({"template__pod__priorityClassName": 5}, "must be of type string"),
    ({"template__pod__affinity": ["nodeAffinity"]}, "must be of type object"),
    ({"template__pod__imagePullSecrets": [{}]}, "Required value"),
    ({"template__pod__metadata__labels": {"tinystream.io/cluster": "x"}}, "cannot set the operator's labels"),
    ({"template__pod__metadata__labels": {"app.kubernetes.io/component": "x"}}, "cannot set the operator's labels"),
    ({"template__pod__metadata__labels": {"team": "a b"}}, "should match"),
    ({"template__pod__metadata__annotations": {"tinystream.io/config-hash": "0"}}, "cannot set tinystream.io/*"),
    ({"template__pod__topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}, "each topologyKey"),
])
def test_a_bad_cluster_is_refused_by_the_api_server(control_plane, namespace, change, expected) -> None:
    message = refusal(*create(control_plane, namespace, with_spec(CLUSTER, **change)))
    assert expected in message, message


@pytest.mark.parametrize("change,expected", [
    ({"partitions": 0}, "should be greater than or equal to 1"),
    ({"partitions": DELETE}, "Required value"),
    ({"replicationFactor": 0}, "should be greater than or equal to 1"),
    ({"topicName": "bad name!"}, "should match"),
    ({"topicName": ".."}, 'cannot be "." or ".."'),
    ({"config__retention.hours": 1}, "unknown topic config key"),
    ({"config__retention.ms": -2}, "retention.ms is a number >= -1"),
    ({"config__retention.ms": "a week"}, "retention.ms is a number >= -1"),
    ({"config__cleanup.policy": "forever"}, "cleanup.policy is delete, compact"),
    ({"config__segment.bytes": 10}, "segment.bytes is a number >= 14"),
    ({"config__min.insync.replicas": 4}, "min.insync.replicas cannot exceed replicationFactor"),
])
def test_a_bad_topic_is_refused_by_the_api_server(control_plane, namespace, change, expected) -> None:
    message = refusal(*create(control_plane, namespace, with_spec(TOPIC, **change)))
    assert expected in message, message


def test_update_rules_partitions_grow_and_identity_and_storage_class_stay(control_plane, namespace) -> None:
    topic = with_spec(TOPIC, topicName="orders.v1")
    status, stored = create(control_plane, namespace, topic, dry_run=False)
    assert status == 201, stored
    path = f"{GROUP}/namespaces/{namespace}/topics/orders"

    def replace(**change) -> tuple[int, dict]:
        current = control_plane.request("GET", path)[1]
        return control_plane.request("PUT", path, with_spec(current, **change))

    assert replace(partitions=12)[0] == 200
    assert "partitions can only grow" in refusal(*replace(partitions=3))
    assert "immutable" in refusal(*replace(cluster="other"))
    assert "immutable" in refusal(*replace(topicName="renamed"))

    status, _ = create(control_plane, namespace, CLUSTER, dry_run=False)
    assert status == 201
    cluster_path = f"{GROUP}/namespaces/{namespace}/tinystreamclusters/demo"
    current = control_plane.request("GET", cluster_path)[1]
    changed = with_spec(current, storage__storageClass="slow")
    assert "storageClass is immutable" in refusal(*control_plane.request("PUT", cluster_path, changed))


def test_storage_size_grows_and_a_shrink_is_refused_by_the_api_server(control_plane, namespace) -> None:
    status, _ = create(control_plane, namespace, CLUSTER, dry_run=False)  # storage.size 20Gi
    assert status == 201
    path = f"{GROUP}/namespaces/{namespace}/tinystreamclusters/demo"

    def resize(size: str) -> tuple[int, dict]:
        return control_plane.request("PUT", path, with_spec(control_plane.request("GET", path)[1], storage__size=size))

    assert resize("0.5Ti")[0] == 200  # quantities compare by value (Kubernetes CEL's quantity library)
    status, body = resize("500G")  # 500e9 < 0.5 * 2^40
    assert status == 422, body
    assert "storage.size cannot shrink" in body["message"]
    assert resize("512Gi")[0] == 200  # the same size, written differently


def test_scale_subresource_sets_brokers_and_status_ignores_spec(control_plane, namespace) -> None:
    status, _ = create(control_plane, namespace, CLUSTER, dry_run=False)
    assert status == 201
    path = f"{GROUP}/namespaces/{namespace}/tinystreamclusters/demo"
    status, scale = control_plane.request("PATCH", path + "/scale", {"spec": {"replicas": 5}},
                                          content_type="application/merge-patch+json")
    assert status == 200 and scale["spec"]["replicas"] == 5, scale
    assert control_plane.request("GET", path)[1]["spec"]["brokers"] == 5
    # kubectl scale, as a user types it, and the scale bounds come from the schema.
    control_plane.kubectl("-n", namespace, "scale", "tinystreamcluster/demo", "--replicas=4")
    assert control_plane.request("GET", path)[1]["spec"]["brokers"] == 4
    status, body = control_plane.request("PATCH", path + "/scale", {"spec": {"replicas": 0}},
                                         content_type="application/merge-patch+json")
    assert status == 422 and "should be greater than or equal to 1" in body["message"], body
    # A write to the status subresource cannot change spec, a write to the object cannot change status,
    # and status is validated too (phase is an enum).
    current = copy.deepcopy(control_plane.request("GET", path)[1])
    current["spec"]["brokers"] = 9
    current["status"] = {"phase": "Degraded"}
    status, after = control_plane.request("PUT", path + "/status", current)
    assert status == 200 and after["spec"]["brokers"] == 4 and after["status"]["phase"] == "Degraded", after
    after["status"] = {"phase": "Running"}
    status, after = control_plane.request("PUT", path, after)
    assert status == 200 and after["status"]["phase"] == "Degraded", after
    after["status"] = {"phase": "Forged"}
    assert "Unsupported value" in refusal(*control_plane.request("PUT", path + "/status", after))


USER = {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamUser", "metadata": {"name": "app"}, "spec": {
    "cluster": "demo", "authentication": {"type": "scram-sha-512"}, "authorization": {"acls": [
        {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]},
        {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]}]}}}


def create_user(cp: KubeControlPlane, namespace: str, obj: dict, *, dry_run: bool = True) -> tuple[int, dict]:
    query = "?fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
    return cp.request("POST", f"{GROUP}/namespaces/{namespace}/tinystreamusers{query}", obj)


def test_a_user_is_stored_with_its_defaults(control_plane, namespace) -> None:
    status, stored = create_user(control_plane, namespace, USER)
    assert status == 201, stored
    first = stored["spec"]["authorization"]["acls"][0]
    assert first["host"] == "*" and first["type"] == "allow" and first["resource"]["patternType"] == "literal"


@pytest.mark.parametrize("change,expected", [
    ({"metadata": {"name": "Bad_Name"}}, "RFC 1123"),
    ({"spec": {"cluster": "demo"}}, "Required value"),
    ({"spec": {**USER["spec"], "authentication": {"type": "plain"}}}, "Unsupported value"),
    ({"spec": {**USER["spec"], "authorization": {"acls": [
        {"resource": {"type": "topic"}, "operations": ["Read"]}]}}}, "resource.name is required"),
    ({"spec": {**USER["spec"], "authorization": {"acls": [
        {"resource": {"type": "topic", "name": "t"}, "operations": ["Fly"]}]}}}, "Unsupported value"),
])
def test_a_bad_user_is_refused_by_the_api_server(control_plane, namespace, change, expected) -> None:
    message = refusal(*create_user(control_plane, namespace, {**USER, **change}))
    assert expected in message, message


def test_a_users_authentication_cannot_change(control_plane, namespace) -> None:
    status, stored = create_user(control_plane, namespace, USER, dry_run=False)
    assert status == 201, stored
    changed = {**stored, "spec": {**stored["spec"], "authentication": {"type": "tls"}}}
    status, body = control_plane.request("PUT", f"{GROUP}/namespaces/{namespace}/tinystreamusers/app", changed)
    assert "authentication.type is immutable" in refusal(status, body)


JBOD = {"volumes": [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "2Gi", "storageClass": "fast"}]}


@pytest.mark.parametrize("storage,expected", [
    ({"volumes": []}, "should have at least 1 items"),
    ({"volumes": [{"id": 0, "size": "1Gi"}, {"id": 0, "size": "2Gi"}]}, "Duplicate value"),
    ({"volumes": [{"id": 0}]}, "size: Required value"),
    ({"volumes": [{"id": -1, "size": "1Gi"}]}, "should be greater than or equal to 0"),
    ({"volumes": [{"id": 0, "size": "ten"}]}, "should match"),
    ({"size": "1Gi", **JBOD}, "storage.volumes and storage.size / storage.storageClass are exclusive"),
    ({"volumes": [{"id": 0, "size": "1Gi", "deleteClaim": True}, {"id": 1, "size": "1Gi"}]},
     "every storage volume's deleteClaim must be the same"),
])
def test_bad_volumes_are_refused_by_the_api_server(control_plane, namespace, storage, expected) -> None:
    message = refusal(*create(control_plane, namespace, with_spec(CLUSTER, storage=storage)))
    assert expected in message, message


def test_volumes_are_accepted_and_fixed_once_the_cluster_exists(control_plane, namespace) -> None:
    agreeing = {"volumes": [{"id": 0, "size": "1Gi", "deleteClaim": True}, {"id": 1, "size": "1Gi"}],
                "deleteClaim": True}  # a volume without deleteClaim takes storage.deleteClaim
    assert create(control_plane, namespace, with_spec(CLUSTER, storage=agreeing))[0] == 201
    status, stored = create(control_plane, namespace, with_spec(CLUSTER, storage=JBOD), dry_run=False)
    assert status == 201, stored
    assert "size" not in stored["spec"]["storage"]  # no default size beside the volumes
    path = f"{GROUP}/namespaces/{namespace}/tinystreamclusters/demo"

    def put(storage: dict) -> tuple[int, dict]:
        return control_plane.request("PUT", path, with_spec(control_plane.request("GET", path)[1], storage=storage))

    grown = copy.deepcopy(JBOD)
    grown["volumes"][0]["size"] = "3Gi"
    assert put(grown)[0] == 200
    assert put({"volumes": list(reversed(grown["volumes"]))})[0] == 200  # order is not identity
    assert "a storage volume's size cannot shrink" in refusal(*put(JBOD))
    added = {"volumes": [*grown["volumes"], {"id": 2, "size": "1Gi"}]}
    assert "storage.volumes cannot be added or removed" in refusal(*put(added))
    assert "storage.volumes cannot be added or removed" in refusal(*put({"volumes": grown["volumes"][:1]}))
    renumbered = {"volumes": [grown["volumes"][0], {**grown["volumes"][1], "id": 7}]}
    assert "storage.volumes cannot be added or removed" in refusal(*put(renumbered))
    reclassed = {"volumes": [grown["volumes"][0], {**grown["volumes"][1], "storageClass": "slow"}]}
    assert "a storage volume's storageClass is immutable" in refusal(*put(reclassed))
    assert "cannot switch between size and volumes" in refusal(*put({"size": "10Gi"}))


def test_a_single_size_cluster_cannot_switch_to_volumes(control_plane, namespace) -> None:
    status, _ = create(control_plane, namespace, CLUSTER, dry_run=False)
    assert status == 201
    path = f"{GROUP}/namespaces/{namespace}/tinystreamclusters/demo"
    current = control_plane.request("GET", path)[1]
    message = refusal(*control_plane.request("PUT", path, with_spec(current, storage={"volumes": [{"id": 0, "size": "20Gi"}]})))
    assert "cannot switch between size and volumes" in message, message
