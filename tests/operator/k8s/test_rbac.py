"""Every API call the operator makes is granted by the chart's RBAC, and nothing it needs is missing.

The operator runs against KMock through a scenario that makes it use every
permission (CRD upgrade at start-up, peering, create, status, a roll, a
dashboard switched off, rack lookup, topic finalizers, events, a volume
expansion); each request
it sent (kopf's and its own, told apart by User-Agent) is turned into an
RBAC verb and resource and checked against the rendered Roles.
"""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'jsonschema', 'celpy', 'kubernetes_validate', 'kopf', 'kmock')

import asyncio
import copy

import pytest
from chart_helpers import INSTALL_HINT, find_helm, render
from fake_controller import FakeController
from k8s_helpers import CRD_DIR, load_crd
from kmock_helpers import Api, declare, ready_condition, running_operator

HELM = find_helm()
pytestmark = [pytest.mark.skipif(HELM is None, reason=INSTALL_HINT), pytest.mark.timeout(90)]
TS = "tinystream.io/v1alpha1"
AGENTS = ("kopf/", "tinystream-operator")


def rbac_verb(req) -> str:
    method = getattr(req.method, "value", str(req.method)).upper()
    if method == "GET":
        return "watch" if req.params.get("watch") in ("true", "1") else ("get" if req.name else "list")
    return {"POST": "create", "PATCH": "patch", "PUT": "update",
            "DELETE": "delete" if req.name else "deletecollection"}[method]


def granted(rules, *, verb, group, resource, name) -> bool:
    return any(group in r.get("apiGroups", []) and resource in r.get("resources", [])
               and verb in r["verbs"] and (not r.get("resourceNames") or name in r["resourceNames"])
               for r in rules)


async def scenario(api: Api, server) -> None:
    # A cluster with racks and a dashboard, its pods ready on a labelled node.
    await api.create("v1", "nodes", {"apiVersion": "v1", "kind": "Node",
                                     "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "a"}}})
    await api.create(TS, "tinystreamclusters", {"apiVersion": TS, "kind": "TinyStreamCluster",
                                                "metadata": {"name": "demo", "generation": 1},
                                                "spec": {"brokers": 1, "rack": {"topologyKey": "topology.kubernetes.io/zone"}}})
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o is not None)
    await api.patch("apps/v1", "statefulsets", "demo-broker", {"status": {"updateRevision": "r2"}})
    await api.create("v1", "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "demo-broker-0", "labels": {**sts["spec"]["selector"]["matchLabels"], "controller-revision-hash": "r1"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "broker", "image": "x"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    # The pod runs an old revision: the roll deletes it.
    await api.wait_for("v1", "pods", "demo-broker-0", lambda o: o is None, timeout=40)  # slow on a loaded machine
    # Topics: one placed, one refused, both deleted (finalizers).
    await api.create(TS, "topics", {"apiVersion": TS, "kind": "Topic", "metadata": {"name": "t1"},
                                    "spec": {"cluster": "demo", "partitions": 1, "replicationFactor": 1}})
    await api.create(TS, "topics", {"apiVersion": TS, "kind": "Topic", "metadata": {"name": "t2"},
                                    "spec": {"cluster": "demo", "partitions": 1, "replicationFactor": 9}})
    await api.wait_for(TS, "topics", "t1", lambda o: ready_condition(o).get("status") == "True")
    await api.wait_for(TS, "topics", "t2", lambda o: ready_condition(o).get("reason") == "ReplicationFactorTooLarge")
    await api.delete(TS, "topics", "t1")
    await api.delete(TS, "topics", "t2")
    await api.wait_for(TS, "topics", "t2", lambda o: o is None)
    # A larger storage size on an expandable class: the claim is patched, the StatefulSet deleted and re-created.
    await api.in_namespace(None).create("storage.k8s.io/v1", "storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
        "provisioner": "x", "allowVolumeExpansion": True})
    await api.create("v1", "persistentvolumeclaims", {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
        "name": "data-demo-broker-0", "labels": sts["spec"]["selector"]["matchLabels"]},
        "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}}})
    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"storage": {"size": "20Gi"}}})
    await api.wait_for("v1", "persistentvolumeclaims", "data-demo-broker-0",
                       lambda o: o["spec"]["resources"]["requests"]["storage"] == "20Gi")
    await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o is not None and o["spec"][
        "volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "20Gi")
    # Dashboard off: its Service is deleted.
    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"dashboard": {"enabled": False}}})
    await api.wait_for("v1", "services", "demo-dashboard", lambda o: o is None, timeout=40)  # a pass may be mid-way
    # The brokers' rack binding (operator/k8s/rack.py) exists. Its removal with spec.rack is planned in
    # test_rack.py: under kmock the operator's watch kept the old spec.rack after {"rack": null} in about half
    # the runs (the note of session 18), so the delete verb is checked against the chart directly below.
    await api.in_namespace(None).wait_for("rbac.authorization.k8s.io/v1", "clusterrolebindings",
                                          "tinystream-streaming-demo-rack", lambda o: o is not None)


async def test_every_operator_call_is_granted_by_the_chart(kmock, tmp_path):
    declare(kmock)
    api = Api(str(kmock.url))
    try:
        # Installed CRDs one revision behind: the operator upgrades them at start-up.
        for plural in ("tinystreamclusters", "topics"):
            old = copy.deepcopy(load_crd(plural))
            old["metadata"]["annotations"]["tinystream.io/crd-revision"] = "0"
            kmock.objects[kmock.resource("apiextensions.k8s.io/v1/customresourcedefinitions"), None,
                          old["metadata"]["name"]] = old
        kmock.objects[kmock.resource("kopf.dev/v1/clusterkopfpeerings"), None, "ts-tinystream"] = {
            "apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": "ts-tinystream"}}
        async with running_operator(str(kmock.url), controller=FakeController(), peering="ts-tinystream",
                                    crds_dir=CRD_DIR, scanning=True):
            await asyncio.wait_for(scenario(api, kmock), 120)
        crd = await api.in_namespace(None).get("apiextensions.k8s.io/v1", "customresourcedefinitions",
                                               "topics.tinystream.io")
        bundled = load_crd("topics")["metadata"]["annotations"]["tinystream.io/crd-revision"]
        assert crd["metadata"]["annotations"]["tinystream.io/crd-revision"] == bundled  # upgraded
    finally:
        await api.close()

    # The operator here runs clusterwide (as kmock_helpers starts it): the chart's all-namespaces RBAC.
    rules = [r for doc in render(HELM, "--set", "operator.watchAllNamespaces=true")
             if doc["kind"] in ("ClusterRole", "Role") for r in doc["rules"]]
    calls = set()
    for req in kmock:
        agent = req.headers.get("User-Agent", "")
        if not agent.startswith(AGENTS) or req.resource is None or req.resource.plural is None:
            continue  # the test's own calls, or discovery (granted to every user by system:discovery)
        resource = req.resource.plural + (f"/{req.subresource}" if req.subresource else "")
        calls.add((rbac_verb(req), req.resource.group, resource, req.name))
    verbs_seen = {(v, r) for v, _, r, _ in calls}
    # The scenario did exercise the risky permissions.
    assert {("delete", "pods"), ("delete", "services"), ("get", "nodes"), ("patch", "customresourcedefinitions"),
            ("patch", "clusterkopfpeerings"), ("create", "events"), ("patch", "topics"),
            ("patch", "persistentvolumeclaims"), ("delete", "statefulsets"), ("get", "storageclasses"),
            ("patch", "serviceaccounts"), ("patch", "clusterrolebindings")} <= verbs_seen, verbs_seen
    assert granted(rules, verb="delete", group="rbac.authorization.k8s.io", resource="clusterrolebindings",
                   name="tinystream-streaming-demo-rack")  # spec.rack removed, or the cluster deleted
    missing = sorted(c for c in calls if not granted(rules, verb=c[0], group=c[1], resource=c[2], name=c[3]))
    assert missing == [], f"calls the chart's RBAC does not grant: {missing}"
