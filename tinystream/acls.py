"""Kafka's ACL model as data: bindings, filters and how they match. Pure, no I/O.

Shared by the controller (which stores bindings in the metadata image and
deletes them by filter) and the broker (whose authorizer decides with them),
so both read one definition. The numbers are Kafka's wire values
(org.apache.kafka.common.acl / resource), the names its enum names.

    binding = AclBinding(ResourceType.TOPIC, "orders-", PatternType.PREFIXED,
                         "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    binding.pattern_matches_resource(ResourceType.TOPIC, "orders-eu")  -> True
    AclBindingFilter.any().matches(binding)                            -> True

A binding names a concrete pattern (LITERAL or PREFIXED, a real operation and
permission); a filter (DescribeAcls, DeleteAcls) may also say ANY and MATCH.
`validate_binding` / `validate_filter` give the reason a request's entry is
refused (Kafka answers INVALID_REQUEST with it), or None.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # Kafka's one CLUSTER resource


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters: either kind, the name compared exactly
    MATCH = 2  # filters: every pattern that would apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Resource types this broker keeps ACLs for (no delegation tokens, no user quotas/tokens here).
SUPPORTED_RESOURCE_TYPES = frozenset({ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                      ResourceType.TRANSACTIONAL_ID})
_CONCRETE_PATTERNS = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
_CONCRETE_PERMISSIONS = frozenset({AclPermissionType.ALLOW, AclPermissionType.DENY})
_NOT_CONCRETE_OPERATIONS = frozenset({AclOperation.UNKNOWN, AclOperation.ANY})

# Kafka's AclEntry.supportedOperations: what an ACL on each resource type may name.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),  # 4.x: KIP-848
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
}

# An ALLOW of the key also allows these (Kafka's AclEntry / StandardAuthorizerData): READ, WRITE, DELETE
# and ALTER each imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. DENY implies nothing.
IMPLIED_BY_ALLOW: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


def _enum(cls: type[enum.IntEnum], value: Any) -> Any:
    """An enum member from its wire number or name; UNKNOWN for anything else (refused by validation)."""
    if isinstance(value, str):
        return cls.__members__.get(value.upper(), cls(0))
    try:
        return cls(int(value))
    except (TypeError, ValueError):
        return cls(0)


def _valid_principal(principal: str) -> bool:
    kind, colon, name = principal.partition(":")
    return bool(colon and kind and name)


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern plus an access control entry (Kafka's AclBinding)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def pattern_matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL's pattern applies to the resource (literal, the '*' wildcard, or a prefix)."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD_RESOURCE)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def to_dict(self) -> dict[str, Any]:
        """Kafka's names: the controller image and its HTTP API carry bindings this way."""
        return {"resource_type": self.resource_type.name, "resource_name": self.resource_name,
                "pattern_type": self.pattern_type.name, "principal": self.principal, "host": self.host,
                "operation": self.operation.name, "permission": self.permission.name}

    @classmethod
    def from_dict(cls, data: Any) -> AclBinding:
        """A binding from `to_dict`'s shape; a ValueError names what is wrong (nothing unchecked gets in)."""
        if not isinstance(data, dict):
            raise ValueError(f"an ACL binding is an object, not {type(data).__name__}")
        fields = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(f"unknown ACL field(s) {unknown}")
        if not all(isinstance(data.get(f), str) for f in fields):
            raise ValueError(f"an ACL binding needs the string fields {', '.join(fields)}")
        binding = cls(_enum(ResourceType, data["resource_type"]), data["resource_name"],
                      _enum(PatternType, data["pattern_type"]), data["principal"], data["host"],
                      _enum(AclOperation, data["operation"]), _enum(AclPermissionType, data["permission"]))
        problem = validate_binding(binding)
        if problem:
            raise ValueError(problem)
        return binding

    @classmethod
    def of(cls, resource_type: Any, resource_name: str, pattern_type: Any, principal: str, host: str,
           operation: Any, permission: Any) -> AclBinding:
        """From wire numbers (or names); unknown values become UNKNOWN for `validate_binding` to refuse."""
        return cls(_enum(ResourceType, resource_type), resource_name, _enum(PatternType, pattern_type), principal,
                   host, _enum(AclOperation, operation), _enum(AclPermissionType, permission))


def validate_binding(b: AclBinding) -> str | None:
    """Why a binding cannot be stored (CreateAcls answers INVALID_REQUEST with it), or None."""
    if b.resource_type not in SUPPORTED_RESOURCE_TYPES:
        return f"ACLs on resource type {b.resource_type.name} are not supported"
    if b.pattern_type not in _CONCRETE_PATTERNS:
        return f"an ACL needs pattern type LITERAL or PREFIXED, not {b.pattern_type.name}"
    if b.operation in _NOT_CONCRETE_OPERATIONS:
        return f"an ACL needs an operation, not {b.operation.name}"
    if b.operation != AclOperation.ALL and b.operation not in SUPPORTED_OPERATIONS[b.resource_type]:
        return f"operation {b.operation.name} does not apply to resource type {b.resource_type.name}"
    if b.permission not in _CONCRETE_PERMISSIONS:
        return f"an ACL needs permission ALLOW or DENY, not {b.permission.name}"
    if not b.resource_name:
        return "an ACL needs a resource name"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME!r}, not {b.resource_name!r}"
    if b.pattern_type == PatternType.PREFIXED and b.resource_name == WILDCARD_RESOURCE:
        return "a PREFIXED ACL cannot use the '*' wildcard (use LITERAL '*')"
    if not _valid_principal(b.principal):
        return f"the principal {b.principal!r} is not of the form <type>:<name> (e.g. User:alice)"
    if not b.host:
        return "an ACL needs a host ('*' for any)"
    return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select by; None fields match anything (Kafka's AclBindingFilter)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def any(cls) -> AclBindingFilter:
        return cls()

    @classmethod
    def of(cls, resource_type: Any, resource_name: str | None, pattern_type: Any, principal: str | None,
           host: str | None, operation: Any, permission: Any) -> AclBindingFilter:
        return cls(_enum(ResourceType, resource_type), resource_name, _enum(PatternType, pattern_type), principal,
                   host, _enum(AclOperation, operation), _enum(AclPermissionType, permission))

    def matches(self, b: AclBinding) -> bool:
        return self._pattern_matches(b) and self._entry_matches(b)

    def _pattern_matches(self, b: AclBinding) -> bool:
        # Kafka's ResourcePatternFilter.matches.
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, b.pattern_type):
            return self.resource_name == b.resource_name
        if b.pattern_type == PatternType.LITERAL:  # MATCH
            return b.resource_name in (self.resource_name, WILDCARD_RESOURCE)
        return self.resource_name.startswith(b.resource_name)

    def _entry_matches(self, b: AclBinding) -> bool:
        # Kafka's AccessControlEntryFilter.matches.
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and self.operation in (AclOperation.ANY, b.operation)
                and self.permission in (AclPermissionType.ANY, b.permission))

    def to_dict(self) -> dict[str, Any]:
        return {"resource_type": self.resource_type.name, "resource_name": self.resource_name,
                "pattern_type": self.pattern_type.name, "principal": self.principal, "host": self.host,
                "operation": self.operation.name, "permission": self.permission.name}

    @classmethod
    def from_dict(cls, data: Any) -> AclBindingFilter:
        if not isinstance(data, dict):
            raise ValueError(f"an ACL filter is an object, not {type(data).__name__}")
        fields = {"resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission"}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ValueError(f"unknown ACL filter field(s) {unknown}")
        for name in ("resource_name", "principal", "host"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"ACL filter field {name} is a string or null")
        result = cls.of(data.get("resource_type", "ANY"), data.get("resource_name"), data.get("pattern_type", "ANY"),
                        data.get("principal"), data.get("host"), data.get("operation", "ANY"),
                        data.get("permission", "ANY"))
        problem = validate_filter(result)
        if problem:
            raise ValueError(problem)
        return result


def validate_filter(f: AclBindingFilter) -> str | None:
    """Why a filter cannot be used (an UNKNOWN anywhere: Kafka refuses it with INVALID_REQUEST), or None."""
    for value in (f.resource_type, f.pattern_type, f.operation, f.permission):
        if value == 0:
            return f"the filter has an unknown {type(value).__name__}"
    return None
