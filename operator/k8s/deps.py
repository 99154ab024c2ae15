"""What the kopf handlers need, injected: the API login, the controller port, timings, the master secret.

Its own module so that every handler module (cluster_handlers.py, topic_handlers.py, ...) can take it
without importing another handler module (no import cycle between them).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kopf

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.controller_port import ControllerPort, UnattachedController
from tinystream.operator.k8s.metrics import OperatorMetrics
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext


@dataclass
class Deps:
    """What the handlers need, injected (tests pass a KMock URL and a fake controller)."""

    connect: Callable[..., kopf.ConnectionInfo | None]
    ctx: OperatorContext = field(default_factory=OperatorContext)
    controller: ControllerPort = field(default_factory=UnattachedController)
    health_interval_s: float = 10.0
    # How often Topic status takes leaders and ISR from the controller (in memory; written only on a change):
    # a failover shows in status within this, not within a full reconcile's period (30 s by default).
    placement_interval_s: float = 2.0
    # How often each TinyStreamUser's Secret is made again if deleted and its certificate renewed if due.
    user_secret_interval_s: float = 60.0
    crds_dir: Any = None  # a Path: upgrade installed CRDs from it at start-up; None: leave them
    client: KubeClient | None = None
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)  # reconcile counts, errors, durations
    dashboard: Any = None  # an OperatorDashboard (dashboard_host.py): started after the controller API
    # The operator's master secret (controller_secret.py): secured clusters' CAs and passwords derive from it.
    master_secret: str | None = None
    clock: Callable[[], datetime.datetime] = field(default=lambda: datetime.datetime.now(datetime.UTC))
    # Where the operator reaches a cluster's schema registry (TinyStreamSchema); None: its Service
    # (schema_registry.registry_url). Tests point it at a registry process of their own.
    registry_url: Callable[[ClusterSpec], str] | None = None
    # kopf's stop flag (cli.py passes it to kopf.run): set by hand_over.py's SIGTERM handler once the
    # controller has stood down. None: kopf's own signal handling (tests that run kopf in a thread).
    stop_flag: asyncio.Event | None = None
    schema_interval_s: float = 60.0  # how often a TinyStreamSchema is registered again (drift in the registry)

    def kube(self) -> KubeClient:
        """The Kubernetes API client, made by the startup handler."""
        assert self.client is not None, "startup handler has not run"
        return self.client
