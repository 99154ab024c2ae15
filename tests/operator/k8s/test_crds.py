"""The CRDs refuse what they should and accept what they should.

Each bad object is paired with the check that must refuse it: the OpenAPI
schema (types, ranges, enums, required) or a CEL rule (immutable and
grow-only fields, config keys and values).
"""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'jsonschema', 'celpy', 'kubernetes_validate')

import copy
import re

import pytest
from k8s_helpers import (
    CHART_DIR,
    CRD_DIR,
    admission_errors,
    builtin_errors,
    cel_errors,
    load_crd,
    load_yaml_docs,
    structural_errors,
    version_schema,
)

from tinystream.operator.k8s.topics import SPEC_CONFIG_KEYS

CLUSTER = {
    "apiVersion": "tinystream.io/v1alpha1",
    "kind": "TinyStreamCluster",
    "metadata": {"name": "demo"},
    "spec": {
        "brokers": 3,
        "storage": {"size": "20Gi", "storageClass": "fast", "deleteClaim": False},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": 2147483648}},
        "rack": {"topologyKey": "topology.kubernetes.io/zone"},
        "config": {"log.retention.ms": 86400000, "auto.create.topics.enable": "false",
                   "log.cleanup.policy": "delete"},
        "listeners": {"kafka": 9092, "admin": 8080},
        "dashboard": {"enabled": True},
    },
}

TOPIC = {
    "apiVersion": "tinystream.io/v1alpha1",
    "kind": "Topic",
    "metadata": {"name": "orders"},
    "spec": {"cluster": "demo", "partitions": 6, "replicationFactor": 3,
             "config": {"retention.ms": "604800000", "cleanup.policy": "compact,delete",
                        "min.insync.replicas": 2, "segment.bytes": 1048576}},
}


def with_spec(obj, **changes):
    out = copy.deepcopy(obj)
    for path, value in changes.items():
        node = out["spec"]
        *parents, leaf = path.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        if value is DELETE:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return out


DELETE = object()


@pytest.fixture(scope="module")
def cluster_crd():
    return load_crd("tinystreamclusters")


@pytest.fixture(scope="module")
def topic_crd():
    return load_crd("topics")


# --- shape --------------------------------------------------------------------------------

@pytest.mark.parametrize("plural,kind,short", [("tinystreamclusters", "TinyStreamCluster", "tsc"),
                                                ("topics", "Topic", "tst")])
def test_names_group_version(plural, kind, short):
    crd = load_crd(plural)
    assert crd["metadata"]["name"] == f"{plural}.tinystream.io"
    assert crd["spec"]["group"] == "tinystream.io"
    assert crd["spec"]["names"]["kind"] == kind
    assert crd["spec"]["names"]["shortNames"] == [short]
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]
    assert crd["spec"]["versions"][0]["subresources"]["status"] == {}


@pytest.mark.parametrize("path", sorted(CRD_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_crd_files_are_valid_crds_with_structural_schemas(path):
    for crd in load_yaml_docs(path):
        assert builtin_errors(crd) == []  # Kubernetes' own CustomResourceDefinition schema
        for version in crd["spec"]["versions"]:
            assert structural_errors(version["schema"]["openAPIV3Schema"]) == []


def test_structural_check_catches_untyped_nodes():
    assert structural_errors({"type": "object", "properties": {"x": {"description": "no type"}}}) \
        == [".x: type is missing"]


def test_scale_subresource_targets_brokers(cluster_crd):
    scale = cluster_crd["spec"]["versions"][0]["subresources"]["scale"]
    assert scale["specReplicasPath"] == ".spec.brokers"
    schema = version_schema(cluster_crd)["properties"]
    for path in (scale["statusReplicasPath"], scale["labelSelectorPath"]):
        section, field = path.strip(".").split(".")
        assert field in schema[section]["properties"], path


@pytest.mark.parametrize("plural,columns", [
    ("tinystreamclusters", {"Ready", "Brokers", "Ready Brokers", "Partitions", "Under-Replicated", "Age"}),
    ("topics", {"Ready", "Partitions", "RF", "Age"}),
])
def test_printer_columns_point_at_schema_fields(plural, columns):
    crd = load_crd(plural)
    printed = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    assert columns <= {c["name"] for c in printed}
    props = version_schema(crd)["properties"]
    for column in printed:
        head, *rest = column["jsonPath"].strip(".").split(".")
        assert head == "metadata" or head in props, column
        if head == "status" and rest and "[" not in rest[0]:  # a status field the schema must keep
            assert rest[0] in props["status"]["properties"], column


def test_chart_ships_byte_identical_crds():
    source = {p.name: p.read_bytes() for p in CRD_DIR.glob("*.yaml")}
    shipped = {p.name: p.read_bytes() for p in (CHART_DIR / "crds").glob("*.yaml")}
    assert shipped == source, "run: cp crds/*.yaml charts/tinystream/crds/"


# --- TinyStreamCluster admission ----------------------------------------------------------

def test_full_cluster_is_accepted(cluster_crd):
    assert admission_errors(cluster_crd, CLUSTER) == []


POD_TEMPLATE = {
    "metadata": {"labels": {"team": "data", "app.kubernetes.io/version": "1"},
                 "annotations": {"example.com/owner": "streaming"}},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["kafka"]}]}]}}},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                   "whenUnsatisfiable": "ScheduleAnyway",
                                   "labelSelector": {"matchLabels": {"tinystream.io/cluster": "demo"}}}],
    "priorityClassName": "kafka-critical",
    "imagePullSecrets": [{"name": "regcred"}],
    "securityContext": {"runAsNonRoot": True, "fsGroup": 2000},
}


def test_a_cluster_with_a_pod_template_is_accepted(cluster_crd):
    assert admission_errors(cluster_crd, with_spec(CLUSTER, template={"pod": POD_TEMPLATE})) == []


def test_minimal_cluster_gets_defaults(cluster_crd):
    from k8s_helpers import apply_defaults
    minimal = {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster",
               "metadata": {"name": "m"}, "spec": {"brokers": 1}}
    assert admission_errors(cluster_crd, minimal) == []
    spec = apply_defaults(version_schema(cluster_crd), minimal)["spec"]
    # Secure by default (issue 21): TLS, SCRAM and ACLs unless a field turns one off.
    assert spec["listeners"] == {"kafka": 9092, "admin": 8080, "tls": True,
                                 "authentication": {"type": "scram-sha-512"}}
    assert spec["authorization"] == {"type": "simple"}
    assert spec["dashboard"] == {"enabled": True}
    assert spec["certificates"] == {"validityDays": 365, "renewalDays": 30}


@pytest.mark.parametrize("change,expected", [
    ({"brokers": 0}, "minimum"),
    ({"brokers": 101}, "maximum"),
    ({"brokers": "three"}, "not of type"),
    ({"storage__size": "ten gigs"}, "does not match"),
    ({"imagePullPolicy": "Sometimes"}, "is not one of"),
    ({"listeners__kafka": 80}, "minimum"),
    ({"listeners__admin": 9092}, "listeners.kafka and listeners.admin must differ"),
    ({"config__broker.id": 7}, "set by the operator"),
    ({"config__log.dirs": "/tmp"}, "set by the operator"),
    ({"config__log.retention.ms": {"nested": 1}}, "is not of type 'integer', 'string'"),
    ({"config__auto.create.topics.enable": False}, "is not of type 'integer', 'string'"),
    ({"resources__requests__cpu": "lots"}, "does not match"),
    ({"unknownField": 1}, "Additional properties"),
    ({"rack__topologyKey": ""}, "non-empty"),
    # spec.template.pod (issue 23)
    ({"template__pod__tolerations": {"key": "dedicated"}}, "is not of type 'array'"),
    ({"template__pod__tolerations": [{"key": "a", "operator": "Maybe"}]}, "is not one of"),
    ({"template__pod__nodeSelector": {"pool": 1}}, "is not of type 'string'"),
    ({"template__pod__priorityClassName": 5}, "is not of type 'string'"),
    ({"template__pod__imagePullSecrets": [{}]}, "'name' is a required property"),
    ({"template__pod__metadata__labels": {"tinystream.io/cluster": "x"}}, "cannot set the operator's labels"),
    ({"template__pod__metadata__labels": {"app.kubernetes.io/managed-by": "me"}}, "cannot set the operator's labels"),
    ({"template__pod__metadata__labels": {"team": "a b"}}, "does not match"),
    ({"template__pod__metadata__annotations": {"tinystream.io/config-hash": "0"}}, "cannot set tinystream.io/*"),
    ({"template__pod__topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]}, "required property"),
    ({"template__pod__topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}, "each topologyKey"),
    ({"template__unknown": {}}, "Additional properties"),
])
def test_bad_cluster_is_refused(cluster_crd, change, expected):
    errors = admission_errors(cluster_crd, with_spec(CLUSTER, **change))
    assert any(expected in e for e in errors), errors


def test_cluster_storage_class_is_immutable(cluster_crd):
    changed = with_spec(CLUSTER, storage__storageClass="slow")
    assert any("storageClass is immutable" in e for e in admission_errors(cluster_crd, changed, old=CLUSTER))
    removed = with_spec(CLUSTER, storage__storageClass=DELETE)
    assert any("storageClass is immutable" in e for e in admission_errors(cluster_crd, removed, old=CLUSTER))
    # Other storage fields and the broker count may change.
    grown = with_spec(CLUSTER, storage__deleteClaim=True, brokers=5)
    assert admission_errors(cluster_crd, grown, old=CLUSTER) == []


def test_cluster_storage_size_grows_and_never_shrinks(cluster_crd):
    assert admission_errors(cluster_crd, with_spec(CLUSTER, storage__size="30Gi"), old=CLUSTER) == []
    assert admission_errors(cluster_crd, with_spec(CLUSTER, storage__size="0.5Ti"), old=CLUSTER) == []
    for smaller in ("10Gi", "20G", "19Gi"):
        errors = admission_errors(cluster_crd, with_spec(CLUSTER, storage__size=smaller), old=CLUSTER)
        assert any("storage.size cannot shrink" in e for e in errors), (smaller, errors)


# --- Topic admission ----------------------------------------------------------------------

def test_full_topic_is_accepted(topic_crd):
    assert admission_errors(topic_crd, TOPIC) == []


def test_topic_config_takes_every_key_of_the_topic_config_table(topic_crd):
    """The CEL rule's names are the table's (tinystream/config/topic_configs.py): one source, checked here."""
    config = version_schema(topic_crd)["properties"]["spec"]["properties"]["config"]
    (rule,) = [r["rule"] for r in config["x-kubernetes-validations"] if r["rule"].startswith("self.all(k, k in [")]
    assert re.findall(r"'([^']+)'", rule) == list(SPEC_CONFIG_KEYS)
    assert config["maxProperties"] == len(SPEC_CONFIG_KEYS)
    every = {key: "1" for key in SPEC_CONFIG_KEYS} | {"cleanup.policy": "compact", "min.insync.replicas": 1,
                                                   "segment.bytes": 1048576}
    assert admission_errors(topic_crd, with_spec(TOPIC, config=every)) == []


@pytest.mark.parametrize("change,expected", [
    ({"partitions": 0}, "minimum"),
    ({"partitions": DELETE}, "'partitions' is a required property"),
    ({"cluster": DELETE}, "'cluster' is a required property"),
    ({"replicationFactor": 0}, "minimum"),
    ({"topicName": "bad name!"}, "does not match"),
    ({"topicName": ".."}, 'cannot be "." or ".."'),
    ({"config__retention.hours": 1}, "unknown topic config key"),
    ({"config__retention.ms": -2}, "retention.ms is a number >= -1"),
    ({"config__retention.ms": "a week"}, "retention.ms is a number >= -1"),
    ({"config__cleanup.policy": "forever"}, "cleanup.policy is delete, compact"),
    ({"config__segment.bytes": 10}, "segment.bytes is a number >= 14"),
    ({"config__min.insync.replicas": 0}, "min.insync.replicas is a number >= 1"),
    ({"config__min.insync.replicas": 4}, "min.insync.replicas cannot exceed replicationFactor"),
])
def test_bad_topic_is_refused(topic_crd, change, expected):
    errors = admission_errors(topic_crd, with_spec(TOPIC, **change))
    assert any(expected in e for e in errors), errors


def test_topic_partitions_only_grow(topic_crd):
    assert admission_errors(topic_crd, with_spec(TOPIC, partitions=12), old=TOPIC) == []
    shrunk = admission_errors(topic_crd, with_spec(TOPIC, partitions=3), old=TOPIC)
    assert any("partitions can only grow" in e for e in shrunk), shrunk


@pytest.mark.parametrize("change", [{"cluster": "other"}, {"topicName": "renamed"}])
def test_topic_identity_is_immutable(topic_crd, change):
    old = with_spec(TOPIC, topicName="orders.v1")
    errors = admission_errors(topic_crd, with_spec(old, **change), old=old)
    assert any("immutable" in e for e in errors), errors


def test_topic_name_cannot_be_added_later(topic_crd):
    errors = admission_errors(topic_crd, with_spec(TOPIC, topicName="orders.v1"), old=TOPIC)
    assert any("topicName is immutable" in e for e in errors), errors


def test_transition_rules_do_not_run_on_create(topic_crd):
    schema = version_schema(topic_crd)
    assert cel_errors(schema, TOPIC, None) == []



# --- TinyStreamNodePool ----------------------------------------------------------------------

POOL = {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamNodePool",
        "metadata": {"name": "fast", "labels": {"tinystream.io/cluster": "demo"}},
        "spec": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]},
                 "resources": {"requests": {"cpu": "1"}}, "template": {"pod": POD_TEMPLATE}}}


def test_node_pool_crd_names_and_scale():
    crd = load_crd("tinystreamnodepools")
    assert crd["spec"]["names"]["shortNames"] == ["tsnp"]
    assert crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    cluster_schema = version_schema(load_crd("tinystreamclusters"))["properties"]["spec"]["properties"]
    pool_schema = version_schema(crd)["properties"]["spec"]["properties"]
    for field in ("storage", "template"):  # the cluster's schema, with its own description
        assert {k: v for k, v in pool_schema[field].items() if k != "description"} == \
               {k: v for k, v in cluster_schema[field].items() if k != "description"}


def test_full_node_pool_is_accepted():
    assert admission_errors(load_crd("tinystreamnodepools"), POOL) == []


@pytest.mark.parametrize("change,expected", [
    ({"replicas": -1}, "minimum"),
    ({"replicas": 101}, "maximum"),
    ({"replicas": DELETE}, "required"),
    ({"storage": {"size": "1Gi", "volumes": [{"id": 0, "size": "1Gi"}]}}, "exclusive"),
    ({"storage": {"size": "lots"}}, "does not match"),
])
def test_bad_node_pool_is_refused(change, expected):
    assert any(expected in e for e in admission_errors(load_crd("tinystreamnodepools"), with_spec(POOL, **change)))
