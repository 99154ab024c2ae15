"""Growing the brokers' volumes when spec.storage.size rises: `plan_storage(...) -> StoragePlan`. Pure.

A StatefulSet's volumeClaimTemplates are immutable, so a larger size takes three moves (the
Kubernetes recipe for resizing a StatefulSet's volumes, as Strimzi's PvcReconciler does it):

1. every broker claim below the new size gets spec.resources.requests.storage raised (ExpandClaim),
   only when its StorageClass has allowVolumeExpansion true (else the API server's
   PersistentVolumeClaimResize admission refuses it) and the claim is Bound (the API server
   refuses to resize an unbound claim; it is patched on a later pass, once bound);
2. the StatefulSet is deleted with propagationPolicy Orphan (`recreate_statefulset`): its pods and
   claims stay, no broker restarts. Never while a scale is under way: a re-created StatefulSet
   would scale without the drain that plan_scale does first;
3. the next pass re-creates it with the new claim template (reconcile.plan_owned_objects). It adopts
   the pods; their revision is unchanged (a revision hashes the pod template only), so nothing rolls.

The `StorageResized` condition says where the claims are: the size requested vs status.capacity,
and FileSystemResizePending where the volume grew and the kubelet still has to grow the file system.
A class that cannot expand changes nothing and says so (StorageClassNotExpandable, with its name).
Shrinking is refused by the CRD (a CEL rule with quantity()); a spec below the claims anyway (an
object stored before that rule) is reported (ShrinkRefused), never applied.

With several volumes (spec.storage.volumes, JBOD) each volume is planned alone over its own claims
(`data-<id>-<statefulset>-<n>`) and its own StorageClass, and `combine` makes one plan and one condition.
Adding or removing a volume of a running cluster is refused (the CRD refuses it; a spec stored before
that rule gets VolumesChanged and nothing is applied): a new claim template would need the StatefulSet
re-created *and* every broker restarted onto a new, empty log dir, and a removed one would drop data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tinystream.operator.k8s.conditions import Condition, StorageReason

CONDITION_TYPE = "StorageResized"

# A Kubernetes quantity (apimachinery resource.Quantity): a decimal number, then a binary suffix,
# a decimal suffix or a decimal exponent.
_QUANTITY = re.compile(r"^([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_SUFFIXES = {"": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
             "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
             "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
             **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))}}


def quantity(text: str) -> Decimal:
    """The value of a Kubernetes quantity ("10Gi", "1.5G", "5e9"), in bytes for a storage size."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, suffix = match.group(1), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return Decimal(number) * Decimal(10) ** int(suffix[1:])
    return Decimal(number) * _SUFFIXES[suffix]


# --- what was observed --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Claim:
    """One broker's PersistentVolumeClaim, as far as resizing goes."""

    name: str
    ordinal: int
    requested: str
    capacity: str | None = None  # status.capacity.storage: what the volume's file system has now
    bound: bool = False
    storage_class: str | None = None
    conditions: tuple[str, ...] = ()  # status.conditions types with status True (Resizing, FileSystemResizePending)
    volume: str = "data"  # the claim template it comes from (model.StorageVolume.claim)

    @classmethod
    def from_pvc(cls, pvc: Mapping[str, Any], volume: str = "data") -> Claim:
        spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
        name = pvc["metadata"]["name"]
        return cls(name=name, ordinal=int(name.rsplit("-", 1)[1]), volume=volume,
                   requested=str(((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")),
                   capacity=(status.get("capacity") or {}).get("storage"),
                   bound=status.get("phase") == "Bound", storage_class=spec.get("storageClassName"),
                   conditions=tuple(c["type"] for c in status.get("conditions") or () if c.get("status") == "True"))

    @property
    def state(self) -> str:
        """"data-demo-broker-0 requested 2Gi, capacity 1Gi (FileSystemResizePending)"."""
        notes = f" ({', '.join(self.conditions)})" if self.conditions else ""
        held = f"capacity {self.capacity}" if self.capacity else "not bound"
        return f"{self.name} requested {self.requested}, {held}{notes}"


def claims_of(statefulset: str, pvcs: Sequence[Mapping[str, Any]], templates: Sequence[str]) -> tuple[Claim, ...]:
    """`statefulset`'s data claims among `pvcs`: <template>-<statefulset>-<ordinal> for each of its claim
    templates (data-... for the single volume, data-<id>-... with several)."""
    prefixes = {f"{template}-{statefulset}-": template for template in templates}
    found = []
    for pvc in pvcs:
        name = pvc["metadata"]["name"]
        template = next((t for p, t in prefixes.items() if name.startswith(p) and name[len(p):].isdigit()), None)
        if template is not None:
            found.append(Claim.from_pvc(pvc, template))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class StorageClassView:
    name: str
    expandable: bool  # allowVolumeExpansion: true

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> StorageClassView:
        return cls(obj["metadata"]["name"], obj.get("allowVolumeExpansion") is True)


# --- what to do ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ExpandClaim:
    """Raise a claim's spec.resources.requests.storage (the volume's driver grows the volume)."""

    name: str
    size: str


@dataclass(frozen=True, slots=True)
class StoragePlan:
    expand: tuple[ExpandClaim, ...]
    recreate_statefulset: bool  # delete it with propagationPolicy Orphan; the next pass re-creates it
    condition: Condition


def plan_storage(*, size: str, claims: Sequence[Claim], replicas: int, template_size: str | None,
                 storage_class: StorageClassView | None, class_name: str | None, scaling: bool,
                 generation: int | None = None, field: str = "spec.storage.size") -> StoragePlan:
    """What spec.storage.size asks of the claims of brokers 0..replicas-1 and of the StatefulSet's template.

    `template_size` is the StatefulSet's claim template size (None: no StatefulSet); `storage_class` the
    claims' class (None: not found); `class_name` its name for messages; `scaling`: a scale is under way.
    """
    want = quantity(size)
    kept = sorted((c for c in claims if c.ordinal < replicas), key=lambda c: c.ordinal)

    def plan(status: bool, reason: StorageReason, message: str, expand: Sequence[ExpandClaim] = (),
             recreate: bool = False) -> StoragePlan:
        return StoragePlan(tuple(expand), recreate, Condition(CONDITION_TYPE, status, reason.value, message, generation))

    larger = [c for c in kept if quantity(c.requested) > want]
    if larger or (template_size is not None and quantity(template_size) > want):
        held = ", ".join(f"{c.name} {c.requested}" for c in larger) or f"the claim template {template_size}"
        return plan(False, StorageReason.SHRINK_REFUSED,
                    f"{field} {size} is below the existing claims ({held}); a volume cannot shrink, "
                    f"nothing was changed")
    below = [c for c in kept if quantity(c.requested) < want]
    template_below = template_size is not None and quantity(template_size) < want
    if below or template_below:
        return _grow(size, below, template_below, storage_class, class_name, scaling, plan, field)
    return _report(size, kept, plan)


def _grow(size: str, below: Sequence[Claim], template_below: bool, storage_class: StorageClassView | None,
          class_name: str | None, scaling: bool, plan: Any, field: str) -> StoragePlan:
    named = class_name or "(the cluster's default)"
    if storage_class is None:
        return plan(False, StorageReason.CLASS_NOT_FOUND,
                    f"{field} {size} not applied: StorageClass {named} of the claims was not found, "
                    f"so whether it allows volume expansion is unknown; nothing was changed")
    if not storage_class.expandable:
        return plan(False, StorageReason.NOT_EXPANDABLE,
                    f"{field} {size} not applied: StorageClass {storage_class.name} does not allow "
                    f"volume expansion (allowVolumeExpansion is not true); the claims keep their size, nothing "
                    f"was changed")
    expand = [ExpandClaim(c.name, size) for c in below if c.bound]
    unbound = [c.name for c in below if not c.bound]
    recreate = template_below and not scaling
    parts = [f"expanding {len(expand)} claim(s) to {size}"] if expand else []
    if unbound:
        parts.append(f"waiting for {', '.join(unbound)} to be bound before expanding")
    if recreate:
        parts.append("re-creating the StatefulSet with the new claim template (its pods are orphaned, not restarted)")
    elif template_below:
        parts.append("the StatefulSet's claim template changes once the scale is done")
    return plan(False, StorageReason.RESIZING, "; ".join(parts), expand, recreate)


def _report(size: str, claims: Sequence[Claim], plan: Any) -> StoragePlan:
    bound = [c for c in claims if c.bound]
    pending_fs = [c for c in bound if "FileSystemResizePending" in c.conditions]
    if pending_fs:
        return plan(False, StorageReason.FILE_SYSTEM_RESIZE_PENDING,
                    "volume(s) expanded, the kubelet grows the file system when it next mounts them: "
                    + "; ".join(c.state for c in pending_fs))
    short = [c for c in bound if c.capacity is None or quantity(c.capacity) < quantity(c.requested)]
    if short:
        return plan(False, StorageReason.RESIZING, "waiting for the volumes to grow: " + "; ".join(c.state for c in short))
    waiting = len(claims) - len(bound)
    note = f" ({waiting} not bound yet)" if waiting else ""
    return plan(True, StorageReason.AT_SIZE, f"{len(claims)} claim(s) at the requested {size}{note}")


# --- several volumes ----------------------------------------------------------------------

#: Which reason speaks for several volumes' plans: the first one found, in this order (the worst first).
_PRECEDENCE = (StorageReason.VOLUMES_CHANGED, StorageReason.SHRINK_REFUSED, StorageReason.CLASS_NOT_FOUND,
               StorageReason.NOT_EXPANDABLE, StorageReason.RESIZING, StorageReason.FILE_SYSTEM_RESIZE_PENDING,
               StorageReason.AT_SIZE)


_REFUSALS = frozenset(r.value for r in (StorageReason.SHRINK_REFUSED, StorageReason.CLASS_NOT_FOUND,
                                        StorageReason.NOT_EXPANDABLE))


def volumes_changed(*, wanted: Sequence[str], templates: Sequence[str] | None,
                    generation: int | None = None) -> StoragePlan | None:
    """A refusal when the spec's volumes (claim template names) are not the StatefulSet's; None when they are
    (or there is no StatefulSet yet). Nothing is applied: the StatefulSet keeps its pods and claims."""
    if templates is None or sorted(wanted) == sorted(templates):
        return None
    added = sorted(set(wanted) - set(templates))
    removed = sorted(set(templates) - set(wanted))
    said = "; ".join(part for part in (f"added {', '.join(added)}" if added else "",
                                       f"removed {', '.join(removed)}" if removed else "") if part)
    return StoragePlan((), False, Condition(
        CONDITION_TYPE, False, StorageReason.VOLUMES_CHANGED.value,
        f"spec.storage volumes changed ({said}) but a running cluster's volumes are fixed: the StatefulSet's "
        f"claim templates are {', '.join(sorted(templates))}; nothing was changed (restore the volumes, or "
        f"create a new cluster and move the topics)", generation))


def combine(plans: Sequence[tuple[str, StoragePlan]]) -> StoragePlan:
    """One plan for several volumes' (label, plan): every expansion, one re-creation, the worst condition.

    When one volume's size is refused, no volume changes: the StatefulSet re-created for another would
    take the refused volume's spec size as its claim template. A single plan is returned as it is (the
    single-volume cluster's messages stay the same)."""
    if len(plans) == 1:
        return plans[0][1]
    order = {reason.value: i for i, reason in enumerate(_PRECEDENCE)}
    worst = min((p.condition for _, p in plans), key=lambda c: order.get(c.reason, 0))
    message = "; ".join(f"{label}: {p.condition.message}" for label, p in plans
                        if p.condition.reason == worst.reason)
    if worst.reason in _REFUSALS:  # the re-created StatefulSet would take every volume's spec size: none moves
        return StoragePlan((), False, Condition(CONDITION_TYPE, worst.status, worst.reason, message,
                                                worst.observed_generation))
    return StoragePlan(tuple(e for _, p in plans for e in p.expand), any(p.recreate_statefulset for _, p in plans),
                       Condition(CONDITION_TYPE, worst.status, worst.reason, message, worst.observed_generation))
