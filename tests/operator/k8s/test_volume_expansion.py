"""Growing the brokers' volumes: which claims are patched, when the StatefulSet is re-created, what the condition says."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest
from test_reconcile import CTX, spec, world

from tinystream.operator.k8s.reconcile import Apply, OrphanStatefulSet, Phase, plan_cluster
from tinystream.operator.k8s.volume_expansion import (
    Claim,
    ExpandClaim,
    StorageClassView,
    plan_storage,
    quantity,
)

EXPANDABLE = StorageClassView("fast", expandable=True)
FIXED = StorageClassView("standard", expandable=False)


def claims(requested="1Gi", capacity="1Gi", n=3, bound=True, **extra):
    return tuple(Claim(f"data-demo-broker-{i}", i, requested, capacity if bound else None, bound, "fast", **extra)
                 for i in range(n))


def storage(size="2Gi", *, observed=None, template="1Gi", cls=EXPANDABLE, scaling=False, replicas=3):
    return plan_storage(size=size, claims=claims() if observed is None else observed, replicas=replicas,
                        template_size=template, storage_class=cls, class_name=cls.name if cls else "fast",
                        scaling=scaling, generation=4)


@pytest.mark.parametrize("text,value", [
    ("10Gi", 10 * 2**30), ("1.5Gi", 3 * 2**29), ("500G", 500 * 10**9), ("0.5Ti", 2**39), ("5e3", 5000),
    ("100", 100), ("100m", Decimal("0.1")), (".5Ki", 512),
])
def test_quantities_are_read_as_kubernetes_reads_them(text, value):
    assert quantity(text) == value


def test_a_quantity_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity("ten gigs")


def test_claims_at_size_are_reported_ready():
    plan = storage("1Gi")
    assert (plan.expand, plan.recreate_statefulset) == ((), False)
    assert (plan.condition.type, plan.condition.status, plan.condition.reason) == (
        "StorageResized", True, "ClaimsAtRequestedSize")
    assert plan.condition.message == "3 claim(s) at the requested 1Gi"


def test_a_larger_size_patches_every_bound_claim_and_recreates_the_statefulset():
    plan = storage("2Gi")
    assert plan.expand == tuple(ExpandClaim(f"data-demo-broker-{i}", "2Gi") for i in range(3))
    assert plan.recreate_statefulset
    assert (plan.condition.status, plan.condition.reason) == (False, "ClaimsResizing")
    assert "expanding 3 claim(s) to 2Gi" in plan.condition.message
    assert "pods are orphaned, not restarted" in plan.condition.message


def test_only_claims_below_the_size_are_patched_and_an_updated_template_is_kept():
    mixed = (*claims("2Gi", n=2), Claim("data-demo-broker-2", 2, "1Gi", "1Gi", True, "fast"))
    plan = storage("2Gi", observed=mixed, template="2Gi")
    assert plan.expand == (ExpandClaim("data-demo-broker-2", "2Gi"),)
    assert not plan.recreate_statefulset


def test_an_unbound_claim_waits_and_claims_of_removed_brokers_are_left_alone():
    observed = (*claims(n=2), Claim("data-demo-broker-2", 2, "1Gi", None, False, "fast"),
                Claim("data-demo-broker-7", 7, "1Gi", "1Gi", True, "fast"))
    plan = storage("2Gi", observed=observed)
    assert [e.name for e in plan.expand] == ["data-demo-broker-0", "data-demo-broker-1"]
    assert "waiting for data-demo-broker-2 to be bound" in plan.condition.message


def test_a_class_that_cannot_expand_changes_nothing_and_says_so():
    plan = storage("2Gi", cls=FIXED)
    assert (plan.expand, plan.recreate_statefulset) == ((), False)
    assert (plan.condition.status, plan.condition.reason) == (False, "StorageClassNotExpandable")
    assert "StorageClass standard does not allow volume expansion" in plan.condition.message
    assert "nothing was changed" in plan.condition.message


def test_a_class_not_found_changes_nothing():
    plan = plan_storage(size="2Gi", claims=claims(), replicas=3, template_size="1Gi", storage_class=None,
                        class_name="gone", scaling=False)
    assert (plan.expand, plan.recreate_statefulset, plan.condition.reason) == ((), False, "StorageClassNotFound")
    assert "StorageClass gone" in plan.condition.message


def test_a_smaller_size_is_refused_not_applied():
    plan = storage("512Mi")
    assert (plan.expand, plan.recreate_statefulset) == ((), False)
    assert (plan.condition.status, plan.condition.reason) == (False, "ShrinkRefused")
    assert "data-demo-broker-0 1Gi" in plan.condition.message


def test_the_statefulset_is_not_recreated_during_a_scale():
    plan = storage("2Gi", scaling=True)
    assert len(plan.expand) == 3 and not plan.recreate_statefulset
    assert "once the scale is done" in plan.condition.message


@pytest.mark.parametrize("state,reason,text", [
    ({"capacity": "1Gi"}, "ClaimsResizing", "data-demo-broker-0 requested 2Gi, capacity 1Gi"),
    ({"capacity": "1Gi", "conditions": ("FileSystemResizePending",)}, "FileSystemResizePending",
     "data-demo-broker-0 requested 2Gi, capacity 1Gi (FileSystemResizePending)"),
    ({"capacity": "2Gi"}, "ClaimsAtRequestedSize", "3 claim(s) at the requested 2Gi"),
])
def test_the_condition_follows_the_claims_capacity(state, reason, text):
    plan = storage("2Gi", observed=claims("2Gi", **state), template="2Gi")
    assert plan.expand == () and plan.condition.reason == reason
    assert text in plan.condition.message


# --- in plan_cluster ----------------------------------------------------------------------

def grown_world(size="2Gi", *, template="1Gi", cls=EXPANDABLE, terminating=False):
    """A running cluster made with `template`-sized claims, its spec now asking for `size`."""
    observed = world(spec(storage={"size": template}))
    if terminating:
        sts = observed.objects[("StatefulSet", "demo-broker")]
        sts["metadata"]["deletionTimestamp"] = "2026-11-27T20:00:00Z"
    return spec(storage={"size": size}), dataclasses.replace(observed, claims=claims(template), storage_classes={"fast": cls} if cls else {})  # the claims name "fast"


def test_plan_cluster_expands_the_claims_then_orphans_the_statefulset():
    s, observed = grown_world()
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert [type(a).__name__ for a in plan.actions] == ["ExpandClaim"] * 3 + ["OrphanStatefulSet"]
    assert plan.actions[-1] == OrphanStatefulSet("demo-broker")
    assert (plan.phase, plan.condition.reason) == (Phase.RUNNING, "ResizingStorage")
    assert plan.storage is not None and plan.storage.reason == "ClaimsResizing"
    assert plan.requeue_after


def test_plan_cluster_waits_while_the_old_statefulset_goes():
    s, observed = grown_world("2Gi", template="1Gi", terminating=True)
    observed = dataclasses.replace(observed, claims=claims("2Gi"))
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert not any(isinstance(a, Apply) and a.key[0] == "StatefulSet" for a in plan.actions)
    assert not any(isinstance(a, OrphanStatefulSet) for a in plan.actions)
    assert "waiting for StatefulSet demo-broker to go" in plan.condition.message


def test_plan_cluster_recreates_the_statefulset_with_the_new_template():
    s, observed = grown_world()
    objects = {k: v for k, v in observed.objects.items() if k[0] != "StatefulSet"}
    plan = plan_cluster(s, None, dataclasses.replace(observed, objects=objects, claims=claims("2Gi")), ctx=CTX)
    (sts,) = [a for a in plan.actions if isinstance(a, Apply) and a.key[0] == "StatefulSet"]
    assert sts.create and sts.obj["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == {
        "storage": "2Gi"}
    assert "adopts the 3 broker pod(s)" in plan.condition.message


def test_plan_cluster_with_a_fixed_class_goes_on_as_before_and_reports_it():
    s, observed = grown_world(cls=FIXED)
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert plan.actions == () and plan.condition.reason == "ClusterReady"
    assert plan.storage is not None and plan.storage.reason == "StorageClassNotExpandable"


# --- several volumes (spec.storage.volumes) -----------------------------------------------

def jbod(size0="1Gi", size1="1Gi"):
    return {"volumes": [{"id": 0, "size": size0, "storageClass": "fast"}, {"id": 1, "size": size1, "storageClass": "fast"}]}


def volume_claims(volume, requested="1Gi"):
    return tuple(dataclasses.replace(c, name=f"{volume}-demo-broker-{c.ordinal}", volume=volume)
                 for c in claims(requested))


def jbod_world(*, made=None, now=None, cls=EXPANDABLE):
    """A running cluster made with `made` volumes, its spec now `now`."""
    made = made or jbod()
    observed = world(spec(storage=made))
    held = volume_claims("data-0") + volume_claims("data-1")
    return spec(storage=now or made), dataclasses.replace(observed, claims=held, storage_classes={"fast": cls})


def test_a_grown_volume_expands_only_its_own_claims():
    s, observed = jbod_world(now=jbod(size1="3Gi"))
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert [a for a in plan.actions if isinstance(a, ExpandClaim)] == [
        ExpandClaim(f"data-1-demo-broker-{i}", "3Gi") for i in range(3)]
    assert plan.actions[-1] == OrphanStatefulSet("demo-broker")
    assert plan.storage is not None and plan.storage.reason == "ClaimsResizing"
    assert plan.storage.message.startswith("volume 1: expanding 3 claim(s) to 3Gi")


def test_volumes_at_size_are_reported_together():
    s, observed = jbod_world()
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert plan.storage is not None and (plan.storage.status, plan.storage.reason) == (True, "ClaimsAtRequestedSize")
    assert plan.storage.message == ("volume 0: 3 claim(s) at the requested 1Gi; "
                                    "volume 1: 3 claim(s) at the requested 1Gi")


def test_the_worst_volume_speaks_for_the_condition():
    s, observed = jbod_world(made=jbod(size1="3Gi"), now=jbod(size0="2Gi", size1="2Gi"))
    observed = dataclasses.replace(observed, claims=volume_claims("data-0") + volume_claims("data-1", "3Gi"))
    plan = plan_cluster(s, None, observed, ctx=CTX)
    # volume 0 could grow, but a re-created StatefulSet would shrink volume 1's template: nothing moves
    assert not any(isinstance(a, (ExpandClaim, OrphanStatefulSet)) for a in plan.actions)
    assert plan.storage is not None and plan.storage.reason == "ShrinkRefused"
    assert "spec.storage.volumes[id=1].size 2Gi is below" in plan.storage.message


@pytest.mark.parametrize("now,said", [
    ({"volumes": [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi"}, {"id": 2, "size": "1Gi"}]}, "added data-2"),
    ({"volumes": [{"id": 0, "size": "1Gi"}]}, "removed data-1"),
    ({"size": "1Gi"}, "added data; removed data-0, data-1"),
])
def test_volumes_added_or_removed_on_a_running_cluster_change_nothing(now, said):
    s, observed = jbod_world(now=now)
    plan = plan_cluster(s, None, observed, ctx=CTX)
    assert plan.actions == ()  # not even the ConfigMap: its log.dirs would name a dir no pod mounts
    assert (plan.phase, plan.condition.reason) == (Phase.FAILED, "VolumesChanged")
    assert plan.storage is not None and plan.storage.reason == "VolumesChanged"
    assert said in plan.storage.message and "claim templates are data-0, data-1" in plan.storage.message


def test_a_new_cluster_with_volumes_is_created_with_them():
    s = spec(storage=jbod())
    plan = plan_cluster(s, None, dataclasses.replace(world(s), objects={}), ctx=CTX)
    (sts,) = [a for a in plan.actions if isinstance(a, Apply) and a.key[0] == "StatefulSet"]
    assert [c["metadata"]["name"] for c in sts.obj["spec"]["volumeClaimTemplates"]] == ["data-0", "data-1"]
