"""kopf handlers for the operator itself: login, start-up and clean-up.

Start-up sets kopf's persistence to tinystream.io annotations (not status,
so the structural schemas need no kopf fields), watches broker pods only,
logs in, upgrades the installed CRDs, then starts the controller core's host
(which stands down at SIGTERM, hand_over.py) and the dashboard. Clean-up stops
them in the reverse order.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s import hand_over
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.crds import bundled_crds, upgrade_crds
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.handler_ids import handler_id
from tinystream.operator.k8s.resources import BROKER_POD_SELECTOR

FINALIZER = "tinystream.io/finalizer"
ANNOTATION_PREFIX = "tinystream.io"


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:

    @kopf.on.login(id=handler_id("login"), registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return deps.connect(**kwargs)

    @kopf.on.startup(id=handler_id("startup"), registry=registry)
    async def startup(settings: kopf.OperatorSettings, logger: logging.Logger, **kwargs: Any) -> None:
        settings.persistence.finalizer = FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATION_PREFIX)
        settings.posting.level = logging.INFO
        # Watch broker pods only (server-side), not every pod of the cluster.
        settings.watching.label_selectors["v1", "pods"] = BROKER_POD_SELECTOR
        info = deps.connect(settings=settings, logger=logger)
        if info is None:
            raise kopf.PermanentError("no Kubernetes credentials: no service account and no kubeconfig")
        deps.client = KubeClient.from_connection_info(info)
        if deps.crds_dir is not None:
            await upgrade_crds(deps.client, bundled_crds(deps.crds_dir), logger)
        await deps.controller.start(deps.client)
        if deps.stop_flag is not None and not hand_over.install(deps.controller, deps.stop_flag):
            logger.warning("not the main thread: on SIGTERM the controller API stops only at kopf's clean-up")
        if deps.dashboard is not None:
            await deps.dashboard.start(deps.client)  # best effort: a taken port is logged, not fatal

    @kopf.on.cleanup(id=handler_id("cleanup"), registry=registry)
    async def cleanup(**_: Any) -> None:
        try:
            if deps.dashboard is not None:
                await deps.dashboard.stop()  # first: its samplers read the controller API
            await deps.controller.stop()
        finally:
            if deps.client is not None:
                await deps.client.close()
