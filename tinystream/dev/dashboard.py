"""The local cluster's dashboard: `tinystream.operator.dashboard`, served by the `tinystream dev` supervisor.

The supervisor knows every child's address, so it serves the dashboard
itself (aiohttp on a thread of its own): it keeps answering while brokers or
the controller are down and shows them as down. The broker admin URLs come
from the supervisor's children, not from the controller's image, so a
broker that never registered still shows. It owns no state beyond the
throughput ring buffer; every view reads the controller's `GET /v1/metadata`
and each broker's admin API afresh (see operator/dashboard/sources.py).

    Dashboard(cluster, port=3200).start()  -> "http://127.0.0.1:3200"
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tinystream.operator.dashboard import HttpClusterSource, ThreadedDashboard, make_dashboard_app

if TYPE_CHECKING:
    from tinystream.dev.cluster import LocalCluster


def cluster_source(cluster: LocalCluster) -> HttpClusterSource:
    def admin_urls(_: Mapping[str, Any] | None) -> Mapping[int, str]:
        return {b.broker_id: b.admin_url for b in cluster.brokers if b.admin_url and b.broker_id is not None}

    return HttpClusterSource(lambda: cluster.controller.url, admin_urls=admin_urls)


class Dashboard:
    """The dashboard app on a daemon thread; `start` returns its URL."""

    def __init__(self, cluster: LocalCluster, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster = cluster
        self.host = host
        self.port = port
        self._server = ThreadedDashboard(lambda: make_dashboard_app(cluster_source(cluster)), host=host, port=port)

    def start(self) -> str:
        try:
            return self._server.start()
        except OSError:
            # `tinystream controller` serves the dashboard on dashboard.port too; when this cluster's
            # own controller took the port first, point at it rather than fail the cluster.
            url = f"http://{self.host}:{self.port}"
            if self.port and _serves_controller(url, self.cluster.controller.url):
                return url
            raise

    def stop(self) -> None:
        self._server.stop()


def _serves_controller(dashboard_url: str, controller_url: str | None) -> bool:
    try:
        with urllib.request.urlopen(f"{dashboard_url}/api/overview", timeout=2.0) as response:  # noqa: S310 - loopback
            return bool(controller_url) and json.loads(response.read())["controller"]["url"] == controller_url
    except (OSError, ValueError, KeyError, TypeError):
        return False
