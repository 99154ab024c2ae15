"""TinyStreamNodePool planning (node_pools.py), pure: ids, the pool's StatefulSet, scale-down, opt-in.

A cluster without the node-pools annotation must render exactly what it did before pools existed: the
digests below are of `owned_objects` for three specs as rendered by main before this change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess

import pytest

from tinystream.operator.k8s.broker_identity import AUDIENCE, review_principal
from tinystream.operator.k8s.ca_lifecycle import CA_ANNOTATION, CLIENTS, pools_rolled_marker
from tinystream.operator.k8s.certificates import broker_dns_names
from tinystream.operator.k8s.conditions import PoolReason
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext, PartitionView
from tinystream.operator.k8s.node_pools import (
    ID_SCRIPT,
    NodeIdsError,
    PoolObserved,
    PoolSpec,
    grow_ids,
    id_ranges,
    other_pools,
    plan_pool,
    plan_pool_roll,
    pool_broker_pods,
    pool_brokers,
    pool_cluster,
    pool_members,
    pool_pod_ids,
    pool_statefulset,
    statefulset_name,
    with_ca_markers,
)
from tinystream.operator.k8s.reconcile import (
    Apply,
    BrokerPod,
    Delete,
    DeletePod,
    DrainBrokers,
    EndScaleDownDrain,
    MoveLeadership,
    Observed,
    plan_cluster,
)
from tinystream.operator.k8s.resources import owned_objects
from tinystream.operator.k8s.volume_expansion import ExpandClaim, StorageClassView, claims_of

CTX = OperatorContext(broker_image="tinystream:0.1.0")  # the default image when the goldens were taken
BEFORE_POOLS = {  # sha256 of json.dumps(owned_objects(...), sort_keys=True) on main before node pools
    "minimal": "7082dbb91b5cf329fe8bb65a7874627773fb9b9a83dd8afb2571eac621b15f48",
    "jbod-template": "4302cd369eb774e659bc13176af03c90d4f9a7cd09cec2c1dc4090a68dcd20c5",
    "external-scram": "f9932d2cdb48ebc17c082e1407a8b24e6ac9395d0d11767424357f3a70e73fe7",
}
SPECS = {
    "minimal": {"metadata": {"name": "demo", "namespace": "ns", "uid": "u1"}, "spec": {"brokers": 3}},
    "jbod-template": {"metadata": {"name": "big", "namespace": "ns", "uid": "u2"}, "spec": {
        "brokers": 2, "storage": {"volumes": [{"id": 0, "size": "5Gi"}, {"id": 1, "size": "7Gi", "storageClass": "fast"}]},
        "resources": {"requests": {"cpu": "1"}}, "template": {"pod": {
            "metadata": {"labels": {"team": "a"}}, "tolerations": [{"key": "k", "operator": "Exists"}]}},
        "rack": {"topologyKey": "zone"}}},
    "external-scram": {"metadata": {"name": "ext", "namespace": "ns", "uid": "u3"}, "spec": {
        "brokers": 3, "listeners": {"tls": False, "authentication": {"type": "scram-sha-512"},
                                    "external": [{"name": "outside", "port": 9094, "type": "nodeport"}]}}},
}


def cluster(*, pools: bool = True, **spec) -> ClusterSpec:
    annotations = {"tinystream.io/node-pools": "enabled"} if pools else {}
    return ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "ns", "uid": "u",
                                                   "annotations": annotations}, "spec": {"brokers": 3, **spec}})


def pool(name: str = "a", replicas: int = 3, ids: tuple[int, ...] = (), **spec) -> PoolSpec:
    return PoolSpec.from_resource({"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                                                "labels": {"tinystream.io/cluster": "demo"}},
                                   "spec": {"replicas": replicas, **spec}, "status": {"nodeIds": list(ids)}})


def plan(p: PoolSpec, *, current: int | None = None, taken=(), partitions=None, c: ClusterSpec | None = None,
         other_brokers: int = 3):
    observed = PoolObserved(current=current, taken=frozenset(taken), other_brokers=other_brokers,
                            partitions=partitions)
    return plan_pool(cluster() if c is None else c, p, observed, ctx=CTX)


def container(sts: dict) -> dict:
    return sts["spec"]["template"]["spec"]["containers"][0]


# --- a cluster without pools is unchanged ------------------------------------------------

@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_cluster_without_pools_renders_byte_identical_objects(name):
    body = SPECS[name]
    objects = owned_objects(ClusterSpec.from_resource(body), CTX, replicas=body["spec"]["brokers"])
    assert hashlib.sha256(json.dumps(objects, sort_keys=True).encode()).hexdigest() == BEFORE_POOLS[name]


def test_a_cluster_with_pools_makes_no_statefulset_of_its_own():
    kinds = [o["kind"] for o in owned_objects(cluster(), CTX, replicas=3)]
    assert "StatefulSet" not in kinds and "ConfigMap" in kinds and "Service" in kinds
    result = plan_cluster(cluster(), None, Observed(), ctx=CTX)
    assert not any(isinstance(a, Apply) and a.key[0] == "StatefulSet" for a in result.actions)
    assert result.condition.reason == "NodePools" and result.condition.status is True


# --- ids ----------------------------------------------------------------------------------

def test_ids_grow_ascending_above_the_pools_largest_and_skip_taken_ones():
    assert grow_ids((), wanted=3, taken={1}) == (0, 2, 3)
    assert grow_ids((0, 2), wanted=4, taken={3, 4}) == (0, 2, 5, 6)
    assert grow_ids((5, 6), wanted=2, taken=()) == (5, 6)  # nothing to add


def test_next_node_ids_ranges_are_used_in_order():
    assert id_ranges("[1000-1002, 7]") == [range(1000, 1003), range(7, 8)]
    assert grow_ids((), wanted=2, taken={1000}, next_ids="[1000-1002]") == (1001, 1002)
    with pytest.raises(NodeIdsError, match="no free broker id"):
        grow_ids((), wanted=4, taken=(), next_ids="[1000-1002]")
    for bad in ("1000-1002", "[a]", "[5-3]"):
        with pytest.raises(NodeIdsError, match="next-node-ids"):
            id_ranges(bad)


def test_two_pools_get_distinct_ids():
    a = plan(pool("a", 2))
    b = plan(pool("b", 3), taken=set(a.node_ids))
    assert a.node_ids == (0, 1) and b.node_ids == (2, 3, 4)
    assert pool_pod_ids("demo", [{"metadata": {"name": "b", "labels": {"tinystream.io/cluster": "demo"}},
                                  "spec": {"replicas": 3}, "status": {"nodeIds": [2, 3, 4]}}]) \
        == {"demo-b-0": 2, "demo-b-1": 3, "demo-b-2": 4}


# --- the pool's objects -------------------------------------------------------------------

def test_the_pool_statefulset_takes_the_pools_storage_resources_and_template():
    p = pool("fast", 2, storage={"volumes": [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "2Gi"}]},
             resources={"requests": {"cpu": "2"}}, template={"pod": {"nodeSelector": {"disk": "ssd"}}})
    sts = pool_statefulset(cluster(), p, CTX, replicas=2)
    assert sts["metadata"]["name"] == "demo-fast" and sts["spec"]["replicas"] == 2
    assert sts["spec"]["serviceName"] == "demo-brokers"  # the cluster's headless Service
    assert sts["spec"]["selector"]["matchLabels"]["tinystream.io/pool"] == "fast"
    assert [c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]] == ["data-0", "data-1"]
    assert sts["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    broker = container(sts)
    assert broker["resources"] == {"requests": {"cpu": "2"}}
    env = {e["name"]: e.get("value") for e in broker["env"]}
    assert "TINYSTREAM_BROKER_ID" not in env  # the ordinal is not the id: the ids file says it
    assert env["TINYSTREAM_LOG_DIRS"] == "/var/lib/tinystream/data-0/data,/var/lib/tinystream/data-1/data"
    assert {"name": "node-ids", "configMap": {"name": "demo-fast-ids"}} in sts["spec"]["template"]["spec"]["volumes"]


def test_every_pool_pod_is_named_by_the_broker_certificate():
    wildcard = next(n for n in broker_dns_names("demo", "ns", "cluster.local") if n.startswith("*.")
                    and n.endswith(".svc.cluster.local"))
    for name in ("a", "fast"):
        host = f"demo-{name}-3.demo-brokers.ns.svc.cluster.local"
        assert host.split(".", 1)[1] == wildcard.split(".", 1)[1]


@pytest.mark.parametrize("pod,expected", [("demo-fast-0", "7"), ("demo-fast-1", "9")])
def test_the_start_script_reads_the_pods_own_id(tmp_path, pod, expected):
    ids = tmp_path / "node-ids"
    ids.write_text("0 7\n1 9\n")
    script = ID_SCRIPT.format(file=ids) + 'echo "$TINYSTREAM_BROKER_ID"\n'
    out = subprocess.run(["/bin/sh", "-c", script], env={"POD_NAME": pod}, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == expected


def test_the_start_script_stops_a_pod_without_an_id(tmp_path):
    ids = tmp_path / "node-ids"
    ids.write_text("0 7\n")
    out = subprocess.run(["/bin/sh", "-c", ID_SCRIPT.format(file=ids) + "echo started\n"],
                         env={"POD_NAME": "demo-fast-1"}, capture_output=True, text=True)
    assert out.returncode == 1 and "started" not in out.stdout and "no broker id" in out.stderr


def test_a_pool_pods_token_proves_its_pool_id_not_its_ordinal():
    status = {"authenticated": True, "audiences": [AUDIENCE],
              "user": {"username": "system:serviceaccount:ns:default",
                       "extra": {"authentication.kubernetes.io/pod-name": ["demo-fast-1"]}}}
    assert review_principal(status, namespace="ns", cluster="demo", pool_pods={"demo-fast-1": 9}) == "broker-9"
    assert review_principal(status, namespace="ns", cluster="demo") is None  # not a pool pod we know


# --- opt-in and refusals -------------------------------------------------------------------

def test_a_pool_without_its_cluster_or_opt_in_changes_nothing():
    missing = plan_pool(None, pool(), PoolObserved(), ctx=CTX)
    assert missing.condition.reason == PoolReason.CLUSTER_NOT_FOUND.value and missing.objects == ()
    off = plan(pool(), c=cluster(pools=False))
    assert off.condition.reason == PoolReason.NODE_POOLS_NOT_ENABLED.value and off.objects == ()
    assert "tinystream.io/node-pools: enabled" in off.condition.message


# --- scaling --------------------------------------------------------------------------------

def parts(*replica_sets):
    return tuple(PartitionView("t", i, r[0], tuple(r), tuple(r)) for i, r in enumerate(replica_sets))


def test_scale_up_keeps_the_survivors_ids():
    grown = plan(pool("a", 4, ids=(0, 1, 2)), current=3, taken={3, 4})
    assert grown.node_ids == (0, 1, 2, 5) and grown.objects[1]["spec"]["replicas"] == 4


def test_scale_down_drains_the_pools_highest_ids_before_the_statefulset_shrinks():
    p = pool("a", 1, ids=(0, 4, 5))
    draining = plan(p, current=3, partitions=parts([0, 5], [0, 1]))
    assert draining.drain == DrainBrokers((4, 5)) and draining.objects == ()
    assert draining.node_ids == (0, 4, 5) and draining.waiting
    blocked = plan(p, current=3, partitions=None)
    assert blocked.condition.reason == PoolReason.SCALE_DOWN_BLOCKED.value and blocked.objects == ()
    shrunk = plan(p, current=3, partitions=parts([0, 1]))
    assert shrunk.drain is None and shrunk.node_ids == (0,) and shrunk.objects[1]["spec"]["replicas"] == 1
    assert shrunk.objects[0]["data"]["node-ids"] == "0 0\n1 4\n2 5\n"  # terminating pods keep theirs


def own_statefulset(replicas: int = 3) -> dict:
    """The cluster's StatefulSet from before pools, as the cluster's pass rendered it."""
    c = cluster(pools=False)
    return next(o for o in owned_objects(c, CTX, replicas=replicas) if o["kind"] == "StatefulSet")


def test_pool_broker_adopts_the_clusters_own_statefulset_unchanged_with_ids_as_ordinals():
    before = own_statefulset()
    adopted = plan(pool("broker", 3), current=3, taken={7})
    assert adopted.condition.reason == PoolReason.READY.value and adopted.node_ids == (0, 1, 2)
    (sts,) = adopted.objects  # no ids ConfigMap: the ids are the ordinals the template derives
    assert sts == before  # nothing to apply: no pod restarts, the claims are the same templates
    assert sts["spec"]["selector"]["matchLabels"] == {"tinystream.io/cluster": "demo",
                                                       "app.kubernetes.io/component": "broker"}
    assert pool_pod_ids("demo", [{"metadata": {"name": "broker", "labels": {"tinystream.io/cluster": "demo"}},
                                  "spec": {"replicas": 3}, "status": {"nodeIds": [0, 1, 2]}}]) == {
        "demo-broker-0": 0, "demo-broker-1": 1, "demo-broker-2": 2}


@pytest.mark.parametrize("p,current,taken,expected", [
    (pool("broker", 2), 3, (), "spec.replicas 2 must equal the cluster's spec.brokers 3"),
    (pool("broker", 3), 2, (), "StatefulSet demo-broker's replicas 2"),
    (pool("broker", 3), None, (), "there is none: give a new pool another name"),
    (pool("broker", 4, ids=(0, 1, 2)), 3, (3, 4), "id(s) [3] belong to another pool, so it cannot grow to 4"),
])
def test_pool_broker_refuses_what_adoption_cannot_do(p, current, taken, expected):
    refused = plan(p, current=current, taken=taken)
    assert refused.condition.reason == PoolReason.ADOPTION_REFUSED.value and refused.objects == ()
    assert expected in refused.condition.message, refused.condition.message
    assert refused.drain is None and refused.node_ids == p.node_ids


def test_a_pool_cluster_whose_own_statefulset_no_pool_adopts_says_so():
    sts = {("StatefulSet", "demo-broker"): own_statefulset(2)}
    alone = plan_cluster(cluster(), None, Observed(objects=sts), ctx=CTX)
    assert alone.condition.reason == "BrokersNotAdopted" and alone.condition.status is False
    assert "create the TinyStreamNodePool named broker" in alone.condition.message
    assert not any(getattr(a, "key", None) == ("StatefulSet", "demo-broker") for a in alone.actions)  # kept
    adopted = dataclasses.replace(cluster(), pool_brokers=((0, "demo-broker-0"), (1, "demo-broker-1")))
    assert plan_cluster(adopted, None, Observed(objects=sts), ctx=CTX).condition.reason == "NodePools"
    emptied = {("StatefulSet", "demo-broker"): own_statefulset(0)}  # pool broker scaled to 0: nothing runs
    assert plan_cluster(cluster(), None, Observed(objects=emptied), ctx=CTX).condition.reason == "NodePools"


def test_an_adopted_pool_whose_statefulset_is_made_again_makes_it_with_its_ids():
    """Volume expansion deletes the StatefulSet (pods orphaned): the adopted pool makes it again, as before."""
    again = plan(pool("broker", 3, ids=(0, 1, 2)), current=None)
    assert again.condition.reason == PoolReason.READY.value and again.node_ids == (0, 1, 2)
    assert [o["kind"] for o in again.objects] == ["StatefulSet"] and again.objects[0] == own_statefulset()


def test_an_adopted_pool_grows_onto_free_ordinals_and_shrinks_by_draining():
    grown = plan(pool("broker", 4, ids=(0, 1, 2)), current=3, taken={5})
    assert grown.node_ids == (0, 1, 2, 3) and grown.objects[0]["spec"]["replicas"] == 4
    p = pool("broker", 1, ids=(0, 1, 2))
    assert plan(p, current=3, partitions=parts([0, 2])).drain == DrainBrokers((1, 2))
    shrunk = plan(p, current=3, partitions=parts([0, 5]))
    assert shrunk.node_ids == (0,) and [o["kind"] for o in shrunk.objects] == ["StatefulSet"]
    assert shrunk.objects[0]["spec"]["replicas"] == 1


def test_the_clusters_status_names_pool_brokers_by_their_ids():
    def pod_obj(name: str, ready: bool) -> dict:
        return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}
    pods = [pod_obj("demo-a-0", True), pod_obj("demo-b-0", True), pod_obj("demo-b-1", False), pod_obj("demo-c-0", True)]
    observed = Observed(pods=pool_broker_pods(pods, {"demo-a-0": 0, "demo-b-0": 2, "demo-b-1": 3}))
    result = plan_cluster(cluster(), None, observed, ctx=CTX)
    assert [(b["id"], b["pod"], b["ready"]) for b in result.status["brokers"]] == [
        (0, "demo-a-0", True), (2, "demo-b-0", True), (3, "demo-b-1", False)]  # demo-c-0: no pool names it
    assert result.status["readyBrokers"] == 2 and "2/3 ready" in result.condition.message


def test_a_pool_clusters_broker_count_is_its_pools_replicas():
    pools = [{"metadata": {"name": n, "labels": {"tinystream.io/cluster": c}}, "spec": {"replicas": r}}
             for n, c, r in (("a", "demo", 2), ("b", "demo", 3), ("x", "other", 9))]
    assert pool_brokers(pools, "demo") == 5


def test_a_scale_down_that_would_leave_too_few_brokers_for_a_partition_is_blocked():
    p = pool("a", 1, ids=(0, 1, 2))
    blocked = plan(p, current=3, other_brokers=1, partitions=parts([0, 1, 2]))
    assert blocked.condition.reason == PoolReason.SCALE_DOWN_BLOCKED.value and blocked.drain is None
    assert "3 replicas" in blocked.condition.message and "keep 2 broker(s)" in blocked.condition.message
    assert plan(p, current=3, other_brokers=2, partitions=parts([0, 1, 2])).drain == DrainBrokers((1, 2))


def test_a_pool_not_shrinking_ends_any_scale_down_drain_left_on_its_ids():
    """An id a scale-down removed keeps the controller's lasting drain; given out again (here 5, once pool
    b's), or kept by a scale-down undone, it must receive replicas: every pass not shrinking says so."""
    grown = plan(pool("a", 4, ids=(0, 1, 2)), current=3, taken={3, 4})
    assert grown.undrain == EndScaleDownDrain((0, 1, 2, 5))
    undone = plan(pool("a", 3, ids=(0, 4, 5)), current=3)  # replicas back to 3 while 4 and 5 drained
    assert undone.undrain == EndScaleDownDrain((0, 4, 5))
    p = pool("a", 1, ids=(0, 4, 5))
    assert plan(p, current=3, partitions=parts([0, 5])).undrain is None  # draining 4 and 5
    assert plan(p, current=3, partitions=parts([0, 1])).undrain is None  # shrinking: 4 and 5 leave drained
    assert plan(pool("a", 0, ids=()), current=0).undrain is None


def test_a_rebalance_may_place_replicas_on_the_ids_the_pools_keep():
    pools = [{"metadata": {"name": "a", "labels": {"tinystream.io/cluster": "demo"}},
              "spec": {"replicas": 3}, "status": {"nodeIds": [0, 1, 2]}},
             {"metadata": {"name": "b", "labels": {"tinystream.io/cluster": "demo"}},  # shrinking: 4 leaves
              "spec": {"replicas": 1}, "status": {"nodeIds": [3, 4]}},
             {"metadata": {"name": "c", "labels": {"tinystream.io/cluster": "demo"}},  # growing: 6 not given yet
              "spec": {"replicas": 2}, "status": {"nodeIds": [5]}},
             {"metadata": {"name": "x", "labels": {"tinystream.io/cluster": "other"}},
              "spec": {"replicas": 1}, "status": {"nodeIds": [9]}}]
    assert pool_members("demo", pools) == {0, 1, 2, 3, 5}


def test_other_pools_count_ids_and_their_smaller_size():
    pools = [{"metadata": {"name": "a", "uid": "me", "labels": {"tinystream.io/cluster": "demo"}},
              "spec": {"replicas": 5}, "status": {"nodeIds": [0], "replicas": 1}},
             {"metadata": {"name": "b", "uid": "b", "labels": {"tinystream.io/cluster": "demo"}},
              "spec": {"replicas": 1}, "status": {"nodeIds": [3, 4], "replicas": 2}}]
    assert other_pools(pools, uid="me") == (frozenset({3, 4}), 1)


# --- rolls ----------------------------------------------------------------------------------

def broker_pod(name: str, broker_id: int, *, revision: str = "new", ready: bool = True) -> BrokerPod:
    return BrokerPod(name=name, ordinal=broker_id, ready=ready, revision=revision)


STS = {"metadata": {"name": "demo-a"}, "status": {"updateRevision": "new"}}


def test_a_pool_rolls_its_highest_id_first_moving_leadership_before_the_restart():
    pods = [broker_pod("demo-a-0", 0, revision="old"), broker_pod("demo-a-1", 4, revision="old"),
            broker_pod("demo-b-0", 2)]
    full = parts([4, 0], [2, 0])
    first = plan_pool_roll(cluster(), pool("a", 2), statefulset=STS, pods=pods, partitions=full, drained=frozenset())
    assert first is not None and first.actions == (MoveLeadership(4),)
    second = plan_pool_roll(cluster(), pool("a", 2), statefulset=STS, pods=pods, partitions=full,
                            drained=frozenset({4}))
    assert second is not None and second.actions == (DeletePod("demo-a-1", 4),)
    assert second.condition.status is False and "demo-a-1" in second.condition.message


def test_a_pool_roll_waits_for_every_pools_brokers_and_full_isrs():
    pods = [broker_pod("demo-a-0", 0, revision="old"), broker_pod("demo-b-0", 2, ready=False)]
    waiting = plan_pool_roll(cluster(), pool("a", 1), statefulset=STS, pods=pods, partitions=parts([0, 2]),
                             drained=frozenset())
    assert waiting is not None and waiting.actions == () and "demo-b-0" in waiting.condition.message
    pods[1] = broker_pod("demo-b-0", 2)
    under = (PartitionView("t", 0, 0, (0, 2), (0,)),)
    isr = plan_pool_roll(cluster(), pool("a", 1), statefulset=STS, pods=pods, partitions=under, drained=frozenset())
    assert isr is not None and isr.actions == () and "ISR" in isr.condition.message


def test_a_pool_at_its_revision_does_not_roll():
    pods = [broker_pod("demo-a-0", 0), broker_pod("demo-b-0", 2, revision="old")]  # b's roll is b's own
    assert plan_pool_roll(cluster(), pool("a", 1), statefulset=STS, pods=pods, partitions=parts([0, 2]),
                          drained=frozenset()) is None


def test_a_pool_roll_waits_for_a_deleted_pod_to_be_made_again():
    pods = [broker_pod("demo-a-0", 0, revision="old")]  # demo-a-1 deleted, not made again yet
    waiting = plan_pool_roll(cluster(), pool("a", 2), statefulset=STS, pods=pods, partitions=parts([0]),
                             drained=frozenset(), expected={"demo-a-0", "demo-a-1"})
    assert waiting is not None and waiting.actions == () and "demo-a-1" in waiting.condition.message


# --- CA rotation rolls reach every pool ------------------------------------------------------

ROTATING = {"generation": 0, "source": "generated", "created": "2026-01-01T00:00:00+00:00", "validityDays": 365,
            "phase": "TrustingNewCa", "next": {"generation": 1, "source": "generated",
                                               "created": "2026-11-01T00:00:00+00:00", "validityDays": 365}}


def tls_cluster(ca: dict | None = None, clients: dict | None = None) -> ClusterSpec:
    body = {"metadata": {"name": "demo", "namespace": "ns", "uid": "u",
                         "annotations": {"tinystream.io/node-pools": "enabled"}},
            "spec": {"brokers": 3, "listeners": {"tls": True, "authentication": {"type": "tls"}}},
            "status": {"clusterCa": ca or {}, "clientsCa": clients or {}}}
    return ClusterSpec.from_resource(body)


def template_annotations(sts: dict) -> dict:
    return sts["spec"]["template"]["metadata"]["annotations"]


def test_a_pool_statefulset_carries_the_clusters_ca_rotation_markers():
    steady = pool_statefulset(with_ca_markers(tls_cluster()), pool("a", 2), CTX, replicas=2)
    assert CA_ANNOTATION not in template_annotations(steady)  # generation 0, Steady: no marker, as the cluster's
    rotating = with_ca_markers(tls_cluster(ROTATING, {**ROTATING, "phase": "RenewingCertificates"}))
    for name in ("a", "b"):  # every pool's template changes: every pool rolls
        annotations = template_annotations(pool_statefulset(rotating, pool(name, 2), CTX, replicas=2))
        assert annotations[CA_ANNOTATION] == "trust-0-1"
        assert annotations[CLIENTS.annotation] == "trust-0-1"  # the clients CA's roll 2 is its roll 1's


def pool_sts(name: str, marker: str, *, replicas: int = 1, revision: str = "r2", observed: int = 2) -> dict:
    return {"metadata": {"name": f"demo-{name}", "generation": 2},
            "spec": {"replicas": replicas, "template": {"metadata": {"annotations": {CA_ANNOTATION: marker}}}},
            "status": {"observedGeneration": observed, "updateRevision": revision}}


def test_a_ca_phase_is_rolled_only_once_every_pools_brokers_run_it():
    pods = [broker_pod("demo-a-0", 0, revision="r2"), broker_pod("demo-a-1", 1, revision="r2"),
            broker_pod("demo-b-0", 5, revision="r2")]
    both = [pool_sts("a", "trust-0-1", replicas=2), pool_sts("b", "trust-0-1")]
    assert pools_rolled_marker(both, pods) == "trust-0-1"
    lagging = [pool_sts("a", "trust-0-1", replicas=2), pool_sts("b", "")]  # b's template not updated yet
    assert pools_rolled_marker(lagging, pods) is None
    unseen = [pool_sts("a", "trust-0-1", replicas=2), pool_sts("b", "trust-0-1", observed=1)]
    assert pools_rolled_marker(unseen, pods) is None
    old_pod = [*pods[:2], broker_pod("demo-b-0", 5, revision="r1")]  # b's broker not restarted yet
    assert pools_rolled_marker(both, old_pod) is None
    assert pools_rolled_marker(both, pods[:1] + pods[2:]) is None  # demo-a-1 gone
    assert pools_rolled_marker([], pods) is None


# --- volume expansion of a pool -------------------------------------------------------------

def pvc(name: str, size: str = "1Gi", *, storage_class: str = "fast") -> dict:
    return {"metadata": {"name": name}, "spec": {"resources": {"requests": {"storage": size}},
                                                 "storageClassName": storage_class},
            "status": {"phase": "Bound", "capacity": {"storage": size}}}


def pool_claims(pvcs, volumes):
    """Pool a's claims as its pass reads them (volume_reader.read_storage)."""
    return claims_of(statefulset_name("demo", "a"), pvcs, [v.claim for v in volumes])


def grown(size: str = "2Gi", *, replicas: int = 2, current: int = 2, template: str = "1Gi", claims: str = "1Gi",
          expandable: bool = True, **meta):
    p = pool("a", replicas, ids=(0, 1), storage={"size": size, "storageClass": "fast"})
    sts = pool_statefulset(cluster(), pool("a", current, storage={"size": template, "storageClass": "fast"}), CTX,
                           replicas=current)
    sts["metadata"].update(meta)
    pvcs = [pvc(f"data-demo-a-{i}", claims) for i in range(current)] + [pvc("data-demo-b-0"), pvc("data-demo-a-x-0")]
    observed = PoolObserved(current=current, statefulset=sts, storage_classes={"fast": StorageClassView("fast", expandable)},
                            claims=pool_claims(pvcs, pool_cluster(cluster(), p).storage_volumes))
    return plan_pool(cluster(), p, observed, ctx=CTX)


def test_only_the_pools_own_claims_are_its_claims():
    pvcs = [pvc("data-demo-a-0"), pvc("data-demo-a-1"), pvc("data-demo-b-0"), pvc("data-demo-a-x-0")]
    found = pool_claims(pvcs, pool_cluster(cluster(), pool("a")).storage_volumes)
    assert [(c.name, c.ordinal) for c in found] == [("data-demo-a-0", 0), ("data-demo-a-1", 1)]


def test_a_larger_pool_size_expands_its_claims_and_recreates_its_statefulset():
    result = grown()
    assert result.expand == (ExpandClaim("data-demo-a-0", "2Gi"), ExpandClaim("data-demo-a-1", "2Gi"))
    assert result.recreate and result.waiting
    assert [o["kind"] for o in result.objects] == ["ConfigMap"]  # no StatefulSet update: it goes, and comes back
    assert result.condition.reason == PoolReason.RESIZING_STORAGE.value
    assert result.storage is not None and result.storage.reason == "ClaimsResizing"
    assert result.node_ids == (0, 1)


def test_a_pool_at_its_new_size_runs_and_reports_it():
    result = grown(template="2Gi", claims="2Gi")
    assert not result.recreate and result.expand == () and result.condition.reason == PoolReason.READY.value
    assert "StatefulSet" in [o["kind"] for o in result.objects]
    assert result.storage is not None and result.storage.reason == "ClaimsAtRequestedSize"


def test_a_pool_size_below_its_claims_is_refused_and_nothing_is_resized():
    result = grown("1Gi", template="2Gi", claims="2Gi")
    assert not result.recreate and result.expand == ()
    assert result.storage is not None and result.storage.reason == "ShrinkRefused"
    assert "spec.storage.size 1Gi is below" in result.storage.message


def test_a_scaling_pool_expands_its_claims_but_keeps_its_statefulset():
    result = grown(replicas=3, current=2)
    assert not result.recreate and len(result.expand) == 2
    assert "once the scale is done" in (result.storage.message if result.storage else "")


def test_a_class_that_cannot_expand_changes_nothing_of_the_pool():
    result = grown(expandable=False)
    assert not result.recreate and result.expand == ()
    assert result.storage is not None and result.storage.reason == "StorageClassNotExpandable"


def test_a_pool_waits_while_its_statefulset_goes():
    result = grown(deletionTimestamp="2026-11-29T00:00:00Z")
    assert result.objects == () and result.expand == () and not result.recreate and result.waiting
    assert result.condition.reason == PoolReason.RESIZING_STORAGE.value


# --- external listeners with pools ----------------------------------------------------------

NODEPORT = {"listeners": {"tls": False, "authentication": {"type": "scram-sha-512"},
                          "external": [{"name": "outside", "port": 9094, "type": "nodeport", "tls": False}]}}
POOL_BROKERS = ((0, "demo-a-0"), (4, "demo-a-1"), (2, "demo-b-0"))


def external_cluster() -> ClusterSpec:
    return dataclasses.replace(cluster(**NODEPORT), pool_brokers=POOL_BROKERS)


def with_node_ports(objects: list[dict]) -> dict:
    """The Services as the API server returns them: each with a node port allocated."""
    found = {}
    for n, obj in enumerate(o for o in objects if o["kind"] == "Service"):
        obj = json.loads(json.dumps(obj))
        if obj["spec"].get("type") == "NodePort":
            obj["spec"]["ports"][0]["nodePort"] = 30000 + n
        found[("Service", obj["metadata"]["name"])] = obj
    return found


def test_a_pool_brokers_external_service_selects_its_pool_pod_by_broker_id():
    services = {o["metadata"]["name"]: o for o in owned_objects(external_cluster(), CTX, replicas=0)
                if o["kind"] == "Service" and "tinystream.io/listener" in o["metadata"]["labels"]}
    assert sorted(services) == ["demo-outside-0", "demo-outside-2", "demo-outside-4", "demo-outside-bootstrap"]
    assert services["demo-outside-4"]["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "demo-a-1"
    assert services["demo-outside-2"]["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "demo-b-0"
    assert services["demo-outside-4"]["metadata"]["labels"]["tinystream.io/broker"] == "4"


def test_a_pool_cluster_waits_for_the_node_ports_then_writes_every_pool_brokers_address():
    spec = external_cluster()
    first = plan_cluster(spec, None, Observed(), ctx=CTX)
    assert first.condition.reason == "WaitingForExternalAddresses"
    made = [a.obj for a in first.actions if isinstance(a, Apply)]
    assert "ConfigMap" not in [o["kind"] for o in made]  # the brokers' config waits for every address
    services = with_node_ports(made)
    done = plan_cluster(spec, None, Observed(objects=services), ctx=CTX)
    assert done.condition.reason == "NodePools"
    (config,) = [a.obj for a in done.actions if isinstance(a, Apply) and a.obj["kind"] == "ConfigMap"]
    lines = config["data"]["external-listeners"].splitlines()
    port = services[("Service", "demo-outside-4")]["spec"]["ports"][0]["nodePort"]
    assert lines == [f"{b} OUTSIDE - {services[('Service', f'demo-outside-{b}')]['spec']['ports'][0]['nodePort']}"
                     for b in (0, 2, 4)] and f"4 OUTSIDE - {port}" in lines
    stale = plan_cluster(dataclasses.replace(spec, pool_brokers=POOL_BROKERS[:2]), None,
                         Observed(objects=services), ctx=CTX)  # pool b scaled to 0: its broker's Service goes
    assert [a.name for a in stale.actions if isinstance(a, Delete)] == ["demo-outside-2"]


def test_a_pool_broker_advertises_its_node_and_node_port_under_its_pool_id(tmp_path):
    spec = external_cluster()
    config = {"data": {"broker.toml": "x", "external-listeners": "4 OUTSIDE - 30004\n0 OUTSIDE - 30000\n"}}
    sts = pool_statefulset(spec, pool("a", 2, ids=(0, 4)), CTX, replicas=2, config=config)
    assert plan_with_config_hash(sts) != plan_with_config_hash(pool_statefulset(spec, pool("a", 2), CTX, replicas=2))
    broker = container(sts)
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in broker["env"]
    (ids := tmp_path / "node-ids").write_text("0 0\n1 4\n")
    (addresses := tmp_path / "external-listeners").write_text(config["data"]["external-listeners"])
    script = (broker["command"][2].replace("/etc/tinystream-ids/node-ids", str(ids))
              .replace("/etc/tinystream/external-listeners", str(addresses)))
    script = script.replace("exec tinystream broker", 'echo "$TINYSTREAM_BROKER_ID $TINYSTREAM_ADVERTISED_LISTENERS" #')
    out = subprocess.run(["/bin/sh", "-c", script], env={"POD_NAME": "demo-a-1", "HOST_IP": "10.0.0.7"},
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4 OUTSIDE://10.0.0.7:30004"


def plan_with_config_hash(sts: dict) -> str:
    return sts["spec"]["template"]["metadata"]["annotations"]["tinystream.io/config-hash"]
