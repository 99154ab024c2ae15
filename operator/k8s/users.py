"""What a TinyStreamUser needs in its cluster's metadata: its ACLs and its SCRAM credential. Pure.

The operator owns every ACL of the user's principal: `plan_user_access`
compares the ACLs the spec asks for with those the controller's image holds
for that principal, and answers what to create and what to delete (an ACL
added by hand with kafka-acls.sh for this principal is removed, as Strimzi's
User Operator does). The SCRAM credential is set when the image has none for
the user or one made from another password; the password itself is derived
by the operator (user_secrets.py) and never stored in the image, only its
salted keys.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass

from tinystream.operator.controller.events import AclFilter, ScramDeletion
from tinystream.operator.controller.image import AclRecord, ScramCredentialRecord
from tinystream.operator.k8s.model import UserAcl, UserSpec
from tinystream.scram_users import ScramCredential

MECHANISM = "SCRAM-SHA-512"
CLUSTER_RESOURCE = "kafka-cluster"  # Kafka's one CLUSTER resource name

_RESOURCE = {"topic": "TOPIC", "group": "GROUP", "cluster": "CLUSTER", "transactionalId": "TRANSACTIONAL_ID"}
_OPERATION = {"All": "ALL", "Read": "READ", "Write": "WRITE", "Create": "CREATE", "Delete": "DELETE",
              "Alter": "ALTER", "Describe": "DESCRIBE", "ClusterAction": "CLUSTER_ACTION",
              "DescribeConfigs": "DESCRIBE_CONFIGS", "AlterConfigs": "ALTER_CONFIGS",
              "IdempotentWrite": "IDEMPOTENT_WRITE"}


@dataclass(frozen=True, slots=True)
class UserAccessPlan:
    create: tuple[AclRecord, ...] = ()
    delete: tuple[AclFilter, ...] = ()  # exact filters, one per ACL to remove
    upsert: tuple[ScramCredentialRecord, ...] = ()
    remove: tuple[ScramDeletion, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.create or self.delete or self.upsert or self.remove)


def _records(acl: UserAcl, principal: str) -> Iterable[AclRecord]:
    cluster = acl.resource_type == "cluster"
    for operation in acl.operations:
        yield AclRecord(resource_type=_RESOURCE[acl.resource_type],
                        resource_name=CLUSTER_RESOURCE if cluster else acl.name,
                        pattern_type="PREFIXED" if acl.pattern_type == "prefix" and not cluster else "LITERAL",
                        principal=principal, host=acl.host, operation=_OPERATION[operation],
                        permission="ALLOW" if acl.allow else "DENY")


def desired_acls(user: UserSpec) -> frozenset[AclRecord]:
    return frozenset(r for acl in user.acls for r in _records(acl, user.principal))


def exact_filter(record: AclRecord) -> AclFilter:
    return AclFilter(resource_type=record.resource_type, resource_name=record.resource_name,
                     pattern_type=record.pattern_type, principal=record.principal, host=record.host,
                     operation=record.operation, permission=record.permission)


def scram_record(user: str, password: str) -> ScramCredentialRecord:
    made = ScramCredential.from_password(MECHANISM, password)
    b64 = base64.b64encode
    return ScramCredentialRecord(user=user, mechanism=MECHANISM, salt=b64(made.salt).decode(),
                                 stored_key=b64(made.stored_key).decode(), server_key=b64(made.server_key).decode(),
                                 iterations=made.iterations)


def _made_from(record: ScramCredentialRecord, password: str) -> bool:
    b64 = base64.b64decode
    credential = ScramCredential(b64(record.salt), b64(record.stored_key), b64(record.server_key), record.iterations)
    return credential.matches_password(record.mechanism, password)


def plan_user_access(user: UserSpec, acls: Iterable[AclRecord], credentials: Iterable[ScramCredentialRecord], *,
                     password: str | None) -> UserAccessPlan:
    """ACLs to create and delete so the principal has exactly the spec's; the credential when it is stale."""
    held = {a for a in acls if a.principal == user.principal}
    wanted = desired_acls(user)
    upsert: tuple[ScramCredentialRecord, ...] = ()
    if user.authentication == "scram-sha-512" and password is not None:
        mine = [c for c in credentials if c.user == user.name and c.mechanism == MECHANISM]
        if not mine or not _made_from(mine[0], password):
            upsert = (scram_record(user.name, password),)
    return UserAccessPlan(create=tuple(sorted(wanted - held)),
                          delete=tuple(exact_filter(a) for a in sorted(held - wanted)), upsert=upsert)


def plan_user_removal(user: UserSpec, acls: Iterable[AclRecord],
                      credentials: Iterable[ScramCredentialRecord]) -> UserAccessPlan:
    """Everything the user had: its ACLs and its credentials (a deleted user can do nothing)."""
    held = sorted(a for a in acls if a.principal == user.principal)
    gone = tuple(ScramDeletion(user=c.user, mechanism=c.mechanism) for c in credentials if c.user == user.name)
    return UserAccessPlan(delete=tuple(exact_filter(a) for a in held),
                          remove=gone if user.authentication == "scram-sha-512" else ())
