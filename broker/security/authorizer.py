"""The ACL authorizer: may this principal, from this host, do this operation on this resource? Pure logic.

Kafka's StandardAuthorizer rules (KIP-500's, same as the older AclAuthorizer):

1. a super user (`super.users`, plus this cluster's inter-broker user) may do anything;
2. the ACLs that apply are those whose pattern matches the resource (LITERAL
   name, LITERAL '*', or PREFIXED prefix), whose principal is the caller's or
   'User:*', and whose host is the caller's address or '*';
3. any applying DENY of the operation (or of ALL) refuses: DENY overrides ALLOW;
4. an applying ALLOW of the operation, of ALL, or of an operation that implies
   it (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
   DESCRIBE_CONFIGS) allows;
5. otherwise refused, unless no ACL at all names the resource and
   `allow.everyone.if.no.acl.found` is true.

`authorize_any` is Kafka's authorizeByResourceType (KIP-679): is there a
resource of this type the caller may do the operation on? InitProducerId
without a transactional id uses it (WRITE on any topic grants IDEMPOTENT_WRITE).

The broker holds one `Authorizer` (None when `authorizer.class.name` is
unset: everything is allowed, as before); the controller's image replaces its
ACLs (`replace`) whenever they change, so every broker decides alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tinystream.acls import (
    IMPLIED_BY_ALLOW,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

# authorizer.class.name values that turn ACLs on: Kafka's KRaft and ZooKeeper authorizers, and short names.
AUTHORIZER_NAMES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "StandardAuthorizer",
    "AclAuthorizer",
    "acl",
})


class AuthorizerConfigError(ValueError):
    """`authorizer.class.name` names an authorizer this broker does not have."""


def authorizer_enabled(class_name: str | None) -> bool:
    """Whether `authorizer.class.name` turns ACLs on (empty: off); an unknown class is a config error."""
    if not class_name or not class_name.strip():
        return False
    if class_name.strip() not in AUTHORIZER_NAMES:
        raise AuthorizerConfigError(
            f"authorizer.class.name={class_name!r} is not known; use "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or 'acl'), or leave it empty for no ACLs")
    return True


def parse_super_users(value: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by ';' (User:admin;User:CN=broker)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


@dataclass(frozen=True, slots=True)
class _Index:
    """The ACLs of one resource type: literal ones by name, the rest in lists."""

    literal: dict[str, tuple[AclBinding, ...]]
    prefixed: tuple[AclBinding, ...]


class Authorizer:
    def __init__(self, *, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: tuple[AclBinding, ...] = ()
        self._index: dict[ResourceType, _Index] = {}
        self.replace(acls)

    @property
    def acls(self) -> tuple[AclBinding, ...]:
        return self._acls

    def replace(self, acls: Iterable[AclBinding]) -> None:
        """Take a new ACL set (the applied image's), whole: no request sees half of it."""
        ordered = tuple(sorted(set(acls)))
        literal: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        prefixed: dict[ResourceType, list[AclBinding]] = {}
        for b in ordered:
            if b.pattern_type == PatternType.LITERAL:
                literal.setdefault(b.resource_type, {}).setdefault(b.resource_name, []).append(b)
            else:
                prefixed.setdefault(b.resource_type, []).append(b)
        self._index = {
            rt: _Index({k: tuple(v) for k, v in literal.get(rt, {}).items()}, tuple(prefixed.get(rt, ())))
            for rt in set(literal) | set(prefixed)
        }
        self._acls = ordered

    def _resource_acls(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        index = self._index.get(resource_type)
        if index is None:
            return []
        found = list(index.literal.get(name, ()))
        if name != WILDCARD_RESOURCE:
            found.extend(index.literal.get(WILDCARD_RESOURCE, ()))
        found.extend(b for b in index.prefixed if name.startswith(b.resource_name))
        return found

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """Whether `principal` connected from `host` may do `operation` on the named resource."""
        if principal in self.super_users:
            return True
        acls = self._resource_acls(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        implied = IMPLIED_BY_ALLOW.get(operation, frozenset())
        allowed = False
        for b in acls:
            if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD_HOST):
                continue
            if b.permission == AclPermissionType.DENY:
                if b.operation in (operation, AclOperation.ALL):
                    return False
            elif b.operation in (operation, AclOperation.ALL) or b.operation in implied:
                allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: some resource of this type allows `operation` to the caller.

        An ALLOW counts unless a DENY covers everything it could name: a DENY
        on LITERAL '*', on the same literal name, or on a prefix of its name.
        """
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        if index is None:
            return self.allow_if_no_acl
        mine = [b for bs in (*index.literal.values(), index.prefixed) for b in bs
                if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD_HOST)]
        denies = [b for b in mine if b.permission == AclPermissionType.DENY
                  and b.operation in (operation, AclOperation.ALL)]
        if any(b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD_RESOURCE for b in denies):
            return False
        implied = IMPLIED_BY_ALLOW.get(operation, frozenset())
        for b in mine:
            if b.permission != AclPermissionType.ALLOW:
                continue
            if b.operation not in (operation, AclOperation.ALL) and b.operation not in implied:
                continue
            if not any(_covers(d, b) for d in denies):
                return True
        return False


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether `deny` refuses every resource `allow` names."""
    if deny.pattern_type == PatternType.PREFIXED:
        return allow.resource_name.startswith(deny.resource_name)
    return allow.pattern_type == PatternType.LITERAL and deny.resource_name == allow.resource_name
