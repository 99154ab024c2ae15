"""The TinyStream dashboard: cluster overview, brokers, topics and partitions, consumer groups
and throughput, as a self-refreshing page with a JSON twin of every view (see app.py).

Layers, top down: app.py (aiohttp handlers, page, sampler) -> views.py (pure
functions of one snapshot) -> sources.py (the only module that reads the
controller and brokers over HTTP). server.py serves an app alone or on a
thread. The controller (`tinystream controller`) serves it on dashboard.port
and mounts it at /dashboard/ on its API; `tinystream dev` serves it from the
supervisor (tinystream/dev/dashboard.py). clusters.py serves many clusters'
dashboards from one server (the Kubernetes operator: an index, and each
cluster under /clusters/<namespace>/<name>/).
"""

from tinystream.operator.dashboard.app import DEFAULT_PORT, Dashboard, make_dashboard_app
from tinystream.operator.dashboard.clusters import ClusterRef, ClustersDashboard, make_clusters_dashboard_app
from tinystream.operator.dashboard.server import DashboardServer, ThreadedDashboard
from tinystream.operator.dashboard.sources import ClusterSource, HttpClusterSource, RawSnapshot, admin_urls_from_template

__all__ = [
    "DEFAULT_PORT",
    "ClusterRef",
    "ClusterSource",
    "ClustersDashboard",
    "Dashboard",
    "DashboardServer",
    "HttpClusterSource",
    "RawSnapshot",
    "ThreadedDashboard",
    "admin_urls_from_template",
    "make_clusters_dashboard_app",
    "make_dashboard_app",
]
