"""One pass over a TinyStreamUser: cluster -> refusal (pure) -> Secret -> access -> report; and its removal.

- refusal: users.user_refusal, pure (no cluster, authentication off or
  different, a reserved name); a Secret held by another owner is one too
  (SecretNotOwned: the operator never writes into another's Secret).
- Secret: user_secrets.ensure_user_secret, one pass at a time per user
  (caches.UserSecretPasses), announced by an Event when made again or renewed.
- access: users.plan_user_access brings the cluster's metadata to exactly the
  user's ACLs, credential and quotas (spec.quotas) through the controller port.
- report: Ready with its reason, an Event when the reason changes.
- removal: every ACL of the principal, its credentials and its quotas go, so
  a deleted user can do nothing any more; released when the cluster is gone.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import kopf

from tinystream.operator.k8s.caches import UserSecretPasses
from tinystream.operator.k8s.cluster_tls import ForeignSecret
from tinystream.operator.k8s.conditions import Condition, UserReason, merge_condition, ready
from tinystream.operator.k8s.controller_port import ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, ClusterSpec, UserSpec
from tinystream.operator.k8s.user_secrets import announcement, ensure_user_secret, user_password
from tinystream.operator.k8s.users import (
    SecretChange,
    desired_acls,
    plan_user_access,
    plan_user_removal,
    user_refusal,
)

ACCESS_REMOVAL_TRIES = 3


class UserReconciler:
    """The I/O around the users.py decisions for every TinyStreamUser of one registry."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.secrets = UserSecretPasses()

    async def cluster_of(self, user: UserSpec) -> ClusterSpec | None:
        body = await self.deps.kube().get(API_VERSION, CLUSTER_KIND, user.cluster, user.namespace)
        return None if body is None else ClusterSpec.from_resource(body)

    async def reconcile(self, body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, *,
                        check_secret: bool) -> None:
        """check_secret False (the health timer): make the Secret only while status does not record it."""
        user = UserSpec.from_resource(body)
        cluster = await self.cluster_of(user)
        refused = user_refusal(user, cluster)
        master = self.deps.master_secret
        if refused is None and master is None:
            raise kopf.TemporaryError("the operator has no master secret to make credentials with")
        if refused is None and cluster is not None and master is not None and (
                check_secret or not self.secrets.recorded(user.uid, user.name, status)):
            try:
                await self.secret_pass(body, user, cluster, status, patch, master)
            except ForeignSecret as exc:  # its credential would be one only the Secret's owner knows
                refused = UserReason.SECRET_NOT_OWNED, str(exc)
        if refused is not None:
            condition = ready(False, refused[0], refused[1], generation=user.generation)
        else:
            assert cluster is not None and master is not None
            condition = await self.grant(user, cluster, master, patch, logger)
        self.report(user, condition, body, status, patch)

    async def secret_pass(self, body: Any, user: UserSpec, cluster: ClusterSpec, status: Any, patch: kopf.Patch,
                          master: str) -> None:
        async with self.secrets.locks[user.uid]:
            done = await ensure_user_secret(self.deps.kube(), user, cluster, master=master,
                                            current=self.secrets.current(user.uid, status),
                                            recorded=self.secrets.recorded(user.uid, user.name, status),
                                            now=self.deps.clock())
            self.secrets.issued[user.uid] = done.certificate
        if done.change is not None:
            (kopf.warn if done.change is SecretChange.RECREATED else kopf.info)(
                body, reason=done.change.value, message=announcement(user, done))
        patch.status["secret"] = user.name
        if done.certificate is not None:
            patch.status["certificate"] = done.certificate.to_status()

    async def check_secret(self, body: Any, status: Any, patch: kopf.Patch) -> None:
        """Make a deleted Secret again, renew a certificate that is due; a refused user waits (the health
        timer reports why), so does a user being deleted."""
        user = UserSpec.from_resource(body)
        if self.deps.master_secret is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            return
        cluster = await self.cluster_of(user)
        if cluster is not None and user_refusal(user, cluster) is None:
            with contextlib.suppress(ForeignSecret):  # the health timer reports it
                await self.secret_pass(body, user, cluster, status, patch, self.deps.master_secret)

    async def grant(self, user: UserSpec, cluster: ClusterSpec, master: str, patch: kopf.Patch,
                    logger: logging.Logger) -> Condition:
        """Bring the cluster's metadata to the user's ACLs and credential; the Ready condition it leads to."""
        key = ClusterKey(user.namespace, user.cluster)
        try:
            acls, credentials = await self.deps.controller.access(key)
            plan = plan_user_access(user, acls, credentials, password=user_password(master, user)
                                    if user.authentication == "scram-sha-512" else None,
                                    quotas=await self.deps.controller.client_quotas(key))
            if not plan.empty:
                await self.deps.controller.alter_access(key, plan)
                logger.info("user %s: %d ACLs created, %d deleted, %d credentials set, %d quota keys changed",
                            user.name, len(plan.create), len(plan.delete), len(plan.upsert),
                            len(plan.quotas.ops) if plan.quotas else 0)
        except ControllerUnavailable as exc:
            return ready(False, UserReason.CONTROLLER_UNAVAILABLE, str(exc), generation=user.generation)
        except ControllerRefused as exc:
            return ready(False, UserReason.CONTROLLER_REFUSED, str(exc), generation=user.generation)
        count = len(desired_acls(user))
        note = "" if cluster.super_users is not None or not count else (
            "; the cluster has no spec.authorization, so they are not enforced")
        patch.status["acls"] = count
        patch.status["quotas"] = len(user.quotas)
        return ready(True, UserReason.READY, f"{user.principal}: {count} ACLs{note}", generation=user.generation)

    def report(self, user: UserSpec, condition: Condition, body: Any, status: Any, patch: kopf.Patch) -> None:
        previous = (status or {}).get("conditions") or []
        before = next((c.get("reason") for c in previous if c.get("type") == "Ready"), None)
        if before != condition.reason:
            (kopf.warn if condition.status is False else kopf.info)(body, reason=condition.reason,
                                                                    message=condition.message)
        patch.status["conditions"] = merge_condition(previous, condition)
        patch.status["observedGeneration"] = user.generation
        patch.status["username"] = user.principal.removeprefix("User:")

    async def remove(self, body: Any, retry: int, logger: logging.Logger) -> None:
        user = UserSpec.from_resource(body)
        self.secrets.forget(user.uid)
        if await self.cluster_of(user) is None:
            return  # the cluster and its metadata are gone
        key = ClusterKey(user.namespace, user.cluster)
        try:
            acls, credentials = await self.deps.controller.access(key)
            plan = plan_user_removal(user, acls, credentials, await self.deps.controller.client_quotas(key))
            if not plan.empty:
                await self.deps.controller.alter_access(key, plan)
            logger.info("user %s removed: %d ACLs, %d credentials", user.name, len(plan.delete), len(plan.remove))
        except ControllerUnavailable as exc:
            if retry + 1 >= ACCESS_REMOVAL_TRIES:  # never block a namespace's deletion on a missing controller
                kopf.warn(body, reason="AccessNotRemoved", message=f"released after {ACCESS_REMOVAL_TRIES} tries: {exc}")
                return
            raise kopf.TemporaryError(f"controller unavailable: {exc}", delay=2) from exc
