"""What a TinyStreamSchema asks of its cluster's registry, and what the answers mean for its status. Pure.

A pass is a short sequence of Confluent REST calls (docs/schema-registry.md):

    PUT  /config/{subject}            {"compatibility"}   only when spec.compatibility is set, first: the
                                                          registration below is checked at the new level
    POST /subjects/{subject}/versions {"schema", "schemaType", "references"}  -> {"id"}; registering a schema
                                                          the subject has already is no new version
    POST /subjects/{subject}          the same body        -> {"id", "version"}: the version for status

The first answer that is not a success ends the pass: 409 (incompatible) and
422 (42201 invalid schema, 42203 invalid level) are the user's to fix and
land in the Ready condition with the registry's message, tried again on a
spec change and by the periodic check (schema_handlers.py); a 5xx or no
answer is RegistryUnavailable and retried in 10 s.

Deletion follows spec.deletionPolicy: Keep (the default, as Confluent for
Kubernetes' and Strimzi's "the data outlives the resource" stance for things
clients depend on: serialized records name the schema id for ever) leaves
the subject as it is; Delete soft-deletes the subject (DELETE /subjects/{s}),
which a hard delete or a re-registration can follow by hand.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.operator.k8s.conditions import Condition, SchemaReason, ready
from tinystream.operator.k8s.model import SchemaSpec

KEEP, DELETE = "Keep", "Delete"


class Step(str, enum.Enum):
    CONFIG = "config"
    REGISTER = "register"
    LOOKUP = "lookup"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class RegistryCall:
    step: Step
    method: str
    path: str
    body: Mapping[str, Any] | None = None


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _subject_path(subject: str) -> str:
    """The subject as one path segment (RFC 3986 percent-encoding; `/` too): no urllib in a pure module."""
    return "".join(c if c in _UNRESERVED else "".join(f"%{b:02X}" for b in c.encode()) for c in subject)


def schema_body(spec: SchemaSpec) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": spec.schema, "schemaType": spec.schema_type}
    if spec.references:
        body["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in spec.references]
    return body


def register_calls(spec: SchemaSpec) -> list[RegistryCall]:
    """The calls of one pass, in order (module docstring)."""
    subject = _subject_path(spec.subject)
    calls = []
    if spec.compatibility:
        calls.append(RegistryCall(Step.CONFIG, "PUT", f"/config/{subject}", {"compatibility": spec.compatibility}))
    calls.append(RegistryCall(Step.REGISTER, "POST", f"/subjects/{subject}/versions", schema_body(spec)))
    calls.append(RegistryCall(Step.LOOKUP, "POST", f"/subjects/{subject}", schema_body(spec)))
    return calls


def deletion_calls(spec: SchemaSpec) -> list[RegistryCall]:
    """What deleting the resource does to the subject: nothing (Keep) or a soft delete (Delete)."""
    if spec.deletion_policy != DELETE:
        return []
    return [RegistryCall(Step.DELETE, "DELETE", f"/subjects/{_subject_path(spec.subject)}")]


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer that ends the pass: the Ready condition, and whether to try again (the registry's fault)."""

    condition: Condition
    retry: bool


def refusal(spec: SchemaSpec, step: Step, http_status: int | None, body: Any) -> Refusal | None:
    """None for a success; else why the pass stops. `http_status` None: no answer (unreachable)."""
    if http_status is not None and 200 <= http_status < 300:
        return None
    gen = spec.generation
    if http_status is None or http_status >= 500:
        what = "no answer" if http_status is None else f"HTTP {http_status}: {_message(body)}"
        return Refusal(ready(False, SchemaReason.REGISTRY_UNAVAILABLE, f"{step.value}: {what}", generation=gen), True)
    code = body.get("error_code") if isinstance(body, Mapping) else None
    text = f"{step.value}: {_message(body)} (error_code {code if code is not None else http_status})"
    if http_status == 409 and step is not Step.DELETE:
        return Refusal(ready(False, SchemaReason.INCOMPATIBLE, text, generation=gen), False)
    if code in (42201, 42203):
        return Refusal(ready(False, SchemaReason.INVALID, text, generation=gen), False)
    return Refusal(ready(False, SchemaReason.REFUSED, text, generation=gen), http_status in (401, 403))


def _message(body: Any) -> str:
    if isinstance(body, Mapping) and body.get("message"):
        return str(body["message"])
    return str(body)[:500]


def registered_status(spec: SchemaSpec, lookup: Mapping[str, Any]) -> tuple[dict[str, Any], Condition]:
    """status fields and Ready from the lookup's answer ({"id", "version", ...})."""
    fields = {"subject": spec.subject, "id": int(lookup["id"]), "version": int(lookup["version"]),
              "observedGeneration": spec.generation}
    message = f"{spec.subject} version {fields['version']}, id {fields['id']}"
    return fields, ready(True, SchemaReason.READY, message, generation=spec.generation)
