"""spec.rack on Kubernetes, the pure parts: the node label, the rack file, the pod pieces and the RBAC objects."""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'jsonschema', 'kubernetes_validate')

from pathlib import Path

import pytest

from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.rack import (
    API_MOUNT,
    RACK_BINDING,
    RACK_DIR,
    binding_name,
    node_rack,
    rack_file_setting,
    rack_file_text,
)
from tinystream.operator.k8s.rack_init import parse, write_rack
from tinystream.operator.k8s.reconcile import Delete, Observed, plan_owned_objects
from tinystream.operator.k8s.resources import broker_config, broker_config_problems, owned_objects

ZONE = "topology.kubernetes.io/zone"
CTX = OperatorContext(broker_image="tinystream:test", broker_rack_role="ts-tinystream-broker-rack")


def cluster(rack: str | None) -> ClusterSpec:
    return ClusterSpec.from_resource({
        "apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster",
        "metadata": {"name": "demo", "namespace": "streaming", "uid": "uid-1", "generation": 1},
        "spec": {"brokers": 3, **({"rack": {"topologyKey": rack}} if rack else {})}})


def objects(rack: str | None) -> dict[tuple[str, str], dict]:
    return {(o["kind"], o["metadata"]["name"]): o for o in owned_objects(cluster(rack), CTX, replicas=3)}


def pod_spec(rack: str | None) -> dict:
    return objects(rack)[("StatefulSet", "demo-broker")]["spec"]["template"]["spec"]


@pytest.mark.parametrize(("labels", "rack"), [
    ({ZONE: "zone-a", "other": "x"}, "zone-a"),
    ({ZONE: " zone-b "}, "zone-b"),
    ({ZONE: ""}, None),
    ({"other": "x"}, None),
    (None, None),
])
def test_the_rack_is_the_nodes_value_of_the_topology_key(labels, rack):
    assert node_rack({"metadata": {"name": "n1", "labels": labels}}, ZONE) == rack


def test_no_node_no_rack():
    assert node_rack(None, ZONE) is None


def test_the_rack_file_holds_the_rack_or_nothing(tmp_path: Path):
    assert rack_file_text("zone-a") == "zone-a\n" and rack_file_text(None) == ""
    out = tmp_path / "sub" / "rack"
    write_rack(out, "zone-a")
    assert out.read_text() == "zone-a\n" and [p.name for p in out.parent.iterdir()] == ["rack"]


def test_binding_names_differ_per_namespace():
    assert binding_name("a", "demo") != binding_name("b", "demo")


def test_a_rack_cluster_reads_its_nodes_label_in_an_init_container():
    spec = pod_spec(ZONE)
    init, = spec["initContainers"]
    assert init["image"] == "tinystream:test"
    assert init["command"][:3] == ["python", "-m", "tinystream.operator.k8s.rack_init"]
    assert init["command"][init["command"].index("--topology-key") + 1] == ZONE
    assert init["command"][init["command"].index("--out") + 1] == rack_file_setting()
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in init["env"]
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert mounts == {"rack": RACK_DIR, "rack-api": API_MOUNT}
    broker, = spec["containers"]
    broker_mounts = {m["name"]: m for m in broker["volumeMounts"]}
    assert broker_mounts["rack"] == {"name": "rack", "mountPath": RACK_DIR, "readOnly": True}
    assert "rack-api" not in broker_mounts  # the broker holds no Kubernetes credential
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes["rack"]
    sources = volumes["rack-api"]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"].get("audience") is None  # the API server's own audience
    assert spec["serviceAccountName"] == "demo-broker" and spec["automountServiceAccountToken"] is False


def test_a_rack_cluster_has_its_broker_read_the_rack_file():
    assert broker_config(cluster(ZONE), CTX)["broker.rack.file"] == rack_file_setting()


def test_a_rack_cluster_binds_its_own_service_account_to_the_charts_role():
    objs = objects(ZONE)
    account = objs[("ServiceAccount", "demo-broker")]
    assert account["metadata"]["namespace"] == "streaming" and account["automountServiceAccountToken"] is False
    binding = objs[("ClusterRoleBinding", binding_name("streaming", "demo"))]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "ts-tinystream-broker-rack"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo-broker", "namespace": "streaming"}]


def test_without_a_rack_nothing_changes():
    spec = pod_spec(None)
    assert "initContainers" not in spec and "serviceAccountName" not in spec
    assert not {"rack", "rack-api"} & {v["name"] for v in spec["volumes"]}
    assert not {k for k, _ in objects(None)} & {"ServiceAccount", "ClusterRoleBinding"}
    assert "broker.rack.file" not in broker_config(cluster(None), CTX)


def test_a_removed_rack_deletes_the_binding_it_left():
    binding = ("ClusterRoleBinding", binding_name("streaming", "demo"))
    left = Observed(objects={**objects(None), binding: objects(ZONE)[binding]}, pods=())
    assert Delete(*RACK_BINDING, binding[1]) in plan_owned_objects(cluster(None), left, CTX, replicas=3)
    kept = Observed(objects=objects(ZONE), pods=())
    assert not [a for a in plan_owned_objects(cluster(ZONE), kept, CTX, replicas=3) if isinstance(a, Delete)]


def test_spec_config_cannot_set_the_rack_file():
    assert broker_config_problems({"broker.rack.file": "/x"}) == ["broker.rack.file: set by the operator"]


def test_the_entry_point_takes_the_node_from_the_downward_api(tmp_path: Path):
    (tmp_path / "token").write_text("t0k\n")
    request = parse(["--topology-key", ZONE, "--out", str(tmp_path / "rack"), "--credentials", str(tmp_path)],
                    {"NODE_NAME": "n1", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    assert (request.node, request.server, request.token) == ("n1", "https://10.0.0.1:443", "t0k")
    assert request.ca_file == tmp_path / "ca.crt"


@pytest.mark.parametrize(("environ", "message"), [
    ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "NODE_NAME"),
    ({"NODE_NAME": "n1"}, "KUBERNETES_SERVICE_HOST"),
])
def test_the_entry_point_says_what_is_missing(tmp_path: Path, capsys, environ, message):
    (tmp_path / "token").write_text("t")
    with pytest.raises(SystemExit) as exc:
        parse(["--topology-key", ZONE, "--out", str(tmp_path / "rack"), "--credentials", str(tmp_path)], environ)
    assert exc.value.code == 2 and message in capsys.readouterr().err
