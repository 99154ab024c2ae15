"""spec.template.pod: what a user adds to the broker pods (Strimzi's spec.kafka.template.pod).

The operator builds the broker pod itself (resources.py); the template adds
scheduling (affinity, tolerations, nodeSelector, topologySpreadConstraints,
priorityClassName), imagePullSecrets, the pod's securityContext, and labels
and annotations. Three rules:

- The operator's keys stay the operator's: a label or annotation key it sets
  or selects by (its app.kubernetes.io labels, anything in the tinystream.io
  domain, such as the config-hash and cluster-CA annotations that roll the
  brokers) or that the StatefulSet controller sets on each pod is reserved.
  The CRD refuses one; should one get past it, `problems` names it and the
  reconciler changes nothing (InvalidPodTemplate), as with spec.config.
- A field the template gives replaces the operator's default for it, as in
  Strimzi: `affinity` replaces the preferred one-broker-per-node
  anti-affinity, `securityContext` the pod's non-root security context. A
  topology spread constraint on spec.rack's topologyKey replaces the rack's;
  the others are added to it.
- Every change rolls the brokers one at a time, as a config change does: the
  pod template changes, so the StatefulSet gets a new revision (plan_roll).
  `digest` is written on the StatefulSet, so removing a field is seen too
  (a desired object that merely lacks a field does not differ from one that
  has it; the server-side apply that follows drops it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The operator's domain: every label and annotation key in it (or a subdomain) is the operator's.
OPERATOR_DOMAIN = "tinystream.io"
#: Label keys the operator sets on every broker pod (resources.labels) or the StatefulSet controller sets
#: on each (its revision, the pod's name and ordinal): a user's value would move a pod out of its
#: selector, or out of the roll's view.
RESERVED_LABELS = frozenset({
    "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of",
    "controller-revision-hash", "statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index",
})
# A qualified name as Kubernetes' metadata validation has it: an optional DNS-subdomain prefix, then a name.
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_QUALIFIED = re.compile(rf"^({_PREFIX}/)?{_NAME}$")


def in_operator_domain(key: str) -> bool:
    """`tinystream.io/x`: the operator's, as `strimzi.io/` is Strimzi's (the CRD's rule checks the same prefix)."""
    return key.startswith(OPERATOR_DOMAIN + "/")


def reserved_label(key: str) -> bool:
    return key in RESERVED_LABELS or in_operator_domain(key)


def reserved_annotation(key: str) -> bool:
    return in_operator_domain(key)


@dataclass(frozen=True, slots=True)
class PodTemplate:
    """spec.template.pod as written; empty fields add nothing to the pod."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    affinity: Mapping[str, Any] | None = None  # replaces the default anti-affinity
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = ()
    priority_class_name: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    security_context: Mapping[str, Any] | None = None  # replaces the default pod security context

    @classmethod
    def from_spec(cls, pod: Mapping[str, Any] | None) -> PodTemplate:
        pod = pod or {}
        meta = pod.get("metadata") or {}
        return cls(
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
            affinity=dict(pod["affinity"]) if pod.get("affinity") else None,
            tolerations=tuple(dict(t) for t in pod.get("tolerations") or ()),
            node_selector={str(k): str(v) for k, v in (pod.get("nodeSelector") or {}).items()},
            topology_spread_constraints=tuple(dict(c) for c in pod.get("topologySpreadConstraints") or ()),
            priority_class_name=str(pod["priorityClassName"]) if pod.get("priorityClassName") else None,
            image_pull_secrets=tuple(str(s["name"]) for s in pod.get("imagePullSecrets") or () if s.get("name")),
            security_context=dict(pod["securityContext"]) if pod.get("securityContext") else None,
        )

    def problems(self) -> list[str]:
        """Why the template cannot be used as written: reserved or malformed label and annotation keys."""
        found = [f"metadata.labels {k}: the operator's own label" for k in sorted(self.labels) if reserved_label(k)]
        found += [f"metadata.annotations {k}: the operator's own annotation (the tinystream.io domain)"
                  for k in sorted(self.annotations) if reserved_annotation(k)]
        found += [f"metadata.labels {k}: not a valid label key" for k in sorted(self.labels)
                  if not _QUALIFIED.match(k)]
        found += [f"metadata.annotations {k}: not a valid annotation key" for k in sorted(self.annotations)
                  if not _QUALIFIED.match(k)]
        return found

    @property
    def digest(self) -> str:
        """A short hash of the template as written (sorted keys): it changes with any field, removals too."""
        data = json.dumps([self.labels, self.annotations, self.affinity, self.tolerations, self.node_selector,
                           self.topology_spread_constraints, self.priority_class_name, self.image_pull_secrets,
                           self.security_context], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode()).hexdigest()[:16]


def pod_labels(template: PodTemplate, own: Mapping[str, str]) -> dict[str, str]:
    """The template's labels under the operator's `own` (which win; reserved keys never get this far)."""
    return {**{k: v for k, v in sorted(template.labels.items()) if not reserved_label(k)}, **own}


def pod_annotations(template: PodTemplate, own: Mapping[str, str]) -> dict[str, str]:
    return {**{k: v for k, v in sorted(template.annotations.items()) if not reserved_annotation(k)}, **own}


def spread_constraints(template: PodTemplate, rack: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rack's constraints (resources.py), unless the template has one on the same topologyKey; then
    the template's."""
    keys = {c.get("topologyKey") for c in template.topology_spread_constraints}
    return [dict(c) for c in rack if c.get("topologyKey") not in keys] + [
        dict(c) for c in template.topology_spread_constraints]


def scheduling(template: PodTemplate) -> dict[str, Any]:
    """The pod-spec fields the template adds outright (none of them has an operator default)."""
    fields: dict[str, Any] = {}
    if template.tolerations:
        fields["tolerations"] = [dict(t) for t in template.tolerations]
    if template.node_selector:
        fields["nodeSelector"] = dict(sorted(template.node_selector.items()))
    if template.priority_class_name:
        fields["priorityClassName"] = template.priority_class_name
    if template.image_pull_secrets:
        fields["imagePullSecrets"] = [{"name": name} for name in template.image_pull_secrets]
    return fields
