"""kopf handlers for TinyStreamUser: credentials in a Secret, ACLs and SCRAM keys in the cluster's metadata.

- create/update/resume, and a timer (the cluster may not be up yet): make the
  user's Secret (named like the user, owned by it), then bring the cluster's
  metadata to exactly the user's ACLs and credential
  (users.plan_user_access) through the controller port; status says whether
  it is in force (Ready), and why not.
- the Secret: create/update/resume and a timer of its own (settings
  `user.secret.check.interval.s`, 60 s) try to create it again, so one
  deleted by hand comes back (Event SecretRecreated), and renew a tls user's
  certificate before it expires (Event CertificateRenewed); the health timer
  only makes it while status does not record it. users.plan_user_secret
  decides, `ensure_user_secret` acts.
- refused, with a Ready=False reason: a user named like the cluster's own
  principal or Secrets (NameReserved: it would act as a broker, or take a
  Secret the brokers mount), and one whose Secret name is held by a Secret
  the user does not own (SecretNotOwned: the operator never writes into
  another's Secret, cluster_tls.create_secret).
- delete (finalizer): remove every ACL of the principal and its credentials,
  so a deleted user can do nothing any more; released when the cluster is
  gone.

The Secret of a scram-sha-512 user holds `password` and `sasl.jaas.config`
(the Java client's line); a tls user's holds `user.crt`, `user.key` and
`ca.crt` (a client certificate from the cluster's CA, CN=<user>, valid for
the cluster's spec.certificates.validityDays; status.certificate records its
serial and notAfter). Passwords and the CA derive from the operator's master
secret and the uids, so the operator never reads a Secret back (its RBAC has
create and patch on Secrets, no get or list).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import datetime
import hashlib
import hmac
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.certificates import IssuedRecord, KeyPair, issue
from tinystream.operator.k8s.cluster_tls import ForeignSecret, cluster_ca, create_secret, replace_secret_data
from tinystream.operator.k8s.conditions import UserReason, merge_condition, ready
from tinystream.operator.k8s.controller_port import ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, GROUP, USER_KIND, USER_PLURAL, VERSION, ClusterSpec, UserSpec
from tinystream.operator.k8s.users import (
    SecretChange,
    desired_acls,
    plan_user_access,
    plan_user_removal,
    plan_user_secret,
    reserved_user_names,
    secret_change,
)


def user_password(master: str, user: UserSpec) -> str:
    mac = hmac.new(master.encode(), f"{user.namespace}/{user.name}/{user.uid}/password".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def user_secret(user: UserSpec, files: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {
        "name": user.name, "namespace": user.namespace,
        "labels": {"app.kubernetes.io/managed-by": "tinystream-operator", "tinystream.io/cluster": user.cluster,
                   "tinystream.io/user": user.name},
        "ownerReferences": [{"apiVersion": API_VERSION, "kind": USER_KIND, "name": user.name, "uid": user.uid,
                             "controller": True, "blockOwnerDeletion": True}]},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


def password_files(user: UserSpec, password: str) -> dict[str, str]:
    return {"password": password, "sasl.jaas.config": (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{user.name}" password="{password}";')}


def certificate_files(ca: KeyPair, cert: KeyPair) -> dict[str, str]:
    return {"user.crt": cert.cert_pem, "user.key": cert.key_pem, "ca.crt": ca.cert_pem}


@dataclass(frozen=True, slots=True)
class SecretPass:
    """What one pass over the user's Secret did, and the tls certificate in force after it."""

    change: SecretChange | None
    certificate: IssuedRecord | None = None
    because: str | None = None  # why the certificate was renewed


async def ensure_user_secret(client: KubeClient, user: UserSpec, cluster: ClusterSpec, *, master: str,
                             current: IssuedRecord | None, recorded: bool, now: datetime.datetime) -> SecretPass:
    """Try to create the Secret (a Conflict: it is there); replace a tls user's data when its certificate is due.

    A tls pass issues a key pair each time: it is the body to create with, and without `get` only a create
    tells whether the Secret is there (measured: 0.2 ms of CPU, the CA's derivation as much; dropped on a
    Conflict).
    """
    if user.authentication != "tls":
        plan = plan_user_secret(user, current=None, ca=None, now=now, renewal_days=cluster.cert_renewal_days)
        created = await create_secret(client, user_secret(user, password_files(user, user_password(master, user))))
        return SecretPass(secret_change(plan, recorded=recorded, created=created))
    ca = cluster_ca(master, cluster)
    plan = plan_user_secret(user, current=current, ca=ca, now=now, renewal_days=cluster.cert_renewal_days)
    cert = issue(ca, user.name, frozenset(), now=now, days=cluster.cert_validity_days)
    secret = user_secret(user, certificate_files(ca, cert))
    created = await create_secret(client, secret)
    if not created and plan.renew is not None:
        await replace_secret_data(client, secret)
    change = secret_change(plan, recorded=recorded, created=created)
    issued = IssuedRecord.of(cert, ca, frozenset(), "") if change is not None else current
    return SecretPass(change, issued, plan.renew if change is SecretChange.RENEWED else None)


def _announcement(user: UserSpec, done: SecretPass) -> str:
    cert = done.certificate
    what = (f"certificate serial {cert.serial}, valid until {cert.not_after.isoformat()}" if cert is not None
            else "the same derived password")
    if done.change is SecretChange.RECREATED:
        return f"Secret {user.name} was missing: made again with {what}"
    if done.change is SecretChange.RENEWED:
        return f"Secret {user.name}: {what} ({done.because})"
    return f"Secret {user.name}"


def register_user_handlers(registry: kopf.OperatorRegistry, deps: Deps, client: Callable[[], KubeClient]) -> None:
    users = (GROUP, VERSION, USER_PLURAL)

    async def cluster_of(user: UserSpec) -> ClusterSpec | None:
        body = await client().get(API_VERSION, CLUSTER_KIND, user.cluster, user.namespace)
        return None if body is None else ClusterSpec.from_resource(body)

    def refusal(user: UserSpec, cluster: ClusterSpec | None) -> tuple[UserReason, str] | None:
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

    # What this process last did to each user's Secret (uid): a timer may run on a body older than the
    # status patch just written, which would renew (or announce) twice; status is the fallback after a restart.
    # One pass at a time per user: the Secret timer runs beside the change handlers.
    issued: dict[str, IssuedRecord | None] = {}
    locks: collections.defaultdict[str, asyncio.Lock] = collections.defaultdict(asyncio.Lock)

    def secret_recorded(user: UserSpec, status: Any) -> bool:
        return user.uid in issued or (status or {}).get("secret") == user.name

    async def secret_pass(body: Any, user: UserSpec, cluster: ClusterSpec, status: Any, patch: kopf.Patch,
                          master: str) -> None:
        async with locks[user.uid]:
            current = issued[user.uid] if user.uid in issued else IssuedRecord.from_status(
                (status or {}).get("certificate"))
            done = await ensure_user_secret(client(), user, cluster, master=master, current=current,
                                            recorded=secret_recorded(user, status), now=deps.clock())
            issued[user.uid] = done.certificate
        if done.change is not None:
            (kopf.warn if done.change is SecretChange.RECREATED else kopf.info)(
                body, reason=done.change.value, message=_announcement(user, done))
        patch.status["secret"] = user.name
        if done.certificate is not None:
            patch.status["certificate"] = done.certificate.to_status()

    async def reconcile_user(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, *,
                             check_secret: bool) -> None:
        user = UserSpec.from_resource(body)
        cluster = await cluster_of(user)
        refused = refusal(user, cluster)
        if refused is None and deps.master_secret is None:
            raise kopf.TemporaryError("the operator has no master secret to make credentials with")
        if refused is None and cluster is not None and deps.master_secret is not None and (
                check_secret or not secret_recorded(user, status)):
            try:
                await secret_pass(body, user, cluster, status, patch, deps.master_secret)
            except ForeignSecret as exc:  # its credential would be one only the Secret's owner knows
                refused = UserReason.SECRET_NOT_OWNED, str(exc)
        if refused is not None:
            condition = ready(False, refused[0], refused[1], generation=user.generation)
        else:
            assert cluster is not None and deps.master_secret is not None
            key = ClusterKey(user.namespace, user.cluster)
            try:
                acls, credentials = await deps.controller.access(key)
                plan = plan_user_access(user, acls, credentials, password=user_password(deps.master_secret, user)
                                        if user.authentication == "scram-sha-512" else None)
                if not plan.empty:
                    await deps.controller.alter_access(key, plan)
                    logger.info("user %s: %d ACLs created, %d deleted, %d credentials set", user.name,
                                len(plan.create), len(plan.delete), len(plan.upsert))
                count = len(desired_acls(user))
                note = "" if cluster.super_users is not None or not count else (
                    "; the cluster has no spec.authorization, so they are not enforced")
                condition = ready(True, UserReason.READY, f"{user.principal}: {count} ACLs{note}",
                                  generation=user.generation)
                patch.status["acls"] = count
            except ControllerUnavailable as exc:
                condition = ready(False, UserReason.CONTROLLER_UNAVAILABLE, str(exc), generation=user.generation)
            except ControllerRefused as exc:
                condition = ready(False, UserReason.CONTROLLER_REFUSED, str(exc), generation=user.generation)
        previous = (status or {}).get("conditions") or []
        before = next((c.get("reason") for c in previous if c.get("type") == "Ready"), None)
        if before != condition.reason:
            (kopf.warn if condition.status is False else kopf.info)(body, reason=condition.reason,
                                                                    message=condition.message)
        patch.status["conditions"] = merge_condition(previous, condition)
        patch.status["observedGeneration"] = user.generation
        patch.status["username"] = user.principal.removeprefix("User:")

    @kopf.on.create(*users, registry=registry)
    @kopf.on.update(*users, registry=registry)
    @kopf.on.resume(*users, registry=registry)
    @deps.metrics.instrument("user_changed")
    async def user_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconcile_user(body, status, patch, logger, check_secret=True)

    @kopf.timer(*users, interval=deps.health_interval_s, initial_delay=deps.health_interval_s, registry=registry)
    @deps.metrics.instrument("user_health")
    async def user_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconcile_user(body, status, patch, logger, check_secret=False)

    @kopf.timer(*users, interval=deps.user_secret_interval_s, initial_delay=deps.user_secret_interval_s,
                registry=registry)
    @deps.metrics.instrument("user_secret_check")
    async def user_secret_check(body: Any, status: Any, patch: kopf.Patch, **_: Any) -> None:
        """Make a deleted Secret again, renew a certificate that is due; a refused user waits (user_health
        reports why), so does a user being deleted."""
        user = UserSpec.from_resource(body)
        if deps.master_secret is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            return
        cluster = await cluster_of(user)
        if cluster is not None and refusal(user, cluster) is None:
            with contextlib.suppress(ForeignSecret):  # user_health reports it
                await secret_pass(body, user, cluster, status, patch, deps.master_secret)

    @kopf.on.delete(*users, registry=registry)
    @deps.metrics.instrument("user_deleted")
    async def user_deleted(body: Any, retry: int, logger: logging.Logger, **_: Any) -> None:
        user = UserSpec.from_resource(body)
        issued.pop(user.uid, None)
        locks.pop(user.uid, None)
        if await cluster_of(user) is None:
            return  # the cluster and its metadata are gone
        key = ClusterKey(user.namespace, user.cluster)
        try:
            acls, credentials = await deps.controller.access(key)
            plan = plan_user_removal(user, acls, credentials)
            if not plan.empty:
                await deps.controller.alter_access(key, plan)
            logger.info("user %s removed: %d ACLs, %d credentials", user.name, len(plan.delete), len(plan.remove))
        except ControllerUnavailable as exc:
            if retry + 1 >= 3:  # never block a namespace's deletion on a controller that is not there
                kopf.warn(body, reason="AccessNotRemoved", message=f"released after 3 tries: {exc}")
                return
            raise kopf.TemporaryError(f"controller unavailable: {exc}", delay=2) from exc
