"""Reading what volume expansion plans over (volume_expansion.py): a StatefulSet's data claims and the
StorageClasses they, or the spec before any claim, name. The cluster's pass and a node pool's read alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.model import StorageVolume
from tinystream.operator.k8s.volume_expansion import Claim, StorageClassView, claims_of


async def read_storage(kube: KubeClient, namespace: str, *, labels: Mapping[str, str], statefulset: str,
                       volumes: Sequence[StorageVolume]) -> tuple[tuple[Claim, ...], dict[str, StorageClassView]]:
    """The claims of `statefulset` (among those with `labels`) and their StorageClasses by name; a class
    that is missing is left out (plan_storage then says so)."""
    pvcs = await kube.list("v1", "PersistentVolumeClaim", namespace, labels=dict(labels))
    claims = claims_of(statefulset, pvcs, [v.claim for v in volumes])
    names = {c.storage_class for c in claims if c.storage_class} | {v.storage_class for v in volumes if v.storage_class}
    classes = {}
    for name in sorted(names):
        found = await kube.get("storage.k8s.io/v1", "StorageClass", name)
        if found is not None:
            classes[name] = StorageClassView.from_object(found)
    return claims, classes
