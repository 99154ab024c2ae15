"""kopf handlers for TinyStreamUser: each a thin call into user_reconciler.UserReconciler.

- create/update/resume, and a health timer (the cluster may not be up yet):
  make the user's Secret (named like the user, owned by it), then bring the
  cluster's metadata to exactly the user's ACLs and credential; status says
  whether it is in force (Ready), and why not. The health timer makes the
  Secret only while status does not record it.
- the Secret timer (settings `user.secret.check.interval.s`, 60 s) tries to
  create it again, so one deleted by hand comes back (Event SecretRecreated),
  and renews a tls user's certificate before it expires (Event
  CertificateRenewed); user_secrets.py.
- delete (finalizer): remove every ACL of the principal and its credentials;
  released when the cluster is gone.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.handler_ids import USERS_SCOPE, handler_id
from tinystream.operator.k8s.model import GROUP, USER_PLURAL, VERSION
from tinystream.operator.k8s.user_reconciler import UserReconciler

USERS = (GROUP, VERSION, USER_PLURAL)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    reconciler = UserReconciler(deps)

    @kopf.on.create(*USERS, id=handler_id("user_changed", scope=USERS_SCOPE), registry=registry)
    @kopf.on.update(*USERS, id=handler_id("user_changed", scope=USERS_SCOPE), registry=registry)
    @kopf.on.resume(*USERS, id=handler_id("user_changed", scope=USERS_SCOPE), registry=registry)
    @deps.metrics.instrument("user_changed")
    async def user_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger, check_secret=True)

    @kopf.timer(*USERS, interval=deps.health_interval_s, initial_delay=deps.health_interval_s,
                id=handler_id("user_health", scope=USERS_SCOPE), registry=registry)
    @deps.metrics.instrument("user_health")
    async def user_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger, check_secret=False)

    @kopf.timer(*USERS, interval=deps.user_secret_interval_s, initial_delay=deps.user_secret_interval_s,
                id=handler_id("user_secret_check", scope=USERS_SCOPE), registry=registry)
    @deps.metrics.instrument("user_secret_check")
    async def user_secret_check(body: Any, status: Any, patch: kopf.Patch, **_: Any) -> None:
        await reconciler.check_secret(body, status, patch)

    @kopf.on.delete(*USERS, id=handler_id("user_deleted", scope=USERS_SCOPE), registry=registry)
    @deps.metrics.instrument("user_deleted")
    async def user_deleted(body: Any, retry: int, logger: logging.Logger, **_: Any) -> None:
        await reconciler.remove(body, retry, logger)
