"""ACLs and SCRAM credentials in the image: checking records and selecting them by filter. Pure.

The ACL rules themselves are `tinystream.acls` (shared with the broker's
authorizer); this module maps the image's records (enum names as strings, see
image.py) onto them. Kafka's controller answers a bad ACL with INVALID_REQUEST;
so does `core.apply` with the reason found here.
"""

from __future__ import annotations

import base64
import binascii

from tinystream.acls import AclBinding, AclBindingFilter
from tinystream.operator.controller.events import AclFilter
from tinystream.operator.controller.image import AclRecord, ScramCredentialRecord

SCRAM_MECHANISMS = frozenset({"SCRAM-SHA-256", "SCRAM-SHA-512"})
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum
MAX_ITERATIONS = 16384  # Kafka's maximum (AlterUserScramCredentials refuses more)


def binding(record: AclRecord) -> AclBinding:
    """The ACL a record names; ValueError with the reason when it is not a valid one."""
    return AclBinding.from_dict({
        "resource_type": record.resource_type, "resource_name": record.resource_name,
        "pattern_type": record.pattern_type, "principal": record.principal, "host": record.host,
        "operation": record.operation, "permission": record.permission,
    })


def record(b: AclBinding) -> AclRecord:
    return AclRecord(**b.to_dict())


def acl_problem(r: AclRecord) -> str | None:
    try:
        binding(r)
    except ValueError as exc:
        return str(exc)
    return None


def binding_filter(f: AclFilter) -> AclBindingFilter:
    """ValueError with the reason when the filter names something unknown."""
    return AclBindingFilter.from_dict({
        "resource_type": f.resource_type, "resource_name": f.resource_name, "pattern_type": f.pattern_type,
        "principal": f.principal, "host": f.host, "operation": f.operation, "permission": f.permission,
    })


def matching(acls: tuple[AclRecord, ...], f: AclBindingFilter) -> tuple[AclRecord, ...]:
    return tuple(r for r in acls if f.matches(binding(r)))


def credential_problem(c: ScramCredentialRecord) -> str | None:
    if not c.user or "," in c.user or "=" in c.user:
        return f"a SCRAM user name is non-empty without ',' or '=', not {c.user!r}"
    if c.mechanism not in SCRAM_MECHANISMS:
        return f"unknown SCRAM mechanism {c.mechanism!r}"
    if not MIN_ITERATIONS <= c.iterations <= MAX_ITERATIONS:
        return f"iterations must be within [{MIN_ITERATIONS}, {MAX_ITERATIONS}], not {c.iterations}"
    for name in ("salt", "stored_key", "server_key"):
        try:
            if not base64.b64decode(getattr(c, name), validate=True):
                return f"{name} is empty"
        except (binascii.Error, ValueError):
            return f"{name} is not base64"
    return None
