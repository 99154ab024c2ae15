"""kopf handlers for TinyStreamSchema: each a thin call into schema_reconciler.SchemaReconciler.

- create/update/resume: register the schema (and the subject's level) through the cluster's registry;
  status says the id and version, or why not (Ready False with the registry's message).
- a timer (`schema_interval_s`, 60 s) does the same again: a subject deleted or changed by hand, or a
  registry that lost its topic, gets the schema back (registering what a subject has is no new version).
- delete (finalizer): spec.deletionPolicy (schemas.py): Keep leaves the subject, Delete soft-deletes it.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.handler_ids import SCHEMAS_SCOPE, handler_id
from tinystream.operator.k8s.model import GROUP, SCHEMA_PLURAL, VERSION
from tinystream.operator.k8s.schema_reconciler import SchemaReconciler

SCHEMAS = (GROUP, VERSION, SCHEMA_PLURAL)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    reconciler = SchemaReconciler(deps)

    @kopf.on.create(*SCHEMAS, id=handler_id("schema_changed", scope=SCHEMAS_SCOPE), registry=registry)
    @kopf.on.update(*SCHEMAS, id=handler_id("schema_changed", scope=SCHEMAS_SCOPE), field="spec", registry=registry)
    @kopf.on.resume(*SCHEMAS, id=handler_id("schema_changed", scope=SCHEMAS_SCOPE), registry=registry)
    @deps.metrics.instrument("schema_changed")
    async def schema_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)

    @kopf.timer(*SCHEMAS, interval=deps.schema_interval_s, initial_delay=deps.schema_interval_s,
                id=handler_id("schema_check", scope=SCHEMAS_SCOPE), registry=registry)
    @deps.metrics.instrument("schema_check")
    async def schema_check(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconciler.reconcile(body, status, patch, logger)

    @kopf.on.delete(*SCHEMAS, id=handler_id("schema_deleted", scope=SCHEMAS_SCOPE), registry=registry)
    @deps.metrics.instrument("schema_deleted")
    async def schema_deleted(body: Any, retry: int, logger: logging.Logger, **_: Any) -> None:
        await reconciler.remove(body, retry, logger)
