"""A larger spec.storage.size against the real API server, controller-manager and garbage collector.

What this tier shows: the claims the StatefulSet controller made are patched (and the API
server's PersistentVolumeClaimResize admission accepts it: the class allows expansion, the
claims are bound); the StatefulSet is deleted with propagationPolicy Orphan and re-created with
the new claim template; the pods stay (same uid) and are adopted at the same revision, so no roll
follows; a class that cannot expand changes nothing and says so. The claims are bound by the
real PV controller to PersistentVolumes made here, pre-bound to them (no provisioner runs).

What it cannot show: no CSI driver or resizer runs, so no volume grows; the resizer's part
(FileSystemResizePending, then status.capacity) is written here by hand, and the condition that
reports it is checked. A real expansion needs a CSI driver with EXPAND_VOLUME (not kind's
local-path provisioner).
"""

from __future__ import annotations

import pytest
from fake_controller import FakeController
from kmock_helpers import path_of, running_operator
from real_api import RealApi, connection

pytestmark = pytest.mark.timeout(150)
TS = "tinystream.io/v1alpha1"
CLAIMS = [f"data-demo-broker-{i}" for i in range(3)]


def cluster(storage_class: str) -> dict:
    # deleteClaim: the claims are owned by the StatefulSet; orphaning must keep them all the same.
    return {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo"},
            "spec": {"brokers": 3, "storage": {"size": "1Gi", "storageClass": storage_class, "deleteClaim": True}}}


def storage_condition(obj: dict | None) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or []
                 if c["type"] == "StorageResized"), {})


def claim_size(sts: dict) -> str:
    return sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]


def make_class(control_plane, name: str, *, expandable: bool) -> None:
    status, body = control_plane.request("POST", "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": "resizer.example.com", "allowVolumeExpansion": expandable,
        "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain"})
    assert status == 201, body


def make_volumes(control_plane, namespace: str, storage_class: str, claims: list[str] = CLAIMS) -> None:
    """One PersistentVolume pre-bound to each of `claims`: the PV controller binds them as it would any."""
    for claim in claims:
        status, body = control_plane.request("POST", "/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{namespace}-{claim}"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": storage_class, "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": namespace, "name": claim},
                     "csi": {"driver": "resizer.example.com", "volumeHandle": f"{namespace}-{claim}"}}})
        assert status == 201, body


@pytest.fixture
async def operator(control_plane):
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane)):
        yield


async def patch_claim_status(api: RealApi, name: str, status: dict) -> None:
    """What a CSI resizer and the kubelet would write (nothing runs here that does)."""
    async with api.session.patch(api.url + path_of("v1", "persistentvolumeclaims", name, api.ns) + "/status",
                                 json={"status": status},
                                 headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status < 300, await r.text()


async def test_a_larger_size_expands_the_claims_and_recreates_the_statefulset_without_restarts(
        control_plane, namespace, api, operator) -> None:
    make_class(control_plane, f"{namespace}-expandable", expandable=True)
    make_volumes(control_plane, namespace, f"{namespace}-expandable")
    await api.create(TS, "tinystreamclusters", cluster(f"{namespace}-expandable"))
    for claim in CLAIMS:
        await api.wait_for("v1", "persistentvolumeclaims", claim,
                           lambda o: ((o or {}).get("status") or {}).get("phase") == "Bound", timeout=60)
    pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in
            [await api.wait_for("v1", "pods", f"demo-broker-{i}", lambda o: o is not None, timeout=30)
             for i in range(3)]}
    old_sts = await api.get("apps/v1", "statefulsets", "demo-broker")
    assert claim_size(old_sts) == "1Gi"
    await api.wait_for(TS, "tinystreamclusters", "demo",
                       lambda o: storage_condition(o).get("reason") == "ClaimsAtRequestedSize", timeout=30)

    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"storage": {"size": "2Gi"}}})
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker",
                             lambda o: o is not None and o["metadata"]["uid"] != old_sts["metadata"]["uid"],
                             timeout=60)
    assert claim_size(sts) == "2Gi"  # the new claim template
    for claim in CLAIMS:  # patched, and kept although the old StatefulSet owned them (orphaned)
        pvc = await api.get("v1", "persistentvolumeclaims", claim)
        assert pvc["spec"]["resources"]["requests"]["storage"] == "2Gi", pvc
    # The pods were orphaned, not deleted, and the new StatefulSet adopts them at the same revision: no roll.
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker",
                             lambda o: bool((o or {}).get("status", {}).get("updateRevision")), timeout=30)
    for name, uid in pods.items():
        pod = await api.wait_for("v1", "pods", name, lambda o: any(
            r["uid"] == sts["metadata"]["uid"] for r in (o or {}).get("metadata", {}).get("ownerReferences") or ()),
            timeout=30)
        assert pod["metadata"]["uid"] == uid, name
        assert pod["metadata"]["labels"]["controller-revision-hash"] == sts["status"]["updateRevision"], name
    resizing = await api.wait_for(TS, "tinystreamclusters", "demo",
                                  lambda o: storage_condition(o).get("reason") == "ClaimsResizing"
                                  and "capacity 1Gi" in storage_condition(o).get("message", ""), timeout=30)
    assert "data-demo-broker-0 requested 2Gi, capacity 1Gi" in storage_condition(resizing)["message"]

    # The resizer grew the volume; the file system waits for the kubelet.
    for claim in CLAIMS:
        await patch_claim_status(api, claim, {"conditions": [{"type": "FileSystemResizePending", "status": "True"}]})
    await api.wait_for(TS, "tinystreamclusters", "demo",
                       lambda o: storage_condition(o).get("reason") == "FileSystemResizePending", timeout=30)
    for claim in CLAIMS:
        await patch_claim_status(api, claim, {"conditions": None, "capacity": {"storage": "2Gi"}})
    done = await api.wait_for(TS, "tinystreamclusters", "demo",
                              lambda o: storage_condition(o).get("status") == "True", timeout=30)
    assert storage_condition(done)["message"] == "3 claim(s) at the requested 2Gi"
    assert {p["metadata"]["uid"] for p in await api.list("v1", "pods")} == set(pods.values())


async def test_a_class_that_cannot_expand_changes_nothing_and_says_so(control_plane, namespace, api, operator) -> None:
    fixed = f"{namespace}-fixed"
    make_class(control_plane, fixed, expandable=False)
    await api.create(TS, "tinystreamclusters", cluster(fixed))
    for claim in CLAIMS:  # unbound: no provisioner; the class decides first
        await api.wait_for("v1", "persistentvolumeclaims", claim, lambda o: o is not None, timeout=30)
    old_sts = await api.get("apps/v1", "statefulsets", "demo-broker")

    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"storage": {"size": "2Gi"}}})
    refused = await api.wait_for(TS, "tinystreamclusters", "demo",
                                 lambda o: storage_condition(o).get("reason") == "StorageClassNotExpandable", timeout=30)
    condition = storage_condition(refused)
    assert condition["status"] == "False"
    assert f"StorageClass {fixed} does not allow volume expansion" in condition["message"]
    assert condition["observedGeneration"] == refused["metadata"]["generation"]
    sts = await api.get("apps/v1", "statefulsets", "demo-broker")
    assert sts["metadata"]["uid"] == old_sts["metadata"]["uid"] and claim_size(sts) == "1Gi"
    for claim in CLAIMS:
        pvc = await api.get("v1", "persistentvolumeclaims", claim)
        assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"


async def test_two_volumes_make_two_claims_per_broker_and_one_grows_alone(control_plane, namespace, api,
                                                                          operator) -> None:
    """spec.storage.volumes: the real StatefulSet controller makes data-<id>-demo-broker-<n> claims per volume;
    growing volume 1 patches only its claims and re-creates the StatefulSet without a restart."""
    expandable = f"{namespace}-jbod"
    make_class(control_plane, expandable, expandable=True)
    claims = [f"data-{v}-demo-broker-{i}" for v in (0, 1) for i in range(2)]
    make_volumes(control_plane, namespace, expandable, claims)
    volumes = [{"id": 0, "size": "1Gi", "storageClass": expandable}, {"id": 1, "size": "1Gi", "storageClass": expandable}]
    await api.create(TS, "tinystreamclusters", {"apiVersion": TS, "kind": "TinyStreamCluster",
                                                "metadata": {"name": "demo"},
                                                "spec": {"brokers": 2, "storage": {"volumes": volumes}}})
    for claim in claims:
        await api.wait_for("v1", "persistentvolumeclaims", claim,
                           lambda o: ((o or {}).get("status") or {}).get("phase") == "Bound", timeout=60)
    old_sts = await api.get("apps/v1", "statefulsets", "demo-broker")
    assert [c["metadata"]["name"] for c in old_sts["spec"]["volumeClaimTemplates"]] == ["data-0", "data-1"]
    pod = await api.wait_for("v1", "pods", "demo-broker-0", lambda o: o is not None, timeout=30)
    mounts = {m["name"]: m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["data-0"] == "/var/lib/tinystream/data-0" and mounts["data-1"] == "/var/lib/tinystream/data-1"
    claimed = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
               if "persistentVolumeClaim" in v}
    assert claimed == {"data-0": "data-0-demo-broker-0", "data-1": "data-1-demo-broker-0"}
    uid = pod["metadata"]["uid"]
    await api.wait_for(TS, "tinystreamclusters", "demo",
                       lambda o: storage_condition(o).get("reason") == "ClaimsAtRequestedSize", timeout=30)

    volumes[1]["size"] = "2Gi"
    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"storage": {"volumes": volumes}}})
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker",
                             lambda o: o is not None and o["metadata"]["uid"] != old_sts["metadata"]["uid"],
                             timeout=60)
    sizes = {c["metadata"]["name"]: c["spec"]["resources"]["requests"]["storage"]
             for c in sts["spec"]["volumeClaimTemplates"]}
    assert sizes == {"data-0": "1Gi", "data-1": "2Gi"}
    for claim in claims:
        pvc = await api.get("v1", "persistentvolumeclaims", claim)
        assert pvc["spec"]["resources"]["requests"]["storage"] == ("2Gi" if claim.startswith("data-1") else "1Gi")
    resizing = await api.wait_for(TS, "tinystreamclusters", "demo",
                                  lambda o: storage_condition(o).get("reason") == "ClaimsResizing"
                                  and "capacity 1Gi" in storage_condition(o).get("message", ""), timeout=30)
    assert "volume 1: waiting for the volumes to grow: data-1-demo-broker-0 requested 2Gi" in \
        storage_condition(resizing)["message"]
    assert (await api.get("v1", "pods", "demo-broker-0"))["metadata"]["uid"] == uid  # orphaned, not restarted
