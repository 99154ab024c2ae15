"""The operator, in-process, against KMock (a Kubernetes API mock server).

What a user does with kubectl, the test does over HTTP against the mock;
the operator runs exactly as in production (kopf, clusterwide), with a fake
controller behind its controller port. Each test gets a fresh mock and
operator, and works in a namespace of its own.
"""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'kopf', 'kmock')

import asyncio
import itertools
import time

import kmock
import kopf
import pytest
import pytest_asyncio
from fake_controller import FakeController
from kmock_helpers import Api, declare, ready_condition, running_operator

pytestmark = pytest.mark.timeout(60)
_namespaces = itertools.count()

TS = "tinystream.io/v1alpha1"
CLUSTER = {"apiVersion": TS, "kind": "TinyStreamCluster",
           "metadata": {"name": "demo", "generation": 1},
           "spec": {"brokers": 3}}


def topic(name, **spec):
    return {"apiVersion": TS, "kind": "Topic",
            "metadata": {"name": name},
            "spec": {"cluster": "demo", "partitions": 3, "replicationFactor": 2, **spec}}


@pytest_asyncio.fixture
async def world():
    controller = FakeController()
    async with kmock.KubernetesEmulator() as server, kmock.Server(server):
        declare(server)
        client = Api(str(server.url))
        async with running_operator(str(server.url), controller=controller):
            yield server, client, controller
        await client.close()


@pytest.fixture
def api(world):
    return world[1].in_namespace(f"ns{next(_namespaces)}")


@pytest.fixture
def controller(world):
    return world[2]


@pytest.fixture
def operator(world):
    return world


OWNED = [("apps/v1", "statefulsets", "demo-broker"), ("v1", "services", "demo-brokers"),
         ("v1", "services", "demo-kafka"), ("v1", "services", "demo-controller"),
         ("v1", "services", "demo-dashboard"), ("v1", "configmaps", "demo-config"),
         ("policy/v1", "poddisruptionbudgets", "demo-broker")]


async def test_cluster_create_makes_owned_objects_with_owner_refs(api, operator):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    uid = (await api.get(TS, "tinystreamclusters", "demo"))["metadata"]["uid"]
    for api_version, plural, name in OWNED:
        obj = await api.wait_for(api_version, plural, name, lambda o: o is not None)
        assert obj["metadata"]["ownerReferences"][0]["uid"] == uid, (plural, name)
        assert obj["metadata"]["ownerReferences"][0]["controller"] is True
    sts = await api.get("apps/v1", "statefulsets", "demo-broker")
    assert sts["spec"]["replicas"] == 3
    cluster = await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: ready_condition(o))
    cond = ready_condition(cluster)
    assert cond["status"] == "False" and cond["reason"] in ("Creating", "WaitingForBrokers")
    # kopf's state lives in tinystream.io annotations, not in the schema-pruned status.
    assert not any(k.startswith("kopf.zalando.org") for k in cluster["metadata"].get("annotations", {}))


async def test_ready_pods_make_the_cluster_ready(api, operator):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o is not None)
    for i in range(3):  # what the StatefulSet controller and kubelet would do
        await api.create("v1", "pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"demo-broker-{i}",
                         "labels": {"tinystream.io/cluster": "demo", "app.kubernetes.io/component": "broker"}},
            "spec": {"containers": [{"name": "broker", "image": "tinystream:test"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    cluster = await api.wait_for(TS, "tinystreamclusters", "demo",
                                 lambda o: ready_condition(o).get("status") == "True")
    assert cluster["status"]["readyBrokers"] == 3 and cluster["status"]["phase"] == "Running"
    assert [b["pod"] for b in cluster["status"]["brokers"]] == ["demo-broker-0", "demo-broker-1", "demo-broker-2"]


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


async def test_fixing_a_bad_topic_clears_the_condition(api, operator, controller):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders", replicationFactor=5))
    await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("reason") == "ReplicationFactorTooLarge")
    await api.patch(TS, "topics", "orders", {"spec": {"replicationFactor": 3}})
    fixed = await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True")
    assert len(fixed["status"]["partitions"]) == 3
    assert all(len(p["replicas"]) == 3 and p["isr"] == p["replicas"] for p in fixed["status"]["partitions"])


async def test_topic_state_changes_are_events(api, operator, monkeypatch):
    # KMock stores one Event per name (kopf's generateName collides), so the calls are recorded instead.
    events: list[tuple[str, str, str, str]] = []
    for kind, fn in (("Normal", "info"), ("Warning", "warn")):
        monkeypatch.setattr(kopf, fn, lambda body, *, reason, message, kind=kind:
                            events.append((kind, body["metadata"]["name"], reason, message)))
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders", replicationFactor=5))
    await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("reason") == "ReplicationFactorTooLarge")
    await api.patch(TS, "topics", "orders", {"spec": {"replicationFactor": 3}})
    await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True")
    mine = [e for e in events if e[1] == "orders"]
    assert mine[0][:3] == ("Warning", "orders", "ReplicationFactorTooLarge")
    assert "replicationFactor 5 exceeds" in mine[0][3]
    assert mine[-1] == ("Normal", "orders", "TopicReady", "3 partitions, replication factor 3")
    assert len(mine) == 2, "\n".join(map(repr, mine))  # one per change of state, not one per reconcile


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


async def test_topic_delete_releases_finalizer_when_cluster_is_gone(api, operator, controller):
    await api.create(TS, "topics", topic("orphan", cluster="gone"))
    await api.wait_for(TS, "topics", "orphan",
                       lambda o: "tinystream.io/finalizer" in o["metadata"].get("finalizers", []))
    await api.delete(TS, "topics", "orphan")
    await api.wait_for(TS, "topics", "orphan", lambda o: o is None)
    assert not [k for k, _ in controller.deleted if k.namespace == api.ns]  # no cluster, nothing to delete


async def test_topic_delete_removes_data_then_releases(api, operator, controller):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders"))
    await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True")
    await api.delete(TS, "topics", "orders")
    await api.wait_for(TS, "topics", "orders", lambda o: o is None)
    assert [name for k, name in controller.deleted if k.namespace == api.ns] == ["orders"]


async def test_topic_delete_releases_when_controller_stays_unavailable(api, operator, controller):
    await api.create(TS, "tinystreamclusters", CLUSTER)
    await api.create(TS, "topics", topic("orders"))
    await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True")
    controller.available = False
    try:
        await api.delete(TS, "topics", "orders")
        await api.wait_for(TS, "topics", "orders", lambda o: o is None, timeout=20)
    finally:
        controller.available = True


async def test_crash_looping_broker_pod_ends_its_session_at_once(api, operator, controller):
    from tinystream.operator.k8s.reconcile import BrokerDown

    await api.create(TS, "tinystreamclusters", CLUSTER)
    labels = {"tinystream.io/cluster": "demo", "app.kubernetes.io/component": "broker",
              "app.kubernetes.io/managed-by": "tinystream-operator"}
    status = {"containerStatuses": [{"name": "broker", "restartCount": 0, "state": {"running": {}}}]}
    await api.create("v1", "pods", {"apiVersion": "v1", "kind": "Pod",
                                    "metadata": {"name": "demo-broker-1", "labels": labels},
                                    "spec": {"containers": [{"name": "broker"}]}, "status": status})
    await api.patch("v1", "pods", "demo-broker-1", {"status": {"containerStatuses": [{
        "name": "broker", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}})
    deadline = time.monotonic() + 15
    while not any(isinstance(a, BrokerDown) for a in controller.broker_calls):
        assert time.monotonic() < deadline, "the Pod event did not reach the controller"
        await asyncio.sleep(0.1)
    down = next(a for a in controller.broker_calls if isinstance(a, BrokerDown))
    assert down.broker_id == 1 and "CrashLoopBackOff" in down.reason


async def test_a_broker_on_a_node_without_the_rack_label_is_a_warning_once(api, operator, monkeypatch):
    events: list[tuple[str, str, str]] = []
    monkeypatch.setattr(kopf, "warn", lambda body, *, reason, message: events.append(
        (body["metadata"]["name"], reason, message)))
    zone = "topology.kubernetes.io/zone"
    nodes = api.in_namespace(None)
    await nodes.create("v1", "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "labelled",
                                                                                       "labels": {zone: "zone-a"}}})
    await nodes.create("v1", "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}})
    await api.create(TS, "tinystreamclusters", {**CLUSTER, "metadata": {"name": "racked", "generation": 1},
                                                "spec": {"brokers": 2, "rack": {"topologyKey": zone}}})
    await api.wait_for("apps/v1", "statefulsets", "racked-broker", lambda o: o is not None)
    for i, node in enumerate(("labelled", "bare")):
        await api.create("v1", "pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"racked-broker-{i}",
                         "labels": {"tinystream.io/cluster": "racked", "app.kubernetes.io/component": "broker"}},
            "spec": {"nodeName": node, "containers": [{"name": "broker", "image": "tinystream:test"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    cluster = await api.wait_for(TS, "tinystreamclusters", "racked", lambda o: len(
        [b for b in ((o or {}).get("status") or {}).get("brokers") or () if b.get("pod")]) == 2)
    assert [b.get("rack") for b in cluster["status"]["brokers"]] == ["zone-a", None]
    await asyncio.sleep(1.5)  # a few more health passes (0.5 s apart): still one Event
    missing = [e for e in events if e[1] == "RackLabelMissing"]
    assert missing == [("racked", "RackLabelMissing", f"racked-broker-1: node bare has no label {zone}; "
                                                       "the broker runs without broker.rack")], events
