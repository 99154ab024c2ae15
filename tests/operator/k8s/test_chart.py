"""The Helm chart: lint, render, and every rendered object valid.

Built-in kinds are checked against Kubernetes' own JSON schemas (strict, from
the kubernetes-validate package, Kubernetes 1.30 = the chart's kubeVersion
floor); TinyStreamCluster and Topic objects against our CRDs, including
their CEL rules (k8s_helpers.admission_errors). kubeconform is not reachable
here; these are the same schemas it would use.
"""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'jsonschema', 'celpy', 'kubernetes_validate')

import pytest
import yaml
from chart_helpers import FULL_VALUES, INSTALL_HINT, by_kind, find_helm, helm, render
from k8s_helpers import CHART_DIR, CRD_DIR, admission_errors, builtin_errors, has_builtin_schema, load_crd

HELM = find_helm()
pytestmark = pytest.mark.skipif(HELM is None, reason=INSTALL_HINT)

VALUE_SETS = {"default": (), "full": ("-f", str(FULL_VALUES))}


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request):
    return request.param, render(HELM, *VALUE_SETS[request.param], namespace="streaming")


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_helm_lint_strict(values):
    result = helm(HELM, "lint", "--strict", str(CHART_DIR), *VALUE_SETS[values], check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_every_rendered_object_is_valid(rendered):
    name, docs = rendered
    crds = {"TinyStreamCluster": load_crd("tinystreamclusters"), "Topic": load_crd("topics")}
    unchecked = []
    for doc in docs:
        if doc["kind"] in crds:
            assert admission_errors(crds[doc["kind"]], doc) == [], doc
        elif has_builtin_schema(doc):
            assert builtin_errors(doc) == [], doc
        else:
            unchecked.append(doc["kind"])
    # Third-party kinds have no schema here; they get the structural minimum below.
    assert set(unchecked) <= {"ServiceMonitor", "ClusterKopfPeering", "KopfPeering"}, unchecked


def test_validation_catches_a_broken_object():
    docs = render(HELM)
    deployment = by_kind(docs, "Deployment")[0]
    deployment["spec"]["replicas"] = "two"
    assert builtin_errors(deployment)


def test_full_values_render_every_optional_part():
    kinds = {d["kind"] for d in render(HELM, "-f", str(FULL_VALUES), namespace="streaming")}
    assert {"ServiceMonitor", "TinyStreamCluster", "Topic", "Role", "RoleBinding", "KopfPeering", "ConfigMap"} <= kinds
    default_kinds = {d["kind"] for d in render(HELM)}
    assert not default_kinds & {"ServiceMonitor", "TinyStreamCluster", "Topic", "ConfigMap", "ClusterKopfPeering"}
    # Least privilege by default: the release's namespace only (a Role; the ClusterRole keeps CRDs and nodes).
    assert {"Role", "RoleBinding", "KopfPeering"} <= default_kinds


def _monitors(docs):
    return {m["metadata"]["name"]: m for m in by_kind(docs, "ServiceMonitor")}


def test_service_monitor_scrapes_the_operator_metrics_port():
    docs = render(HELM, "-f", str(FULL_VALUES), namespace="streaming")
    monitor = _monitors(docs)["ts-tinystream"]
    service, = by_kind(docs, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    port_names = {p["name"] for p in service["spec"]["ports"]}
    assert all(e["port"] in port_names for e in monitor["spec"]["endpoints"])
    # The operator serves /metrics on its controller API server (operator/k8s/controller_host.py).
    assert [(e["port"], e["path"]) for e in monitor["spec"]["endpoints"]] == [("controller", "/metrics")]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"


def test_broker_service_monitor_selects_only_the_headless_service_with_the_admin_port():
    from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
    from tinystream.operator.k8s.resources import owned_objects

    docs = render(HELM, "-f", str(FULL_VALUES), namespace="streaming")
    monitor = _monitors(docs)["ts-tinystream-brokers"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    # full-values watches one namespace: brokers live there.
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["streaming"]}
    endpoint, = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("admin", "/metrics")
    assert {"sourceLabels": ["__meta_kubernetes_service_label_tinystream_io_cluster"],
            "targetLabel": "cluster"} in endpoint["relabelings"]
    # Against the Services the operator creates for a cluster (resources.py):
    cluster = ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "streaming", "uid": "u"},
                                         "spec": {"brokers": 3}})
    services = [o for o in owned_objects(cluster, OperatorContext(), replicas=3) if o["kind"] == "Service"]
    selector = monitor["spec"]["selector"]["matchLabels"].items()
    scraped = [s["metadata"]["name"] for s in services
               if selector <= s["metadata"]["labels"].items()
               and any(p.get("name") == endpoint["port"] for p in s["spec"]["ports"])]
    assert scraped == ["demo-brokers"]
    # Watching every namespace: brokers in any namespace.
    everywhere = _monitors(render(HELM, "--set", "serviceMonitor.enabled=true",
                                  "--set", "operator.watchAllNamespaces=true"))
    assert everywhere["ts-tinystream-brokers"]["spec"]["namespaceSelector"] == {"any": True}
    operator_only = _monitors(render(HELM, "--set", "serviceMonitor.enabled=true",
                                     "--set", "serviceMonitor.brokers.enabled=false"))
    assert set(operator_only) == {"ts-tinystream"}


def test_grafana_dashboards_ship_as_a_labelled_config_map():
    import json

    docs = render(HELM, "-f", str(FULL_VALUES), namespace="streaming")
    config_map, = [c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"] == "ts-tinystream-dashboards"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "TinyStream"}
    source = (CHART_DIR / "dashboards" / "tinystream.json").read_text()
    assert json.loads(config_map["data"]["tinystream.json"]) == json.loads(source)
    assert not [c for c in by_kind(render(HELM), "ConfigMap") if "grafana_dashboard" in c["metadata"]["labels"]]


def test_crds_ship_in_crds_folder_identical_to_source():
    out = helm(HELM, "template", "ts", str(CHART_DIR), "--include-crds").stdout
    rendered = {d["metadata"]["name"]: d for d in yaml.safe_load_all(out)
                if d and d["kind"] == "CustomResourceDefinition"}
    source = {d["metadata"]["name"]: d for p in CRD_DIR.glob("*.yaml") for d in yaml.safe_load_all(p.read_text())}
    assert rendered == source
    # Without --include-crds the CRDs are not templates (so no release owns them or deletes them).
    assert not by_kind(render(HELM), "CustomResourceDefinition")


def test_operator_deployment_is_locked_down_and_probed():
    docs = render(HELM)
    deployment, = by_kind(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container, = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] in ports
        assert container[probe]["httpGet"]["path"] == "/healthz"
    assert container["args"][0] == "operator"
    service, = by_kind(docs, "Service")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]}["dashboard"] == 3200
    sa, = by_kind(docs, "ServiceAccount")
    assert pod["serviceAccountName"] == sa["metadata"]["name"]


@pytest.mark.parametrize(("extra", "domain"), [((), "cluster.local"), (("--set", "clusterDomain=k8s.example"), "k8s.example")])
def test_operator_service_name_is_fully_qualified(extra, domain):
    """The name becomes an ExternalName Service's target (a CNAME), which resolvers do not search-expand:
    on a real cluster `ts-tinystream.<ns>.svc` left the brokers unable to reach the controller API."""
    deployment, = by_kind(render(HELM, *extra, namespace="streaming"), "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    service, = by_kind(render(HELM, *extra, namespace="streaming"), "Service")
    assert env["TINYSTREAM_OPERATOR_SERVICE"] == f"{service['metadata']['name']}.streaming.svc.{domain}"


def test_rbac_is_least_privilege():
    for values in VALUE_SETS.values():
        for doc in render(HELM, *values, namespace="streaming"):
            for rule in doc.get("rules", []) if doc["kind"] in ("Role", "ClusterRole") else []:
                assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
                assert not {"roles", "rolebindings", "clusterroles"} & set(rule["resources"]), rule
                if "secrets" in rule["resources"]:  # certificates, credentials: made and renewed, never read
                    # ... but for the operator's own master secret and dashboard login: read by name alone
                    assert rule["verbs"] in (["create", "patch"], ["create"]) or (
                        rule["verbs"] == ["get"] and rule["resourceNames"] == [
                            "ts-tinystream-controller-secret", "ts-tinystream-dashboard-login"]), rule
                if "customresourcedefinitions" in rule["resources"] and "patch" in rule["verbs"]:
                    assert rule["resourceNames"] == ["tinystreamclusters.tinystream.io", "topics.tinystream.io",
                                                     "tinystreamusers.tinystream.io", "tinystreamschemas.tinystream.io",
                                                     "tinystreamrebalances.tinystream.io",
                                                     "tinystreamnodepools.tinystream.io"]


def test_by_default_the_operator_may_touch_only_its_own_namespace():
    docs = render(HELM, namespace="ops")
    role, master = by_kind(docs, "Role")
    assert role["metadata"]["namespace"] == master["metadata"]["namespace"] == "ops"
    cluster_rules = [r for d in by_kind(docs, "ClusterRole") for r in d["rules"]]
    assert not any({"secrets", "pods", "tinystreamclusters"} & set(r["resources"]) for r in cluster_rules)
    deployment, = by_kind(docs, "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TINYSTREAM_NAMESPACE"] == "ops"


def test_namespaced_install_binds_a_role_in_the_watched_namespace():
    docs = render(HELM, "--set", "operator.watchNamespace=apps", namespace="ops")
    role, master = by_kind(docs, "Role")
    binding, master_binding = by_kind(docs, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "apps"
    assert binding["subjects"][0]["namespace"] == "ops"
    # The master secret stays in the operator's own namespace.
    assert master["metadata"]["namespace"] == master_binding["metadata"]["namespace"] == "ops"
    peering, = by_kind(docs, "KopfPeering")
    assert peering["metadata"]["namespace"] == "apps"


def test_manage_crds_off_drops_the_crd_patch_rule():
    docs = render(HELM, "--set", "operator.manageCRDs=false")
    rules = [r for d in by_kind(docs, "ClusterRole") for r in d["rules"]]
    assert not any("patch" in r["verbs"] for r in rules if "customresourcedefinitions" in r["resources"])


@pytest.mark.parametrize("bad", [
    "operator.logLevel=LOUD",
    "operator.controllerPort=80",
    "cluster.spec.brokers=0",
    "image.pullPolicy=Sometimes",
    "operator.watchNamespace=Not_A_Namespace",
    "unknownKey=1",
    "grafana.dashboards.enabled=yes",
    "serviceMonitor.brokers.unknown=1",
])
def test_values_schema_refuses_bad_values(bad):
    result = helm(HELM, "template", "ts", str(CHART_DIR), "--set", bad, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr or "at '/" in result.stderr


def test_a_pod_template_from_values_reaches_the_cluster():
    cluster, = by_kind(render(HELM, "-f", str(FULL_VALUES), namespace="streaming"), "TinyStreamCluster")
    pod = cluster["spec"]["template"]["pod"]
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "streaming", "effect": "NoSchedule"}]
    assert (pod["priorityClassName"], pod["imagePullSecrets"]) == ("streaming-high", [{"name": "regcred"}])


def test_topics_from_values_reach_the_topic_objects():
    docs = render(HELM, "-f", str(FULL_VALUES), namespace="streaming")
    topics = {t["metadata"]["name"]: t["spec"] for t in by_kind(docs, "Topic")}
    assert topics["orders"] == {"cluster": "demo", "partitions": 6, "replicationFactor": 3,
                                "config": {"cleanup.policy": "delete", "min.insync.replicas": "2",
                                           "retention.ms": "604800000"}}
    assert topics["events-v1"]["topicName"] == "events_v1"


def test_only_broker_pods_may_reach_the_controller_port():
    docs = render(HELM, "--set", "networkPolicy.dashboardFromNamespaces={monitoring}", namespace="streaming")
    policy, = by_kind(docs, "NetworkPolicy")
    deployment, = by_kind(docs, "Deployment")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= \
        deployment["spec"]["template"]["metadata"]["labels"].items()
    controller_rule, open_rule = policy["spec"]["ingress"]
    assert controller_rule["ports"] == [{"port": "controller", "protocol": "TCP"}]
    source, = controller_rule["from"]
    assert source["podSelector"]["matchLabels"] == {"app.kubernetes.io/component": "broker",
                                                     "app.kubernetes.io/managed-by": "tinystream-operator"}
    assert {p["port"] for p in open_rule["ports"]} == {"dashboard", "health"}
    assert open_rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert not by_kind(render(HELM, "--set", "networkPolicy.enabled=false", namespace="s"), "NetworkPolicy")


def test_two_renders_are_the_same_and_hold_no_secret():
    """Issue 21, item 8: `helm template` (Argo CD, Flux) rendered a new master secret each time, which rotated
    every CA and password; now the operator makes its Secret once and no render holds one."""
    first, second = (render(HELM, "--set", "cluster.enabled=true", namespace="ops") for _ in range(2))
    assert first == second
    assert not by_kind(first, "Secret")
    deployment, = by_kind(first, "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TINYSTREAM_CONTROLLER_SECRET_REF"] == "ops/ts-tinystream-controller-secret"
    assert env["TINYSTREAM_DASHBOARD_LOGIN_REF"] == "ops/ts-tinystream-dashboard-login"
    assert env["TINYSTREAM_BROKER_METRICS_PUBLIC"] == "false"  # brokers' /metrics behind their token


def test_brokers_metrics_are_public_only_while_the_charts_servicemonitor_scrapes_them():
    def public(*values: str) -> str:
        deployment, = by_kind(render(HELM, *values, namespace="ops"), "Deployment")
        env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        return env["TINYSTREAM_BROKER_METRICS_PUBLIC"]

    assert public("--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.brokers.enabled=true") == "true"
    assert public("--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.brokers.enabled=false") == "false"
    assert public("--set", "serviceMonitor.brokers.enabled=true") == "false"
