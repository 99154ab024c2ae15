"""What a TinyStreamUser needs: its ACLs, SCRAM credential and quotas in the cluster's metadata, its Secret. Pure.

The operator owns every ACL of the user's principal: `plan_user_access`
compares the ACLs the spec asks for with those the controller's image holds
for that principal, and answers what to create and what to delete (an ACL
added by hand with kafka-acls.sh for this principal is removed, as Strimzi's
User Operator does). The SCRAM credential is set when the image has none for
the user or one made from another password; the password itself is derived
by the operator (user_secrets.user_password) and never stored in the image,
only its salted keys. spec.quotas is the quota entity user=<principal name>
(Strimzi's KafkaUser quotas): the operator sets the keys the spec names and
removes the others of that entity (`plan_user_quotas`).

The user's Secret (`plan_user_secret`): the operator may create and patch
Secrets but not read them, so each pass *tries to create* the Secret: a
Conflict says it is there, a success that it was missing (deleted by hand:
made again, as Strimzi's User Operator does). A scram-sha-512 user's password
is derived, never random (the operator's master secret, the user's uid), so a
re-made Secret holds the same password as before and the credential in the
cluster's metadata keeps matching it: nothing in the cluster changes, and
clients that still hold the old Secret's copy keep working. (Upserting a
fresh random credential through the controller instead would need the new
password written before the credential, lock out every client holding the
old one, and still leave a window where Secret and credential disagree.)
A tls user's certificate cannot be derived (the CA's signature would be,
but its key would then be one more long-lived derived secret), so a re-made
Secret holds a new one; the same rule as the broker certificate's
(certificates.renewal_reason, the cluster's spec.certificates) says when
the one in force is renewed in place, and the user's status.certificate
remembers what was issued, since the Secret is never read back.
"""

from __future__ import annotations

import base64
import datetime
import enum
from collections.abc import Iterable
from dataclasses import dataclass

from tinystream.operator.controller.events import AclFilter, QuotaAlteration, QuotaOp, ScramDeletion
from tinystream.operator.controller.image import AclRecord, ClientQuotaRecord, ScramCredentialRecord
from tinystream.operator.k8s.certificates import IssuedRecord, KeyPair, renewal_reason
from tinystream.operator.k8s.conditions import UserReason
from tinystream.operator.k8s.model import ClusterSpec, UserAcl, UserSpec
from tinystream.operator.k8s.resources import Names, broker_user, tokens_name
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
    quotas: QuotaAlteration | None = None  # the user's quota entity brought to spec.quotas

    @property
    def empty(self) -> bool:
        return not (self.create or self.delete or self.upsert or self.remove or self.quotas)


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


def plan_user_quotas(user: UserSpec, quotas: Iterable[ClientQuotaRecord], *, wanted: bool = True
                     ) -> QuotaAlteration | None:
    """The ops that make the quota entity user=<quota_user> hold exactly spec.quotas (`wanted` False: none),
    or None when it does already. Only that entity is the operator's: a (user, client-id) or default
    quota set with kafka-configs.sh stays."""
    entity = {"user": user.quota_user}
    held: dict[str, float] = next((dict(q.values) for q in quotas if dict(q.entity) == entity), {})
    desired = dict(user.quotas) if wanted else {}
    ops = [QuotaOp(key=k, value=v) for k, v in sorted(desired.items()) if held.get(k) != v]
    ops += [QuotaOp(key=k, remove=True) for k in sorted(set(held) - set(desired))]
    return QuotaAlteration(entity=entity, ops=tuple(ops)) if ops else None


def plan_user_access(user: UserSpec, acls: Iterable[AclRecord], credentials: Iterable[ScramCredentialRecord], *,
                     password: str | None, quotas: Iterable[ClientQuotaRecord] = ()) -> UserAccessPlan:
    """ACLs to create and delete so the principal has exactly the spec's; the credential when it is stale;
    the user's quotas when they differ from spec.quotas."""
    held = {a for a in acls if a.principal == user.principal}
    wanted = desired_acls(user)
    upsert: tuple[ScramCredentialRecord, ...] = ()
    if user.authentication == "scram-sha-512" and password is not None:
        mine = [c for c in credentials if c.user == user.name and c.mechanism == MECHANISM]
        if not mine or not _made_from(mine[0], password):
            upsert = (scram_record(user.name, password),)
    return UserAccessPlan(create=tuple(sorted(wanted - held)),
                          delete=tuple(exact_filter(a) for a in sorted(held - wanted)), upsert=upsert,
                          quotas=plan_user_quotas(user, quotas))


def plan_user_removal(user: UserSpec, acls: Iterable[AclRecord], credentials: Iterable[ScramCredentialRecord],
                      quotas: Iterable[ClientQuotaRecord] = ()) -> UserAccessPlan:
    """Everything the user had: its ACLs, its credentials (a deleted user can do nothing), its quotas."""
    held = sorted(a for a in acls if a.principal == user.principal)
    gone = tuple(ScramDeletion(user=c.user, mechanism=c.mechanism) for c in credentials if c.user == user.name)
    return UserAccessPlan(delete=tuple(exact_filter(a) for a in held),
                          remove=gone if user.authentication == "scram-sha-512" else (),
                          quotas=plan_user_quotas(user, quotas, wanted=False))


class SecretChange(str, enum.Enum):
    """What a pass did to the user's Secret: the Event's reason (nothing when it only found it there)."""

    CREATED = "CredentialsCreated"  # the first Secret of this user
    RECREATED = "SecretRecreated"  # status recorded one, but it was gone
    RENEWED = "CertificateRenewed"  # the data of the Secret in place replaced (tls)


@dataclass(frozen=True, slots=True)
class SecretPlan:
    """One pass over the user's Secret: always try to create it; `renew` says why to replace the data
    of one that is there (a tls certificate due), None to leave it as it is."""

    renew: str | None = None


def plan_user_secret(user: UserSpec, *, current: IssuedRecord | None, ca: KeyPair | None, now: datetime.datetime,
                     renewal_days: int) -> SecretPlan:
    """`current` is the user's status.certificate (tls), `ca` the cluster's CA (tls), `renewal_days` its
    spec.certificates.renewalDays. A user certificate names no host and has no renew token."""
    if user.authentication != "tls":
        return SecretPlan()  # the password is derived: whatever Secret is there holds it
    assert ca is not None, "a tls user needs its cluster's CA"
    return SecretPlan(renew=renewal_reason(current, ca=ca, dns_names=frozenset(), renew_token="", now=now,
                                           renewal_days=renewal_days))


def secret_change(plan: SecretPlan, *, recorded: bool, created: bool) -> SecretChange | None:
    """What happened, once the create was tried: `recorded` is whether status.secret named the Secret
    already (a user's first pass, or a status patch not seen yet, is not a re-creation)."""
    if created:
        return SecretChange.RECREATED if recorded else SecretChange.CREATED
    return SecretChange.RENEWED if plan.renew is not None else None


def reserved_user_names(cluster: ClusterSpec) -> frozenset[str]:
    """Names no TinyStreamUser of `cluster` may have: its brokers' own principal (SCRAM user and certificate
    CN, a super user) and its Secrets' names (a user's Secret is named like the user)."""
    names = Names.of(cluster)
    return frozenset({broker_user(cluster), names.broker_tls, names.ca_cert, names.broker_users,
                      tokens_name(cluster.name)})


def user_refusal(user: UserSpec, cluster: ClusterSpec | None) -> tuple[UserReason, str] | None:
    """Why `user` cannot be given access to `cluster` (the Ready reason and message); None: it can."""
    if cluster is None:
        return UserReason.CLUSTER_NOT_FOUND, f"no TinyStreamCluster {user.cluster} in {user.namespace}"
    if cluster.authentication is None:
        return UserReason.AUTHENTICATION_DISABLED, (
            f"cluster {user.cluster} has listeners.authentication none: its clients are all anonymous")
    if cluster.authentication != user.authentication:
        return UserReason.AUTHENTICATION_MISMATCH, (
            f"the user authenticates with {user.authentication}, cluster {user.cluster} with "
            f"{cluster.authentication}")
    if user.name in reserved_user_names(cluster):
        return UserReason.NAME_RESERVED, (
            f"{user.name} is cluster {user.cluster}'s own name (its brokers' principal or one of its "
            "Secrets): a user of that name would act as a broker or overwrite the cluster's Secret")
    return None
