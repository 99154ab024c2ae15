"""The operator (kopf, clusterwide, as in production) against the real API server and controller-manager.

What KMock could not show: objects the operator creates pass the real
server's validation; the StatefulSet controller turns its StatefulSet into
Pods and PVCs; the garbage collector deletes everything the cluster owns when
the TinyStreamCluster goes (ownerReferences); a Topic's finalizer holds its
deletion until the operator has removed the data. No kubelet runs: pods stay
Pending, which is all these checks need.
"""

from __future__ import annotations

import pytest
from fake_controller import FakeController
from kmock_helpers import ready_condition, running_operator
from real_api import connection

from tinystream.operator.k8s.controller_port import ClusterKey

pytestmark = pytest.mark.timeout(120)
TS = "tinystream.io/v1alpha1"
CLUSTER = {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo"},
           "spec": {"brokers": 3, "storage": {"size": "1Gi", "deleteClaim": True}}}
OWNED = [("apps/v1", "statefulsets", "demo-broker"), ("v1", "services", "demo-brokers"),
         ("v1", "services", "demo-kafka"), ("v1", "configmaps", "demo-config"),
         ("policy/v1", "poddisruptionbudgets", "demo-broker")]


def topic(name: str, **spec) -> dict:
    return {"apiVersion": TS, "kind": "Topic", "metadata": {"name": name},
            "spec": {"cluster": "demo", "partitions": 3, "replicationFactor": 2, **spec}}


@pytest.fixture
async def controller(control_plane):
    fake = FakeController()
    async with running_operator(control_plane.url, controller=fake, connection=connection(control_plane)):
        yield fake


@pytest.mark.timeout(300)
async def test_cluster_objects_are_accepted_owned_and_collected(api, controller) -> None:
    await api.create(TS, "tinystreamclusters", CLUSTER)
    uid = (await api.get(TS, "tinystreamclusters", "demo"))["metadata"]["uid"]
    for api_version, plural, name in OWNED:
        obj = await api.wait_for(api_version, plural, name, lambda o: o is not None, timeout=30)
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["uid"], owner["controller"]) == (uid, True), (plural, name)
    # The real StatefulSet controller makes the pods and their claims.
    pods = await api.wait_for("v1", "pods", "demo-broker-2", lambda o: o is not None, timeout=30)
    assert pods["spec"]["containers"][0]["image"] == "tinystream:test"
    claims = await api.list("v1", "persistentvolumeclaims")
    assert sorted(c["metadata"]["name"] for c in claims) == [f"data-demo-broker-{i}" for i in range(3)]
    assert all(c["spec"]["resources"]["requests"]["storage"] == "1Gi" for c in claims)
    cluster = await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: ready_condition(o), timeout=30)
    assert ready_condition(cluster)["status"] == "False"  # no kubelet: nothing becomes ready

    await api.delete(TS, "tinystreamclusters", "demo")
    # The garbage collector follows the ownerReferences: ~40 s on an idle machine (its informer for the
    # new CRD's kind), over 60 s once in a CI run on a loaded one.
    for api_version, plural, name in OWNED:
        await api.wait_for(api_version, plural, name, lambda o: o is None, timeout=180)


async def test_topic_finalizer_holds_deletion_until_the_data_is_gone(api, controller) -> None:
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders"))
    ready = await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True", timeout=30)
    assert ready["metadata"]["finalizers"], ready["metadata"]
    assert len(ready["status"]["partitions"]) == 3
    await api.delete(TS, "topics", "orders")
    await api.wait_for(TS, "topics", "orders", lambda o: o is None, timeout=30)
    assert [name for _, name in controller.deleted] == ["orders"]


async def test_a_topic_the_controller_cannot_place_reports_it_in_status(api, controller) -> None:
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("wide", replicationFactor=5))
    wide = await api.wait_for(TS, "topics", "wide", lambda o: ready_condition(o), timeout=30)
    assert ready_condition(wide)["reason"] == "ReplicationFactorTooLarge"


async def test_external_listener_services_get_node_ports_that_the_brokers_advertise(api, controller) -> None:
    external = [{"name": "ext", "port": 9094, "type": "nodeport", "brokers": [{"broker": 1, "nodePort": 30911}]}]
    cluster = {**CLUSTER, "spec": {**CLUSTER["spec"], "brokers": 2, "listeners": {"external": external}}}
    await api.create(TS, "tinystreamclusters", cluster)
    services = {}
    for name in ("demo-ext-bootstrap", "demo-ext-0", "demo-ext-1"):
        services[name] = await api.wait_for("v1", "services", name, lambda o: o is not None, timeout=30)
        assert services[name]["spec"]["type"] == "NodePort"
    assert services["demo-ext-1"]["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "demo-broker-1"
    allocated = services["demo-ext-0"]["spec"]["ports"][0]["nodePort"]  # the API server's pick
    assert services["demo-ext-1"]["spec"]["ports"][0]["nodePort"] == 30911
    config = await api.wait_for("v1", "configmaps", "demo-config", lambda o: o is not None, timeout=30)
    assert config["data"]["external-listeners"] == f"0 EXT - {allocated}\n1 EXT - 30911\n"
    assert "EXT://0.0.0.0:9094" in config["data"]["broker.toml"]
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o is not None, timeout=30)
    assert sts["spec"]["template"]["spec"]["containers"][0]["command"][0] == "/bin/sh"

    # The listener removed: its Services go, and the brokers' config no longer has it.
    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"listeners": {"external": None}}})
    for name in services:
        await api.wait_for("v1", "services", name, lambda o: o is None, timeout=30)
    config = await api.wait_for("v1", "configmaps", "demo-config",
                                lambda o: "external-listeners" not in o["data"], timeout=30)
    assert "EXT://" not in config["data"]["broker.toml"]

@pytest.fixture
async def production_timing(control_plane):
    """The operator with production's full-pass period (reconcile.interval.s, 30 s): only the placement refresh
    (deps.placement_interval_s) can bring a controller change into status sooner."""
    fake = FakeController()
    async with running_operator(control_plane.url, controller=fake, connection=connection(control_plane),
                                health_interval_s=30.0):
        yield fake


async def test_a_new_leader_shows_in_topic_status_within_seconds(api, production_timing) -> None:
    """A failover's new leader reaches Topic status in a few seconds (it took the 30 s full pass before)."""
    controller = production_timing
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders"))
    ready = await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True", timeout=30)
    first = ready["status"]["partitions"][0]
    other = next(b for b in first["replicas"] if b != first["leader"])
    controller.elect(ClusterKey(api.ns, "demo"), "orders", 0, other)
    # 10 s: a bound for a loaded machine (the refresh runs every 2 s), well under the 30 s full pass.
    await api.wait_for(TS, "topics", "orders", lambda o: o["status"]["partitions"][0]["leader"] == other, timeout=10)


async def test_a_topic_changes_its_replication_factor_and_reports_a_bad_one(api, controller) -> None:
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("events", config={"flush.ms": 1000, "compression.type": "zstd"}))
    await api.wait_for(TS, "topics", "events", lambda o: ready_condition(o).get("status") == "True", timeout=30)
    assert controller.topics[(ClusterKey(api.ns, "demo"), "events")].config["flush.ms"] == 1000  # not ignored

    await api.patch(TS, "topics", "events", {"spec": {"replicationFactor": 3}})
    raised = await api.wait_for(TS, "topics", "events", lambda o: all(
        len(p["replicas"]) == 3 for p in o["status"]["partitions"]) and ready_condition(o).get("status") == "True",
        timeout=30)
    assert "replication factor 3" in ready_condition(raised)["message"]

    await api.patch(TS, "topics", "events", {"spec": {"replicationFactor": 1}})
    await api.wait_for(TS, "topics", "events", lambda o: all(
        len(p["replicas"]) == 1 for p in o["status"]["partitions"]) and ready_condition(o).get("status") == "True",
        timeout=30)

    await api.patch(TS, "topics", "events", {"spec": {"replicationFactor": 4}})  # the cluster has 3 brokers
    too_many = await api.wait_for(TS, "topics", "events", lambda o: ready_condition(o).get("status") == "False",
                                  timeout=30)
    assert ready_condition(too_many)["reason"] == "ReplicationFactorTooLarge", ready_condition(too_many)
    assert all(len(p["replicas"]) == 1 for p in too_many["status"]["partitions"])  # nothing moved


async def test_a_pod_template_reaches_the_statefulset_and_a_change_makes_a_new_revision(api, controller) -> None:
    """spec.template.pod (issue 23) on a real server: the StatefulSet the operator writes carries it, the
    server accepts it, and a change (a field removed too) gives the pod template a new revision: what
    plan_roll rolls by, one broker at a time."""
    toleration = {"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}
    pod = {"tolerations": [toleration], "nodeSelector": {"pool": "kafka"}, "priorityClassName": "kafka-high",
           "metadata": {"labels": {"team": "data"}, "annotations": {"example.com/owner": "streaming"}}}
    cluster = {**CLUSTER, "spec": {**CLUSTER["spec"], "template": {"pod": pod}}}
    await api.create(TS, "tinystreamclusters", cluster)
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker",
                             lambda o: o is not None and (o.get("status") or {}).get("updateRevision"), timeout=30)
    template = sts["spec"]["template"]
    assert template["spec"]["tolerations"] == [toleration]
    assert template["spec"]["nodeSelector"] == {"pool": "kafka"}
    assert template["spec"]["priorityClassName"] == "kafka-high"
    assert template["metadata"]["labels"]["team"] == "data"
    assert template["metadata"]["labels"]["tinystream.io/cluster"] == "demo"  # the operator's, still
    assert template["metadata"]["annotations"]["example.com/owner"] == "streaming"
    first = sts["status"]["updateRevision"]

    # The nodeSelector removed: a desired object that merely lacks a field is still applied (the digest on
    # the StatefulSet), and the server-side apply drops the field.
    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"template": {"pod": {"nodeSelector": None}}}})
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker",
                             lambda o: "nodeSelector" not in o["spec"]["template"]["spec"]
                             and o["status"].get("updateRevision") not in (None, first), timeout=30)
    assert sts["spec"]["template"]["spec"]["tolerations"] == [toleration]
    second = sts["status"]["updateRevision"]

    other = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"template": {"pod": {"tolerations": [other]}}}})
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker",
                             lambda o: o["spec"]["template"]["spec"].get("tolerations") == [other]
                             and o["status"].get("updateRevision") not in (None, first, second), timeout=30)
    assert sts["spec"]["template"]["spec"]["priorityClassName"] == "kafka-high"
