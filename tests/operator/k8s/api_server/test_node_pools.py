"""TinyStreamNodePool against the real API server and controller-manager (node_pools.py).

What this tier shows: the CRD as the server admits it (bad replicas and storage refused), two pools of
one cluster become two StatefulSets whose pods get distinct ids kept in status.nodeIds and in each pool's
ids ConfigMap; scaling pool A up and pool B down leaves every surviving pod its id; B's scale-down moves
the replicas off its highest id (the controller's drain) before its StatefulSet shrinks; a pool whose
cluster has not opted in says so and makes nothing. The StatefulSet controller makes the pods (no kubelet
runs them: they stay Pending), so no broker starts here; the kind suite would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import pytest
from fake_controller import FakeController
from kmock_helpers import ready_condition, running_operator
from real_api import connection
from test_ca_rotation import kubelet_stand_in as rotation_stand_in
from test_crd_admission import refusal

from tinystream.operator.k8s.ca_lifecycle import CA_ANNOTATION
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.reconcile import DrainBrokers, EndScaleDownDrain
from tinystream.operator.k8s.resources import config_hash

pytestmark = pytest.mark.timeout(120)
TS = "tinystream.io/v1alpha1"
POOLS = "tinystreamnodepools"
REBALANCES = "tinystreamrebalances"


def cluster(*, enabled: bool = True) -> dict:
    annotations = {"tinystream.io/node-pools": "enabled"} if enabled else {}
    return {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo", "annotations": annotations},
            "spec": {"brokers": 1}}


def pool(name: str, replicas: int, **spec) -> dict:
    return {"apiVersion": TS, "kind": "TinyStreamNodePool",
            "metadata": {"name": name, "labels": {"tinystream.io/cluster": "demo"}},
            "spec": {"replicas": replicas, "storage": {"size": "1Gi"}, **spec}}


def ids_of(obj: dict | None) -> list[int]:
    return list(((obj or {}).get("status") or {}).get("nodeIds") or [])


def replicas(sts: dict | None) -> int | None:
    return None if sts is None else sts["spec"]["replicas"]


async def test_the_server_refuses_bad_pools(control_plane, namespace) -> None:
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=30s", f"crd/{POOLS}.tinystream.io")
    status, body = create_pool(control_plane, namespace, pool("a", 2))
    assert status == 201, body
    for bad, expected in [(pool("a", -1), "spec.replicas"), (pool("a", 101), "spec.replicas"),
                          (pool("a", 1, storage={"size": "1Gi", "volumes": [{"id": 0, "size": "1Gi"}]}),
                           "exclusive"),
                          (pool("a", 1, storage={"size": "lots"}), "spec.storage.size")]:
        assert expected in refusal(*create_pool(control_plane, namespace, bad)), bad


def create_pool(control_plane, namespace: str, obj: dict) -> tuple[int, dict]:
    return control_plane.request("POST", f"/apis/{TS}/namespaces/{namespace}/{POOLS}?fieldValidation=Strict"
                                         "&dryRun=All", obj)


async def test_a_pool_of_a_cluster_without_opt_in_makes_nothing(control_plane, namespace, api) -> None:
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane),
                                namespace=namespace):
        await api.create(TS, "tinystreamclusters", cluster(enabled=False))
        await api.create(TS, POOLS, pool("a", 2))
        found = await api.wait_for(TS, POOLS, "a", lambda o: ready_condition(o).get("reason") == "NodePoolsNotEnabled")
        assert ids_of(found) == []
        assert await api.get("apps/v1", "statefulsets", "demo-a") is None


async def test_two_pools_get_distinct_stable_ids_and_a_scale_down_drains_first(control_plane, namespace, api) -> None:
    controller = FakeController()
    key = ClusterKey(namespace, "demo")
    async with running_operator(control_plane.url, controller=controller, connection=connection(control_plane),
                                namespace=namespace):
        await api.create(TS, "tinystreamclusters", cluster())
        await api.create(TS, POOLS, pool("a", 2))
        a = await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 2)
        await api.create(TS, POOLS, pool("b", 3))
        b = await api.wait_for(TS, POOLS, "b", lambda o: len(ids_of(o)) == 3)
        assert not set(ids_of(a)) & set(ids_of(b)), (ids_of(a), ids_of(b))
        for name, count in (("a", 2), ("b", 3)):
            sts = await api.wait_for("apps/v1", "statefulsets", f"demo-{name}", lambda s, n=count: replicas(s) == n)
            assert sts["spec"]["selector"]["matchLabels"]["tinystream.io/pool"] == name
        assert await api.get("apps/v1", "statefulsets", "demo-broker") is None  # the cluster makes none
        # The cluster's status names the pools' pods by their ids (Pending here: no kubelet runs them).
        everyone = sorted(ids_of(a) + ids_of(b))
        status = await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: sorted(
            x["id"] for x in ((o or {}).get("status") or {}).get("brokers") or []) == everyone)
        assert {x["pod"] for x in status["status"]["brokers"]} == {
            f"demo-{name}-{i}" for name, count in (("a", 2), ("b", 3)) for i in range(count)}
        ids_file = (await api.get("v1", "configmaps", "demo-b-ids"))["data"]["node-ids"]
        assert ids_file == "".join(f"{i} {n}\n" for i, n in enumerate(ids_of(b)))
        # Pool b's highest id holds a replica: the drain comes first, its StatefulSet keeps 3 pods.
        top = ids_of(b)[-1]
        controller.placement[(key, "orders")] = [(ids_of(a)[0], top)]
        await api.patch(TS, POOLS, "a", {"spec": {"replicas": 3}})
        await api.patch(TS, POOLS, "b", {"spec": {"replicas": 2}})
        await api.wait_for(TS, POOLS, "b", lambda o: ready_condition(o).get("reason") == "ScaleDownDraining")
        assert DrainBrokers((top,)) in controller.broker_calls
        assert replicas(await api.get("apps/v1", "statefulsets", "demo-b")) == 3
        controller.placement[(key, "orders")] = [(ids_of(a)[0], ids_of(b)[0])]  # the controller moved it
        await api.wait_for("apps/v1", "statefulsets", "demo-b", lambda s: replicas(s) == 2)
        b_after = await api.wait_for(TS, POOLS, "b", lambda o: len(ids_of(o)) == 2)
        a_after = await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 3)
        assert ids_of(b_after) == ids_of(b)[:2] and ids_of(a_after)[:2] == ids_of(a)  # survivors keep theirs
        assert ids_of(a_after)[2] not in ids_of(b_after)
        await api.wait_for("apps/v1", "statefulsets", "demo-a", lambda s: replicas(s) == 3)


@contextlib.asynccontextmanager
async def kubelet_stand_in(api, prefix: str):
    """Mark each pod of `prefix` Ready as the StatefulSet controller makes it; yields the (name, uid) of
    every pod in the order first seen."""
    seen: list[tuple[str, str]] = []

    async def loop() -> None:
        while True:
            for pod in await api.list("v1", "pods"):
                meta = pod["metadata"]
                if not meta["name"].startswith(prefix) or meta.get("deletionTimestamp"):
                    continue
                if (meta["name"], meta["uid"]) not in seen:
                    seen.append((meta["name"], meta["uid"]))
                await api.mark_pod_ready(pod)
            await asyncio.sleep(0.2)

    task = asyncio.create_task(loop())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_new_pool_template_rolls_that_pool_one_pod_at_a_time_highest_id_first(
        control_plane, namespace, api) -> None:
    async with kubelet_stand_in(api, "demo-") as seen, running_operator(
            control_plane.url, controller=FakeController(), connection=connection(control_plane), namespace=namespace):
        await api.create(TS, "tinystreamclusters", cluster())
        await api.create(TS, POOLS, pool("a", 2))
        await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 2)
        await api.create(TS, POOLS, pool("b", 1))
        await api.wait_for("apps/v1", "statefulsets", "demo-b", lambda s: replicas(s) == 1)
        names = {"demo-a-0", "demo-a-1", "demo-b-0"}
        await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: sum(
            x["ready"] for x in ((o or {}).get("status") or {}).get("brokers") or []) == 3, timeout=30)
        assert {name for name, _ in seen} == names and len(seen) == 3
        await api.patch(TS, POOLS, "a", {"spec": {"resources": {"requests": {"cpu": "100m"}}}})
        await api.wait_for(TS, POOLS, "a", lambda _: [n for n, _ in seen].count("demo-a-0") == 2, timeout=60)
        restarted = [name for name, _ in seen[3:]]
        assert restarted == ["demo-a-1", "demo-a-0"]  # one at a time (each new pod ready first), highest id first
        assert [n for n, _ in seen].count("demo-b-0") == 1  # the other pool is not rolled
        sts = await api.get("apps/v1", "statefulsets", "demo-a")
        assert sts["spec"]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m"}}


async def test_a_cluster_ca_rotation_rolls_every_pool_one_broker_at_a_time(control_plane, namespace, api) -> None:
    """The rotation's three rolls reach both pools' StatefulSets (node_pools.with_ca_markers), each waits for
    every pool's brokers (ca_lifecycle.pools_rolled_marker), and never two brokers are down at once."""
    async with rotation_stand_in(api, "demo-") as pods, running_operator(
            control_plane.url, controller=FakeController(), connection=connection(control_plane), namespace=namespace):
        await api.create(TS, "tinystreamclusters", cluster())
        await api.create(TS, POOLS, pool("a", 2))
        await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 2)
        await api.create(TS, POOLS, pool("b", 1))
        await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: sum(
            x["ready"] for x in ((o or {}).get("status") or {}).get("brokers") or []) == 3, timeout=30)
        assert (await api.get(TS, "tinystreamclusters", "demo"))["status"]["clusterCa"]["generation"] == 0
        await api.patch(TS, "tinystreamclusters", "demo",
                        {"metadata": {"annotations": {"tinystream.io/force-renew-ca": "now"}}})
        done = await api.wait_for(TS, "tinystreamclusters", "demo",
                                  lambda o: (o["status"].get("clusterCa") or {}).get("phase") == "Steady"
                                  and o["status"]["clusterCa"]["generation"] == 1, timeout=110)
    assert condition_reason(done, "ClusterCa") == "CaValid"
    for name in ("demo-a", "demo-b"):
        sts = await api.get("apps/v1", "statefulsets", name)
        assert sts["spec"]["template"]["metadata"]["annotations"][CA_ANNOTATION] == "ca-1"
    assert max(int(n) for n in pods.pop("down")) <= 1  # one broker at a time, across the pools
    assert sorted(len(uids) for uids in pods.values()) == [4, 4, 4], pods  # each made again by each of 3 rolls


def condition_reason(obj: dict, kind: str) -> str:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)["reason"]


def storage_condition(obj: dict | None) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or []
                 if c["type"] == "StorageResized"), {})


def claim_size(sts: dict) -> str:
    return sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]


def make_storage(control_plane, namespace: str, claims: list[str]) -> str:
    """An expandable StorageClass and a PersistentVolume pre-bound to each claim (as api_server/
    test_volume_expansion.py: the PV controller binds them, no provisioner runs); the class's name."""
    name = f"{namespace}-expandable"
    status, body = control_plane.request("POST", "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": "resizer.example.com", "allowVolumeExpansion": True,
        "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain"})
    assert status == 201, body
    for claim in claims:
        status, body = control_plane.request("POST", "/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{namespace}-{claim}"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": name, "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": namespace, "name": claim},
                     "csi": {"driver": "resizer.example.com", "volumeHandle": f"{namespace}-{claim}"}}})
        assert status == 201, body
    return name


async def test_a_larger_pool_size_expands_its_claims_and_recreates_its_statefulset_without_restarts(
        control_plane, namespace, api) -> None:
    """Pool a's spec.storage.size grows: its claims are patched (the API server's resize admission accepts
    them), its StatefulSet is deleted orphaning the pods and made again with the larger claim template, and
    adopts the pods at the same revision (no restart); pool b is left alone. A smaller size is refused."""
    expandable = make_storage(control_plane, namespace, ["data-demo-a-0", "data-demo-a-1", "data-demo-b-0"])
    storage = {"size": "1Gi", "storageClass": expandable}
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane),
                                namespace=namespace):
        await api.create(TS, "tinystreamclusters", cluster())
        await api.create(TS, POOLS, pool("a", 2, storage=storage))
        await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 2)
        await api.create(TS, POOLS, pool("b", 1, storage=storage))
        for claim in ("data-demo-a-0", "data-demo-a-1", "data-demo-b-0"):
            await api.wait_for("v1", "persistentvolumeclaims", claim,
                               lambda o: ((o or {}).get("status") or {}).get("phase") == "Bound", timeout=60)
        pods = {name: (await api.wait_for("v1", "pods", name, lambda o: o is not None, timeout=30))["metadata"]["uid"]
                for name in ("demo-a-0", "demo-a-1", "demo-b-0")}
        old_a, old_b = (await api.get("apps/v1", "statefulsets", "demo-a"), await api.get("apps/v1", "statefulsets", "demo-b"))
        await api.wait_for(TS, POOLS, "a", lambda o: storage_condition(o).get("reason") == "ClaimsAtRequestedSize",
                           timeout=30)

        await api.patch(TS, POOLS, "a", {"spec": {"storage": {"size": "2Gi"}}})
        sts = await api.wait_for("apps/v1", "statefulsets", "demo-a", lambda o: o is not None and o["metadata"][
            "uid"] != old_a["metadata"]["uid"] and bool(o.get("status", {}).get("updateRevision")), timeout=60)
        assert claim_size(sts) == "2Gi"
        for claim in ("data-demo-a-0", "data-demo-a-1"):
            assert (await api.get("v1", "persistentvolumeclaims", claim))["spec"]["resources"]["requests"][
                "storage"] == "2Gi"
        for name in ("demo-a-0", "demo-a-1"):  # adopted, same uid, same revision: no restart
            pod = await api.wait_for("v1", "pods", name, lambda o: any(
                r["uid"] == sts["metadata"]["uid"] for r in (o or {}).get("metadata", {}).get("ownerReferences") or ()),
                timeout=30)
            assert pod["metadata"]["uid"] == pods[name]
            assert pod["metadata"]["labels"]["controller-revision-hash"] == sts["status"]["updateRevision"]
        resizing = await api.wait_for(TS, POOLS, "a", lambda o: storage_condition(o).get("reason") == "ClaimsResizing"
                                      and "capacity 1Gi" in storage_condition(o).get("message", ""), timeout=30)
        assert "data-demo-a-0 requested 2Gi, capacity 1Gi" in storage_condition(resizing)["message"]
        b = await api.get("apps/v1", "statefulsets", "demo-b")
        assert b["metadata"]["uid"] == old_b["metadata"]["uid"] and claim_size(b) == "1Gi"
        assert (await api.get("v1", "persistentvolumeclaims", "data-demo-b-0"))["spec"]["resources"]["requests"][
            "storage"] == "1Gi"
        assert {p["metadata"]["uid"] for p in await api.list("v1", "pods")} == set(pods.values())

        status, body = control_plane.request(
            "PATCH", f"/apis/{TS}/namespaces/{namespace}/{POOLS}/a", {"spec": {"storage": {"size": "1Gi"}}},
            content_type="application/merge-patch+json")
        assert status == 422 and "storage.size cannot shrink" in body["message"], body


async def test_a_pool_cluster_serves_a_nodeport_listener_with_a_service_per_pool_broker(
        control_plane, namespace, api) -> None:
    """Each pool broker gets its Service (by its broker id, selecting its pool pod), the API server allocates
    the node ports, the brokers' ConfigMap names every pool broker's port, and each pool's pod template
    carries that ConfigMap's hash (a new address restarts the pool's pods, as the cluster's own)."""
    external = {"listeners": {"tls": False, "authentication": {"type": "scram-sha-512"},
                              "external": [{"name": "outside", "port": 9094, "type": "nodeport", "tls": False}]}}
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane),
                                namespace=namespace):
        await api.create(TS, "tinystreamclusters", {**cluster(), "spec": {"brokers": 1, **external}})
        await api.create(TS, POOLS, pool("a", 2))
        a = await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 2)
        await api.create(TS, POOLS, pool("b", 1))
        b = await api.wait_for(TS, POOLS, "b", lambda o: len(ids_of(o)) == 1)
        pods = {**{f"demo-a-{n}": i for n, i in enumerate(ids_of(a))}, "demo-b-0": ids_of(b)[0]}
        ports = {}
        for pod, broker in pods.items():
            service = await api.wait_for("v1", "services", f"demo-outside-{broker}", lambda o: o is not None, timeout=30)
            assert service["spec"]["type"] == "NodePort"
            assert service["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == pod
            ports[broker] = service["spec"]["ports"][0]["nodePort"]
        config = await api.wait_for("v1", "configmaps", "demo-config", lambda o: len(
            ((o or {}).get("data") or {}).get("external-listeners", "").splitlines()) == 3, timeout=30)
        assert config["data"]["external-listeners"].splitlines() == [
            f"{broker} OUTSIDE - {ports[broker]}" for broker in sorted(ports)]
        for name in ("demo-a", "demo-b"):
            sts = await api.wait_for("apps/v1", "statefulsets", name, lambda o: o is not None and o["spec"]["template"][
                "metadata"]["annotations"]["tinystream.io/config-hash"] == config_hash(config), timeout=30)
            assert "HOST_IP" in {e["name"] for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
        demo = await api.wait_for(TS, "tinystreamclusters", "demo",
                                  lambda o: ready_condition(o).get("reason") == "NodePools", timeout=30)
        assert ready_condition(demo)["status"] == "True"


async def test_a_rebalance_of_a_pool_cluster_moves_replicas_onto_a_grown_pool(control_plane, namespace, api) -> None:
    """TinyStreamRebalance with pools: the proposal's brokers are the pools' kept ids (status.nodeIds up to
    replicas), so after pool a grows, replicas move onto its new broker; an id no pool holds is refused."""
    controller = FakeController(brokers=(0, 1))
    key = ClusterKey(namespace, "demo")
    async with running_operator(control_plane.url, controller=controller, connection=connection(control_plane),
                                namespace=namespace):
        await api.create(TS, "tinystreamclusters", cluster())
        await api.create(TS, POOLS, pool("a", 2))
        await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 2)
        controller.placement[(key, "orders")] = [(0, 1), (1, 0)] * 3
        await api.patch(TS, POOLS, "a", {"spec": {"replicas": 3}})
        grown = await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 3)
        new = ids_of(grown)[2]
        # Every pass of a pool not shrinking ends a scale-down drain left on its ids (an id given out again).
        await api.wait_for(TS, POOLS, "a", lambda _: EndScaleDownDrain((0, 1, new)) in controller.broker_calls)

        await api.create(TS, REBALANCES, rebalance("grow", mode="add-brokers", brokers=[new]))
        ready = await api.wait_for(TS, REBALANCES, "grow", rebalance_state("ProposalReady"), timeout=30)
        assert controller.rebalance_members[-1] == {0, 1, new}
        assert all(new in move["after"] for move in ready["status"]["proposal"]), ready["status"]["proposal"]
        await api.patch(TS, REBALANCES, "grow", {"metadata": {"annotations": {"tinystream.io/rebalance": "approve"}}})
        await api.wait_for(TS, REBALANCES, "grow", rebalance_state("Ready"), timeout=30)
        placement = controller.placement[(key, "orders")]
        assert Counter(b for reps in placement for b in reps) == {0: 4, 1: 4, new: 4}

        await api.create(TS, REBALANCES, rebalance("stray", mode="add-brokers", brokers=[new + 5]))
        refused = await api.wait_for(TS, REBALANCES, "stray", rebalance_state("NotReady"), timeout=30)
        assert f"broker(s) [{new + 5}] are in no node pool of cluster demo" in refused["status"]["message"]


async def test_a_rebalance_of_a_pool_cluster_places_nothing_on_a_shrinking_pools_leaving_ids(
        control_plane, namespace, api) -> None:
    """Pool b scaled down (its drain held back by the controller): a full rebalance leaves b's leaving id
    out of the brokers it balances over."""
    controller = FakeController(brokers=(0, 1, 2))
    key = ClusterKey(namespace, "demo")
    async with running_operator(control_plane.url, controller=controller, connection=connection(control_plane),
                                namespace=namespace):
        await api.create(TS, "tinystreamclusters", cluster())
        await api.create(TS, POOLS, pool("a", 1))
        a = await api.wait_for(TS, POOLS, "a", lambda o: len(ids_of(o)) == 1)
        await api.create(TS, POOLS, pool("b", 2))
        b = await api.wait_for(TS, POOLS, "b", lambda o: len(ids_of(o)) == 2)
        await api.wait_for("apps/v1", "statefulsets", "demo-b", lambda s: replicas(s) == 2)
        leaving = ids_of(b)[1]
        controller.placement[(key, "orders")] = [(ids_of(a)[0], leaving)]  # the drain never ends here
        await api.patch(TS, POOLS, "b", {"spec": {"replicas": 1}})
        await api.wait_for(TS, POOLS, "b", lambda o: ready_condition(o).get("reason") == "ScaleDownDraining")
        await api.create(TS, REBALANCES, rebalance("spread"))
        ready = await api.wait_for(TS, REBALANCES, "spread", rebalance_state("ProposalReady"), timeout=30)
        assert controller.rebalance_members[-1] == {ids_of(a)[0], ids_of(b)[0]}
        assert all(leaving not in move["after"] for move in ready["status"]["proposal"] or ())


def rebalance(name: str, **spec) -> dict:
    return {"apiVersion": TS, "kind": "TinyStreamRebalance", "metadata": {"name": name},
            "spec": {"cluster": "demo", **spec}}


def rebalance_state(name: str):
    return lambda o: o is not None and (o.get("status") or {}).get("state") == name


async def test_pool_broker_adopts_a_running_clusters_brokers_without_restarting_or_recreating_them(
        control_plane, namespace, api) -> None:
    """A cluster without pools runs 2 brokers (StatefulSet demo-broker; the pods marked Ready by the test,
    the claims made by the StatefulSet controller). Enabling pools with pool `broker` takes them over:
    ids 0 and 1 as before, the same StatefulSet (not re-created, its spec not changed), pods and claims.
    A pool `broker` whose replicas differ from the cluster's is refused first and changes nothing."""
    controller = FakeController(brokers=(0, 1))
    async with kubelet_stand_in(api, "demo-") as seen, running_operator(
            control_plane.url, controller=controller, connection=connection(control_plane), namespace=namespace):
        body = cluster(enabled=False)
        body["spec"]["brokers"] = 2
        await api.create(TS, "tinystreamclusters", body)
        await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: ready_condition(o).get("status") == "True",
                           timeout=60)
        before = await api.get("apps/v1", "statefulsets", "demo-broker")
        pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await api.list("v1", "pods")}
        claims = {c["metadata"]["name"]: c["metadata"]["uid"]
                  for c in await api.list("v1", "persistentvolumeclaims")}
        assert set(pods) == {"demo-broker-0", "demo-broker-1"} and set(claims) == {
            "data-demo-broker-0", "data-demo-broker-1"}, (pods, claims)

        await api.create(TS, POOLS, pool("broker", 3))
        await api.patch(TS, "tinystreamclusters", "demo",
                        {"metadata": {"annotations": {"tinystream.io/node-pools": "enabled"}}})
        refused = await api.wait_for(TS, POOLS, "broker",
                                     lambda o: ready_condition(o).get("reason") == "AdoptionRefused")
        assert "spec.replicas 3 must equal the cluster's spec.brokers 2" in ready_condition(refused)["message"]
        await api.wait_for(TS, "tinystreamclusters", "demo",
                           lambda o: ready_condition(o).get("reason") == "BrokersNotAdopted")
        assert replicas(await api.get("apps/v1", "statefulsets", "demo-broker")) == 2

        await api.patch(TS, POOLS, "broker", {"spec": {"replicas": 2}})
        adopted = await api.wait_for(TS, POOLS, "broker", lambda o: ready_condition(o).get("reason") == "PoolReady")
        assert ids_of(adopted) == [0, 1]
        status = await api.wait_for(TS, "tinystreamclusters", "demo", lambda o: ready_condition(o).get(
            "reason") == "NodePools" and len((o.get("status") or {}).get("brokers") or []) == 2)
        assert sorted((b["id"], b["pod"]) for b in status["status"]["brokers"]) == [
            (0, "demo-broker-0"), (1, "demo-broker-1")]
        after = await api.get("apps/v1", "statefulsets", "demo-broker")
        assert after["metadata"]["uid"] == before["metadata"]["uid"]  # not re-created
        assert after["metadata"]["generation"] == before["metadata"]["generation"]  # its spec untouched: no roll
        assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in await api.list("v1", "pods")} == pods
        assert {c["metadata"]["name"]: c["metadata"]["uid"]
                for c in await api.list("v1", "persistentvolumeclaims")} == claims
        assert await api.get("v1", "configmaps", "demo-broker-ids") is None  # ids are the ordinals

        # Then as any pool cluster: a new pool takes the next id, the adopted pool scales down draining first.
        await api.create(TS, POOLS, pool("b", 1))
        b = await api.wait_for(TS, POOLS, "b", lambda o: len(ids_of(o)) == 1)
        assert ids_of(b) == [2]
        controller.placement[(ClusterKey(namespace, "demo"), "orders")] = [(0, 1)]
        await api.patch(TS, POOLS, "broker", {"spec": {"replicas": 1}})
        await api.wait_for(TS, POOLS, "broker", lambda o: ready_condition(o).get("reason") == "ScaleDownDraining")
        assert DrainBrokers((1,)) in controller.broker_calls
        controller.placement[(ClusterKey(namespace, "demo"), "orders")] = [(0, 2)]  # the controller moved it
        await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda s: replicas(s) == 1)
        assert ids_of(await api.wait_for(TS, POOLS, "broker", lambda o: len(ids_of(o)) == 1)) == [0]
        assert ("demo-broker-0", pods["demo-broker-0"]) in seen
