"""The operator, in-process, against KMock (a Kubernetes API mock server).

What a user does with kubectl, the test does over HTTP against the mock;
the operator runs exactly as in production (kopf, clusterwide), with a fake
controller behind its controller port.
"""

from __future__ import annotations

import pytest
from fake_controller import FakeController
from kmock_helpers import NS, Api, declare, ready_condition, running_operator

import kmock

TS = "tinystream.io/v1alpha1"
CLUSTER = {"apiVersion": TS, "kind": "TinyStreamCluster",
           "metadata": {"name": "demo", "namespace": NS, "uid": "uid-demo", "generation": 1},
           "spec": {"brokers": 3}}


def topic(name, **spec):
    return {"apiVersion": TS, "kind": "Topic", "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"cluster": "demo", "partitions": 3, "replicationFactor": 2, **spec}}


@pytest.fixture
async def api(kmock):
    declare(kmock)
    client = Api(str(kmock.url))
    yield client
    await client.close()


@pytest.fixture
def controller():
    return FakeController()


@pytest.fixture
async def operator(kmock, api, controller):
    async with running_operator(str(kmock.url), controller=controller) as deps:
        yield deps


OWNED = [("apps/v1", "statefulsets", "demo-broker"), ("v1", "services", "demo-brokers"),
         ("v1", "services", "demo-kafka"), ("v1", "services", "demo-controller"),
         ("v1", "services", "demo-dashboard"), ("v1", "configmaps", "demo-config"),
         ("policy/v1", "poddisruptionbudgets", "demo-broker")]


@pytest.mark.timeout(60)
async def test_cluster_create_makes_owned_objects_with_owner_refs(api, operator):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    for api_version, plural, name in OWNED:
        obj = await api.wait_for(api_version, plural, name, lambda o: o is not None)
        assert obj["metadata"]["ownerReferences"][0]["uid"] == "uid-demo", (plural, name)
        assert obj["metadata"]["ownerReferences"][0]["controller"] is True
    sts = await api.get("apps/v1", "statefulsets", "demo-broker")
    assert sts["spec"]["replicas"] == 3
    cluster = await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: ready_condition(o))
    cond = ready_condition(cluster)
    assert cond["status"] == "False" and cond["reason"] in ("Creating", "WaitingForBrokers")
    # kopf's state lives in tinystream.io annotations, not in the schema-pruned status.
    assert not any(k.startswith("kopf.zalando.org") for k in cluster["metadata"].get("annotations", {}))


@pytest.mark.timeout(60)
async def test_ready_pods_make_the_cluster_ready(api, operator):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o is not None)
    for i in range(3):  # what the StatefulSet controller and kubelet would do
        await api.create("v1", "pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"demo-broker-{i}", "namespace": NS,
                         "labels": {"tinystream.io/cluster": "demo", "app.kubernetes.io/component": "broker"}},
            "spec": {"containers": [{"name": "broker", "image": "tinystream:test"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    cluster = await api.wait_for(TS, "tinystreamclusters", "demo",
                                 lambda o: ready_condition(o).get("status") == "True")
    assert cluster["status"]["readyBrokers"] == 3 and cluster["status"]["phase"] == "Running"
    assert [b["pod"] for b in cluster["status"]["brokers"]] == ["demo-broker-0", "demo-broker-1", "demo-broker-2"]


@pytest.mark.timeout(60)
async def test_bad_topic_gets_ready_false_with_reason(api, operator):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("too-wide", replicationFactor=5))
    await api.create(TS, "topics", topic("orphan", cluster="nowhere"))
    wide = await api.wait_for(TS, "topics", "too-wide", lambda o: ready_condition(o))
    assert ready_condition(wide)["status"] == "False"
    assert ready_condition(wide)["reason"] == "ReplicationFactorTooLarge"
    assert "replicationFactor 5 exceeds the 3 broker(s)" in ready_condition(wide)["message"]
    orphan = await api.wait_for(TS, "topics", "orphan", lambda o: ready_condition(o))
    assert ready_condition(orphan)["reason"] == "ClusterNotFound"


@pytest.mark.timeout(60)
async def test_fixing_a_bad_topic_clears_the_condition(api, operator, controller):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders", replicationFactor=5))
    await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("reason") == "ReplicationFactorTooLarge")
    await api.patch(TS, "topics", "orders", {"spec": {"replicationFactor": 3}})
    fixed = await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True")
    assert len(fixed["status"]["partitions"]) == 3
    assert all(len(p["replicas"]) == 3 and p["isr"] == p["replicas"] for p in fixed["status"]["partitions"])


@pytest.mark.timeout(60)
async def test_topic_gets_placement_in_status(api, operator, controller):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders", config={"retention.ms": "60000"}))
    obj = await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True")
    parts = obj["status"]["partitions"]
    assert [p["partition"] for p in parts] == [0, 1, 2]
    assert all(p["leader"] == p["replicas"][0] and len(set(p["replicas"])) == 2 for p in parts)
    assert obj["status"]["topicName"] == "orders"
    # Growing the topic reaches the controller and the status.
    await api.patch(TS, "topics", "orders", {"spec": {"partitions": 5}})
    grown = await api.wait_for(TS, "topics", "orders", lambda o: len(o["status"].get("partitions", [])) == 5)
    assert grown["status"]["partitions"][4]["partition"] == 4


@pytest.mark.timeout(60)
async def test_topic_delete_releases_finalizer_when_cluster_is_gone(api, operator, controller):
    await api.create(TS, "topics", topic("orphan", cluster="gone"))
    await api.wait_for(TS, "topics", "orphan",
                       lambda o: "tinystream.io/finalizer" in o["metadata"].get("finalizers", []))
    await api.delete(TS, "topics", "orphan")
    await api.wait_for(TS, "topics", "orphan", lambda o: o is None)
    assert controller.deleted == []  # nothing to delete on a cluster that does not exist


@pytest.mark.timeout(60)
async def test_topic_delete_removes_data_then_releases(api, operator, controller):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders"))
    await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True")
    await api.delete(TS, "topics", "orders")
    await api.wait_for(TS, "topics", "orders", lambda o: o is None)
    assert [name for _, name in controller.deleted] == ["orders"]


@pytest.mark.timeout(60)
async def test_topic_delete_releases_when_controller_stays_unavailable(api, operator, controller):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders"))
    await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True")
    controller.available = False
    await api.delete(TS, "topics", "orders")
    await api.wait_for(TS, "topics", "orders", lambda o: o is None, timeout=20)


@pytest.mark.timeout(60)
async def test_operator_restart_resumes_from_status(kmock, api, controller):
    async with running_operator(str(kmock.url), controller=controller):
        await api.create(TS, "tinystreamclusters", CLUSTER)
        await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o is not None)
    # A change made while no operator runs is picked up by the next one (resume/update).
    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"brokers": 4}})
    async with running_operator(str(kmock.url), controller=controller):
        sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o["spec"]["replicas"] == 4)
    assert sts["metadata"]["ownerReferences"][0]["uid"] == "uid-demo"
