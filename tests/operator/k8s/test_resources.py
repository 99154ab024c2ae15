"""The owned objects of a TinyStreamCluster, built without an API server."""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'jsonschema', 'kubernetes_validate')

import dataclasses
import tomllib

import pytest
from k8s_helpers import builtin_errors

from tinystream.broker.security.listener_config import plan_listeners
from tinystream.config.settings import BrokerSettings
from tinystream.operator.k8s.ca_lifecycle import CLIENTS_CA_ANNOTATION
from tinystream.operator.k8s.conditions import secure_condition
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.pod_template import reserved_annotation, reserved_label
from tinystream.operator.k8s.resources import (
    CONFIG_FILE,
    CONFIG_HASH_ANNOTATION,
    POD_INDEX_LABEL,
    POD_TEMPLATE_ANNOTATION,
    Names,
    broker_config_problems,
    config_hash,
    config_map,
    labels,
    owned_objects,
    statefulset,
)

CTX = OperatorContext(broker_image="tinystream:test", operator_service="ts-op.ops.svc.cluster.local",
                      controller_port=9091)
BODY = {
    "apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster",
    "metadata": {"name": "demo", "namespace": "streaming", "uid": "uid-1", "generation": 4},
    "spec": {"brokers": 3, "storage": {"size": "20Gi", "storageClass": "fast", "deleteClaim": True},
             "rack": {"topologyKey": "topology.kubernetes.io/zone"},
             "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
             "config": {"log.retention.ms": 86400000, "auto.create.topics.enable": False,
                        "log.cleanup.policy": "compact"}},
}


@pytest.fixture
def spec():
    return ClusterSpec.from_resource(BODY)


def by_kind_name(objects):
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_every_owned_object_is_valid_for_kubernetes(spec):
    objects = owned_objects(spec, CTX, replicas=3)
    # a NetworkPolicy for every cluster: REPLICATION admits brokers only; spec.rack: a ServiceAccount and
    # its ClusterRoleBinding
    assert len(objects) == 10
    for obj in objects:
        assert builtin_errors(obj) == [], obj["kind"]


def test_every_owned_object_is_owned_by_the_cluster(spec):
    for obj in owned_objects(spec, CTX, replicas=3):
        if obj["kind"] == "ClusterRoleBinding":  # cluster-scoped: deleted with the cluster by the operator
            assert "ownerReferences" not in obj["metadata"] and "namespace" not in obj["metadata"]
            continue
        ref, = obj["metadata"]["ownerReferences"]
        assert ref == {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster", "name": "demo",
                       "uid": "uid-1", "controller": True, "blockOwnerDeletion": True}
        assert obj["metadata"]["namespace"] == "streaming"


def test_statefulset_shape(spec):
    objs = by_kind_name(owned_objects(spec, CTX, replicas=3))
    sts = objs[("StatefulSet", "demo-broker")]["spec"]
    assert sts["replicas"] == 3
    assert sts["serviceName"] == "demo-brokers" and ("Service", "demo-brokers") in objs
    assert objs[("Service", "demo-brokers")]["spec"]["clusterIP"] == "None"
    assert sts["updateStrategy"] == {"type": "OnDelete"}  # the operator rolls
    assert sts["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Delete"}
    claim, = sts["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    pod = sts["template"]["spec"]
    broker, = pod["containers"]
    assert broker["image"] == "tinystream:test"
    assert broker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    assert broker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert {p["name"]: p["containerPort"] for p in broker["ports"]} == {"kafka": 9092, "admin": 8080,
                                                                         "replication": 9093}
    env = {e["name"]: e for e in broker["env"]}
    assert env["TINYSTREAM_BROKER_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{POD_INDEX_LABEL}']"
    assert env["TINYSTREAM_ADVERTISED_HOST"]["value"] == "$(POD_NAME).demo-brokers.$(POD_NAMESPACE).svc"
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False  # a broker holds no Kubernetes credential
    assert sts["selector"]["matchLabels"].items() <= sts["template"]["metadata"]["labels"].items()


def test_pdb_allows_one_broker_down(spec):
    pdb = by_kind_name(owned_objects(spec, CTX, replicas=3))[("PodDisruptionBudget", "demo-broker")]
    assert pdb["spec"]["maxUnavailable"] == 1


def test_services_route_to_brokers_and_operator(spec):
    objs = by_kind_name(owned_objects(spec, CTX, replicas=3))
    client = objs[("Service", "demo-kafka")]["spec"]
    sts = objs[("StatefulSet", "demo-broker")]["spec"]
    assert client["selector"] == sts["selector"]["matchLabels"]
    assert objs[("Service", "demo-controller")]["spec"]["externalName"] == "ts-op.ops.svc.cluster.local"
    dashboard = objs[("Service", "demo-dashboard")]["spec"]
    assert dashboard["ports"][0]["port"] == 3200  # the operator serves every cluster's dashboard
    assert dashboard["type"] == "ExternalName" and dashboard["externalName"] == CTX.operator_service
    no_dashboard = ClusterSpec.from_resource({**BODY, "spec": {**BODY["spec"], "dashboard": {"enabled": False}}})
    assert ("Service", "demo-dashboard") not in by_kind_name(owned_objects(no_dashboard, CTX, replicas=3))


def test_config_map_holds_broker_settings_by_kafka_name(spec):
    text = config_map(spec, CTX)["data"][CONFIG_FILE]
    broker = tomllib.loads(text)["broker"]
    assert broker["log.retention.ms"] == 86400000
    assert broker["auto.create.topics.enable"] is False
    assert broker["log.dirs"] == "/var/lib/tinystream/data"
    assert broker["controller.url"] == "https://demo-controller.streaming.svc:9091/clusters/streaming/demo"
    assert broker["controller.ssl.truststore.location"] == "/etc/tinystream-auth/controller-ca.crt"
    BrokerSettings.model_validate(broker)  # the broker accepts every key it gets


def test_config_change_changes_the_pod_template(spec):
    other = ClusterSpec.from_resource({**BODY, "spec": {**BODY["spec"], "config": {"log.retention.ms": 1}}})
    a, b = config_hash(config_map(spec, CTX)), config_hash(config_map(other, CTX))
    assert a != b
    template = statefulset(spec, CTX, replicas=3, cfg_hash=a)["spec"]["template"]
    assert template["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == a


def test_minimal_spec_gets_crd_defaults():
    spec = ClusterSpec.from_resource({"metadata": {"name": "m", "namespace": "ns"}, "spec": {}})
    assert (spec.brokers, spec.kafka_port, spec.admin_port, spec.dashboard, spec.storage_size) == \
        (3, 9092, 8080, True, "10Gi")
    sts = statefulset(spec, CTX, replicas=1, cfg_hash="x")
    assert "storageClassName" not in sts["spec"]["volumeClaimTemplates"][0]["spec"]
    assert "topologySpreadConstraints" not in sts["spec"]["template"]["spec"]
    assert builtin_errors(sts) == []


@pytest.mark.parametrize("config,needle", [
    ({"log.retention.ms": "soon"}, "log.retention.ms"),
    ({"no.such.key": 1}, "no.such.key"),
    ({"log.segment.bytes": 3}, "log.segment.bytes"),
    ({"broker.id": 3}, "set by the operator"),
])
def test_broker_config_problems(config, needle):
    problems = broker_config_problems(config)
    assert problems and any(needle in p for p in problems), problems


def test_good_broker_config_has_no_problems(spec):
    assert broker_config_problems(spec.config) == []


def test_names():
    names = Names.of(ClusterSpec.from_resource({"metadata": {"name": "x"}, "spec": {}}))
    assert names.pod(2) == "x-broker-2"


TWO_LISTENERS = "CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9093"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.mark.parametrize("listeners,expected", [
    ({"tls": True, "authentication": {"type": "scram-sha-512"}}, {
        "listeners": TWO_LISTENERS, "listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SSL",
        "inter.broker.listener.name": "REPLICATION", "listener.name.replication.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "super.users": "User:CN=demo-broker;User:admin",
        "authorizer.class.name": STANDARD_AUTHORIZER}),
    ({"tls": True, "authentication": {"type": "tls"}}, {
        "listener.security.protocol.map": "CLIENT:SSL,REPLICATION:SSL", "ssl.client.auth": "required",
        "super.users": "User:CN=demo-broker;User:admin",
        # client certificates verify against the clients CA; brokers' (replication) against the cluster CA
        "ssl.truststore.location": "/etc/tinystream-tls/ca.crt",
        "listener.name.client.ssl.truststore.location": "/etc/tinystream-tls/clients-ca.crt"}),
    ({"tls": False, "authentication": {"type": "scram-sha-512"}}, {
        "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,REPLICATION:SASL_PLAINTEXT",
        "inter.broker.sasl.username": "demo-broker", "super.users": "User:demo-broker;User:admin"}),
    ({"tls": True, "authentication": {"type": "none"}}, {"listeners": TWO_LISTENERS,
                                                          "ssl.keystore.location": "/etc/tinystream-tls/broker.pem"}),
    # Clients on PLAINTEXT, but brokers still prove who they are to each other (issue 21, item 4).
    ({"tls": False, "authentication": {"type": "none"}}, {
        "listeners": TWO_LISTENERS, "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:SASL_PLAINTEXT",
          "inter.broker.sasl.username": "demo-broker", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
          "super.users": "User:demo-broker;User:admin"}),
])
def test_a_secured_cluster_configures_its_listener_and_mounts_its_secrets(listeners, expected):
    body = {**BODY, "spec": {**BODY["spec"], "listeners": listeners,
                             "authorization": {"type": "simple", "superUsers": ["admin"]}}}
    secured = ClusterSpec.from_resource(body)
    broker = tomllib.loads(config_map(secured, CTX)["data"][CONFIG_FILE])["broker"]
    assert expected.items() <= broker.items()
    BrokerSettings.model_validate(broker)  # the broker accepts every key it gets
    mounts = {m["name"]: m["mountPath"] for m in
              statefulset(secured, CTX, replicas=3, cfg_hash="x")["spec"]["template"]["spec"]["containers"][0][
                  "volumeMounts"]}
    assert ("tls" in mounts) == listeners["tls"]
    assert ("users" in mounts) == (listeners["authentication"] == {"type": "scram-sha-512"}
                                   or not listeners["tls"])  # brokers replicate with SCRAM without TLS
    assert "advertised.port" not in broker  # each listener advertises its own port
    plan = plan_listeners(BrokerSettings.model_validate(broker))  # the broker would start with these listeners
    assert plan.inter_broker.name == "REPLICATION" and plan.client_facing.name == "CLIENT"
    policy, = [o for o in owned_objects(secured, CTX, replicas=3) if o["kind"] == "NetworkPolicy"]
    open_ports, brokers_only = policy["spec"]["ingress"]
    assert {p["port"] for p in open_ports["ports"]} == {9092, 8080}
    assert brokers_only["ports"] == [{"port": 9093, "protocol": "TCP"}]
    assert brokers_only["from"] == [{"podSelector": {"matchLabels": {"tinystream.io/cluster": "demo",
                                                                      "app.kubernetes.io/component": "broker"}}}]


def test_only_a_listener_with_tls_authentication_trusts_the_clients_ca_and_its_marker_rolls_the_brokers():
    body = {**BODY, "spec": {**BODY["spec"], "listeners": {"tls": True, "authentication": {"type": "scram-sha-512"},
                                                          "external": [{"name": "ext", "port": 9094, "type": "nodeport",
                                                                        "authentication": {"type": "tls"}}]}}}
    spec = dataclasses.replace(ClusterSpec.from_resource(body), clients_ca_marker="trust-0-1")
    broker = tomllib.loads(config_map(spec, CTX)["data"][CONFIG_FILE])["broker"]
    assert broker["listener.name.ext.ssl.truststore.location"] == "/etc/tinystream-tls/clients-ca.crt"
    assert "listener.name.client.ssl.truststore.location" not in broker  # SCRAM there: no client certificates
    annotations = statefulset(spec, CTX, replicas=3, cfg_hash="x")["spec"]["template"]["metadata"]["annotations"]
    assert annotations[CLIENTS_CA_ANNOTATION] == "trust-0-1"
    scram = dataclasses.replace(ClusterSpec.from_resource({**BODY, "spec": {**BODY["spec"], "listeners": {
        "tls": True, "authentication": {"type": "scram-sha-512"}}}}), clients_ca_marker="trust-0-1")
    assert not scram.tls_clients
    assert CLIENTS_CA_ANNOTATION not in statefulset(scram, CTX, replicas=3, cfg_hash="x")["spec"]["template"][
        "metadata"]["annotations"]


def test_spec_config_cannot_loosen_a_secured_listener():
    assert broker_config_problems({"super.users": "User:mallory"}) == ["super.users: set by the operator"]


def test_a_cluster_that_says_nothing_of_security_gets_all_of_it():
    default = ClusterSpec.from_resource(BODY)  # no listeners.tls, authentication or authorization
    assert (default.tls, default.authentication, default.super_users) == (True, "scram-sha-512", ())
    assert default.security_protocol == "SASL_SSL" and default.replication_protocol == "SSL"
    assert default.insecure == ()
    broker = tomllib.loads(config_map(default, CTX)["data"][CONFIG_FILE])["broker"]
    assert broker["authorizer.class.name"] == STANDARD_AUTHORIZER  # deny unless an ACL allows
    condition = secure_condition(default.insecure)
    assert (condition.type, condition.status, condition.reason) == ("Secure", True, "SecureByDefault")


def test_each_opt_out_is_explicit_and_said_in_status():
    body = {**BODY, "spec": {**BODY["spec"], "listeners": {"tls": False, "authentication": {"type": "none"}},
                             "authorization": {"type": "none"}}}
    opted_out = ClusterSpec.from_resource(body)
    assert (opted_out.tls, opted_out.authentication, opted_out.super_users) == (False, None, None)
    assert opted_out.security_protocol == "PLAINTEXT"
    assert opted_out.replication_protocol == "SASL_PLAINTEXT"  # brokers still prove who they are
    condition = secure_condition(opted_out.insecure)
    assert (condition.status, condition.reason) == (False, "InsecureByRequest")
    for said in ("listeners.tls is false", "authentication is none", "authorization is none"):
        assert said in condition.message


def test_brokers_admin_http_wants_the_clusters_token_and_metrics_open_only_when_the_chart_scrapes(spec):
    from dataclasses import replace

    from tinystream.operator.k8s.resources import ADMIN_TOKEN_FILE, TOKENS_MOUNT, broker_config

    config = broker_config(spec, CTX)
    assert config["admin.token.file"] == f"{TOKENS_MOUNT}/{ADMIN_TOKEN_FILE}"
    assert "admin.metrics.public" not in config
    assert broker_config(spec, replace(CTX, broker_metrics_public=True))["admin.metrics.public"] is True
    mounts = {m["name"]: m["mountPath"] for m in
              statefulset(spec, CTX, replicas=3, cfg_hash="h")["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["controller-tokens"] == TOKENS_MOUNT  # the tokens Secret, where the file is
    assert "admin.token.file: set by the operator" in broker_config_problems({"admin.token.file": "/x"})
    BrokerSettings.model_validate({k: v for k, v in config.items()})  # the broker takes every key


# --- spec.template.pod (issue 23) ---------------------------------------------------------

NODE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["kafka"]}]}]}}}
TEMPLATE = {"metadata": {"labels": {"team": "data", "example.com/tier": "gold"},
                         "annotations": {"example.com/owner": "streaming"}},
            "affinity": NODE_AFFINITY,
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                           "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"tinystream.io/cluster": "demo"}}}],
            "priorityClassName": "kafka-critical",
            "imagePullSecrets": [{"name": "regcred"}],
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}}


def with_template(pod, **spec_changes):
    return ClusterSpec.from_resource({**BODY, "spec": {**BODY["spec"], **spec_changes, "template": {"pod": pod}}})


def pod_template_of(cluster):
    return by_kind_name(owned_objects(cluster, CTX, replicas=3))[("StatefulSet", "demo-broker")]["spec"]["template"]


def test_a_pod_template_reaches_the_broker_pods_and_the_statefulset_stays_valid():
    cluster = with_template(TEMPLATE)
    assert cluster.pod_template.problems() == []
    template = pod_template_of(cluster)
    pod = template["spec"]
    assert pod["tolerations"] == TEMPLATE["tolerations"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["priorityClassName"] == "kafka-critical"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    # Replaced whole, as in Strimzi: the user's affinity instead of the default anti-affinity.
    assert pod["affinity"] == NODE_AFFINITY
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    # Added to the rack's constraint (another topologyKey).
    assert [c["topologyKey"] for c in pod["topologySpreadConstraints"]] == ["topology.kubernetes.io/zone",
                                                                            "kubernetes.io/hostname"]
    assert template["metadata"]["labels"]["team"] == "data"
    assert template["metadata"]["labels"]["example.com/tier"] == "gold"
    assert template["metadata"]["labels"].items() >= labels(cluster).items()  # the operator's all there
    assert template["metadata"]["annotations"]["example.com/owner"] == "streaming"
    assert CONFIG_HASH_ANNOTATION in template["metadata"]["annotations"]
    for obj in owned_objects(cluster, CTX, replicas=3):
        assert builtin_errors(obj) == [], obj["kind"]


def test_no_template_keeps_the_operators_defaults(spec):
    pod = pod_template_of(spec)["spec"]
    assert "tolerations" not in pod and "nodeSelector" not in pod and "priorityClassName" not in pod
    assert "imagePullSecrets" not in pod
    assert pod["affinity"]["podAntiAffinity"]  # one broker per node, preferred
    assert pod["securityContext"]["runAsUser"] == 10001


def test_a_spread_constraint_on_the_racks_key_replaces_the_racks():
    zone = {"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"tinystream.io/cluster": "demo"}}}
    constraints = pod_template_of(with_template({"topologySpreadConstraints": [zone]}))["spec"][
        "topologySpreadConstraints"]
    assert constraints == [zone]
    no_rack = {k: v for k, v in BODY["spec"].items() if k != "rack"}
    cluster = ClusterSpec.from_resource({**BODY, "spec": {**no_rack, "template": {"pod": {
        "topologySpreadConstraints": [zone]}}}})
    assert pod_template_of(cluster)["spec"]["topologySpreadConstraints"] == [zone]


def test_the_operators_labels_and_annotations_win_and_are_reported():
    cluster = with_template({"metadata": {
        "labels": {"tinystream.io/cluster": "other", "app.kubernetes.io/component": "x",
                   "controller-revision-hash": "r9", "ok": "yes"},
        "annotations": {CONFIG_HASH_ANNOTATION: "0000", "tinystream.io/cluster-ca": "x", "example.com/a": "b"}}})
    problems = cluster.pod_template.problems()
    assert len(problems) == 5, problems
    assert any("tinystream.io/cluster: the operator's own label" in p for p in problems)
    assert any(f"{CONFIG_HASH_ANNOTATION}: the operator's own annotation" in p for p in problems)
    # Were they to reach resources.py, the operator's own values would still be the ones written.
    meta = pod_template_of(cluster)["metadata"]
    assert meta["labels"]["tinystream.io/cluster"] == "demo" and meta["labels"]["app.kubernetes.io/component"] == "broker"
    assert "controller-revision-hash" not in meta["labels"] and meta["labels"]["ok"] == "yes"
    assert meta["annotations"][CONFIG_HASH_ANNOTATION] != "0000" and "tinystream.io/cluster-ca" not in meta["annotations"]
    assert meta["annotations"]["example.com/a"] == "b"


def test_every_label_and_annotation_the_operator_sets_on_a_broker_pod_is_reserved():
    cluster = with_template({}, listeners={"tls": True})
    cluster = dataclasses.replace(cluster, ca_marker="gen-2")
    meta = pod_template_of(cluster)["metadata"]
    assert all(reserved_label(k) for k in meta["labels"]), meta["labels"]
    assert all(reserved_annotation(k) for k in meta["annotations"]), meta["annotations"]
    # and the ones the StatefulSet controller sets on each pod (the roll reads its revision).
    assert all(reserved_label(k) for k in (POD_INDEX_LABEL, "statefulset.kubernetes.io/pod-name",
                                           "controller-revision-hash"))
    assert not reserved_label("app.kubernetes.io/version") and not reserved_annotation("example.com/tinystream.io")


@pytest.mark.parametrize("key", ["bad key", "-x", "a/b/c", "example.com/" + "x" * 64])
def test_a_malformed_label_key_is_reported(key):
    assert any("not a valid label key" in p for p in with_template({"metadata": {"labels": {key: "v"}}}).pod_template.problems())


@pytest.mark.parametrize("change", [
    {"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]},
    {"nodeSelector": {"pool": "kafka"}},
    {"priorityClassName": "high"},
    {"metadata": {"labels": {"team": "payments"}}},
    {"metadata": {"annotations": {"example.com/owner": "someone"}}},
    {"affinity": {"podAntiAffinity": {}}},
    {"imagePullSecrets": [{"name": "other"}]},
])
def test_a_template_change_changes_the_pod_template_and_the_statefulsets_digest(change):
    before = with_template(TEMPLATE)
    after = with_template({**TEMPLATE, **change})
    sts_a = by_kind_name(owned_objects(before, CTX, replicas=3))[("StatefulSet", "demo-broker")]
    sts_b = by_kind_name(owned_objects(after, CTX, replicas=3))[("StatefulSet", "demo-broker")]
    assert sts_a["spec"]["template"] != sts_b["spec"]["template"]  # a new StatefulSet revision: the brokers roll
    assert sts_a["metadata"]["annotations"][POD_TEMPLATE_ANNOTATION] != sts_b["metadata"]["annotations"][
        POD_TEMPLATE_ANNOTATION]


def test_removing_a_template_field_changes_the_digest():
    """A desired object that lacks a field does not differ from one that has it (reconcile.differs): the
    digest on the StatefulSet makes the removal an apply, which drops the field."""
    full, fewer = with_template(TEMPLATE), with_template({k: v for k, v in TEMPLATE.items() if k != "tolerations"})
    assert full.pod_template.digest != fewer.pod_template.digest
    assert with_template({}).pod_template.digest == ClusterSpec.from_resource(BODY).pod_template.digest


# --- several volumes (spec.storage.volumes, JBOD) -------------------------------------------

JBOD = {"volumes": [{"id": 1, "size": "20Gi", "storageClass": "fast"}, {"id": 0, "size": "10Gi"}],
        "deleteClaim": True}


def test_single_volume_keeps_the_names_clusters_had(spec):
    sts = statefulset(spec, CTX, replicas=3, cfg_hash="x")["spec"]
    assert [c["metadata"]["name"] for c in sts["volumeClaimTemplates"]] == ["data"]
    broker, = sts["template"]["spec"]["containers"]
    assert {"name": "data", "mountPath": "/var/lib/tinystream"} in broker["volumeMounts"]


def test_each_volume_is_a_claim_template_a_mount_and_a_log_dir():
    spec = ClusterSpec.from_resource({**BODY, "spec": {**BODY["spec"], "storage": JBOD}})
    sts = statefulset(spec, CTX, replicas=3, cfg_hash="x")
    templates = {c["metadata"]["name"]: c["spec"] for c in sts["spec"]["volumeClaimTemplates"]}
    assert list(templates) == ["data-0", "data-1"]  # by id, whatever the spec's order
    assert templates["data-1"]["resources"]["requests"]["storage"] == "20Gi"
    assert templates["data-1"]["storageClassName"] == "fast" and "storageClassName" not in templates["data-0"]
    broker, = sts["spec"]["template"]["spec"]["containers"]
    mounts = {m["name"]: m["mountPath"] for m in broker["volumeMounts"]}
    assert (mounts["data-0"], mounts["data-1"]) == ("/var/lib/tinystream/data-0", "/var/lib/tinystream/data-1")
    assert "data" not in mounts
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    broker_cfg = tomllib.loads(config_map(spec, CTX)["data"][CONFIG_FILE])["broker"]
    assert broker_cfg["log.dirs"] == "/var/lib/tinystream/data-0/data,/var/lib/tinystream/data-1/data"
    BrokerSettings.model_validate(broker_cfg)
    assert builtin_errors(sts) == []


def test_volumes_keep_their_claims_unless_every_one_says_delete():
    volumes = [{"id": 0, "size": "1Gi", "deleteClaim": True}, {"id": 1, "size": "1Gi", "deleteClaim": False}]
    spec = ClusterSpec.from_resource({**BODY, "spec": {**BODY["spec"], "storage": {"volumes": volumes}}})
    sts = statefulset(spec, CTX, replicas=3, cfg_hash="x")
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
