"""The operator's dashboard: every controlled cluster's dashboard on one port (dashboard.port, 3200).

    GET /                                   clusters whose controller runs in this operator
    GET /clusters/<namespace>/<name>/...    that cluster's dashboard (operator/dashboard/app.py)

The chart's Service exposes this port. Per cluster, the numbers come from two
places, as for `tinystream controller`'s dashboard:

- the controller's image, from the cluster's controller API on this same
  operator (`OperatorController.cluster_url`, GET /v1/metadata): the same
  JSON the brokers read, so the dashboard shows what they are told;
- each broker's admin API, at its pod's DNS name under the headless Service
  (resources.broker_admin_url, with the cluster's spec.listeners.admin).
  Broker pods are listed through the Kubernetes API at most every
  `pods_ttl_s`, so a page left open costs the API server little. A broker
  the controller knows without a pod is shown with its admin URL unknown.

Who may look: whoever holds the login token (operator/dashboard/login.py),
kept in the Secret `<release>-dashboard-login` the operator makes once in its
own namespace (master_secret.py). The brokers' admin HTTP asks for the
cluster's admin token, which the operator derives (controller_secret.py).

Starting is best effort, as for the local controller's dashboard: a port that
cannot be bound is logged and the operator runs on without a dashboard.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tinystream.operator.dashboard import ClusterRef, DashboardServer, HttpClusterSource, RawSnapshot, make_clusters_dashboard_app
from tinystream.operator.dashboard.login import require_login
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.controller_host import OperatorController
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.errors import KubeApiError
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, DASHBOARD_PORT, POOL_KIND, ClusterSpec
from tinystream.operator.k8s.node_pools import CLUSTER_LABEL, pool_pod_ids
from tinystream.operator.k8s.reconcile import BrokerPod
from tinystream.operator.k8s.resources import Names, broker_admin_url, pod_admin_url, selector_labels

log = logging.getLogger(__name__)

PODS_TTL_S = 10.0
LOGIN_HINT = ("The token: kubectl -n <operator namespace> get secret <release>-dashboard-login "
              "-o jsonpath='{.data.token}' | base64 -d")


async def broker_admin_urls(client: KubeClient, cluster: ClusterKey) -> dict[int, str]:
    """Broker id -> admin URL for each broker pod of `cluster` (empty when the cluster is gone)."""
    body = await client.get(API_VERSION, CLUSTER_KIND, cluster.name, cluster.namespace)
    if body is None:
        return {}
    spec = ClusterSpec.from_resource(body)
    prefix = Names.of(spec).statefulset + "-"
    pods = await client.list("v1", "Pod", spec.namespace, labels=selector_labels(spec))
    if spec.node_pools:  # broker ids are the pools' (node_pools.py), not ordinals
        ids = pool_pod_ids(spec.name, await client.list(API_VERSION, POOL_KIND, spec.namespace,
                                                        labels={CLUSTER_LABEL: spec.name}))
        return {ids[name]: pod_admin_url(spec, name) for p in pods if (name := p["metadata"]["name"]) in ids}
    ordinals = (BrokerPod.from_pod(p).ordinal for p in pods if p["metadata"]["name"].startswith(prefix))
    return {ordinal: broker_admin_url(spec, ordinal) for ordinal in sorted(ordinals)}


class ClusterDashboardSource:
    """An HttpClusterSource on one cluster's controller API, with admin URLs from its broker pods."""

    def __init__(self, client: KubeClient, cluster: ClusterKey, controller_url: str, *,
                 controller_token: str | None = None, controller_ssl: ssl.SSLContext | None = None,
                 admin_token: str | None = None,
                 pods_ttl_s: float = PODS_TTL_S, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._cluster = cluster
        self._pods_ttl_s = pods_ttl_s
        self._monotonic = monotonic
        self._urls: dict[int, str] = {}
        self._read_at: float | None = None
        self._http = HttpClusterSource(controller_url, controller_token=controller_token,
                                       controller_ssl=controller_ssl, admin_urls=self._admin_urls,
                                       admin_token=admin_token)

    def _admin_urls(self, _: Mapping[str, Any] | None) -> Mapping[int, str]:
        return self._urls

    async def _refresh(self) -> None:
        now = self._monotonic()
        if self._read_at is not None and now - self._read_at < self._pods_ttl_s:
            return
        try:
            self._urls = await broker_admin_urls(self._client, self._cluster)
        except KubeApiError as exc:  # keep the last URLs; the next round tries again
            log.warning("dashboard of %s: cannot list broker pods: %s", self._cluster, exc)
        self._read_at = now

    async def snapshot(self) -> RawSnapshot:
        await self._refresh()
        return await self._http.snapshot()

    async def close(self) -> None:
        await self._http.close()


class OperatorDashboard:
    """Serves the clusters' dashboards while the operator runs: `start(client)` / `stop()`."""

    def __init__(self, controller: OperatorController, *, host: str = "0.0.0.0", port: int = DASHBOARD_PORT,
                 pods_ttl_s: float = PODS_TTL_S, login_token: str | None = None) -> None:
        self.controller = controller
        self.login_token = login_token  # None: no login (tests); the operator always gives one
        self.host = host
        self.port = port
        self.pods_ttl_s = pods_ttl_s
        self.url: str | None = None
        self._client: KubeClient | None = None
        self._server: DashboardServer | None = None

    async def _clusters(self) -> Sequence[ClusterRef]:
        return [ClusterRef(k.namespace, k.name) for k in self.controller.clusters()]

    def _source(self, ref: ClusterRef) -> ClusterDashboardSource:
        assert self._client is not None, "the dashboard has not started"
        key = ClusterKey(ref.namespace, ref.name)
        return ClusterDashboardSource(self._client, key, self.controller.cluster_url(key),
                                      controller_token=self.controller.admin_token(key),
                                      controller_ssl=self.controller.client_ssl_context(),
                                      admin_token=self.controller.broker_admin_token(key), pods_ttl_s=self.pods_ttl_s)

    async def start(self, client: KubeClient) -> str | None:
        """Listen; the URL, or None when the port cannot be bound (logged, not fatal)."""
        self._client = client
        app = make_clusters_dashboard_app(self._clusters, self._source)
        if self.login_token is not None:
            require_login(app, self.login_token, where=LOGIN_HINT)
        server = DashboardServer(app, host=self.host, port=self.port)
        try:
            self.url = await server.start()
        except OSError as exc:
            log.warning("dashboard not served on port %s: %s", self.port, exc)
            return None
        self._server = server
        log.info("dashboard of every cluster on %s", self.url)
        return self.url

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()  # closes every cluster's sampler and source
            self._server = None
        self.url = None
        self._client = None
