"""kopf handlers for TinyStreamUser: credentials in a Secret, ACLs and SCRAM keys in the cluster's metadata.

- create/update/resume, and a timer (the cluster may not be up yet): make the
  user's Secret once (named like the user, owned by it), then bring the
  cluster's metadata to exactly the user's ACLs and credential
  (users.plan_user_access) through the controller port; status says whether
  it is in force (Ready), and why not.
- delete (finalizer): remove every ACL of the principal and its credentials,
  so a deleted user can do nothing any more; released when the cluster is
  gone.

The Secret of a scram-sha-512 user holds `password` and `sasl.jaas.config`
(the Java client's line); a tls user's holds `user.crt`, `user.key` and
`ca.crt` (a client certificate from the cluster's CA, CN=<user>). Passwords
and keys derive from the operator's master secret and the user's uid, so the
operator never reads a Secret back.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import kopf

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.certificates import issue
from tinystream.operator.k8s.cluster_tls import cluster_ca
from tinystream.operator.k8s.conditions import UserReason, merge_condition, ready
from tinystream.operator.k8s.controller_port import ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.errors import Conflict
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, GROUP, USER_KIND, USER_PLURAL, VERSION, ClusterSpec, UserSpec
from tinystream.operator.k8s.users import desired_acls, plan_user_access, plan_user_removal

if TYPE_CHECKING:
    from tinystream.operator.k8s.handlers import Deps

USER_CERT_DAYS = 365


def user_password(master: str, user: UserSpec) -> str:
    mac = hmac.new(master.encode(), f"{user.namespace}/{user.name}/{user.uid}/password".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def user_secret(user: UserSpec, files: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {
        "name": user.name, "namespace": user.namespace,
        "labels": {"app.kubernetes.io/managed-by": "tinystream-operator", "tinystream.io/cluster": user.cluster,
                   "tinystream.io/user": user.name},
        "ownerReferences": [{"apiVersion": API_VERSION, "kind": USER_KIND, "name": user.name, "uid": user.uid,
                             "controller": True, "blockOwnerDeletion": True}]},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


def credential_files(user: UserSpec, cluster: ClusterSpec, master: str, now: datetime.datetime) -> dict[str, str]:
    if user.authentication == "tls":
        ca = cluster_ca(master, cluster)
        cert = issue(ca, user.name, frozenset(), now=now, days=USER_CERT_DAYS)
        return {"user.crt": cert.cert_pem, "user.key": cert.key_pem, "ca.crt": ca.cert_pem}
    password = user_password(master, user)
    return {"password": password, "sasl.jaas.config": (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{user.name}" password="{password}";')}


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
                f"cluster {user.cluster} has no listeners.authentication: its clients are all anonymous")
        if cluster.authentication != user.authentication:
            return UserReason.AUTHENTICATION_MISMATCH, (
                f"the user authenticates with {user.authentication}, cluster {user.cluster} with "
                f"{cluster.authentication}")
        return None

    async def reconcile_user(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> None:
        user = UserSpec.from_resource(body)
        cluster = await cluster_of(user)
        refused = refusal(user, cluster)
        if refused is not None:
            condition = ready(False, refused[0], refused[1], generation=user.generation)
        elif deps.master_secret is None:
            raise kopf.TemporaryError("the operator has no master secret to make credentials with")
        else:
            assert cluster is not None
            if (status or {}).get("secret") != user.name:  # not made yet (status says so once it is)
                try:
                    await client().create(user_secret(user, credential_files(user, cluster, deps.master_secret,
                                                                             deps.clock())))
                    kopf.info(body, reason="CredentialsCreated", message=f"Secret {user.name}")
                except Conflict:
                    pass  # made before: the same derived password (a tls user keeps its first certificate)
                patch.status["secret"] = user.name
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
        await reconcile_user(body, status, patch, logger)

    @kopf.timer(*users, interval=deps.health_interval_s, initial_delay=deps.health_interval_s, registry=registry)
    @deps.metrics.instrument("user_health")
    async def user_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconcile_user(body, status, patch, logger)

    @kopf.on.delete(*users, registry=registry)
    @deps.metrics.instrument("user_deleted")
    async def user_deleted(body: Any, retry: int, logger: logging.Logger, **_: Any) -> None:
        user = UserSpec.from_resource(body)
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
