"""Many clusters' dashboards behind one server: an index, and each cluster's views under a prefix.

    GET /                                   the index: every cluster, linked (HTML)
    GET /api/clusters                       the same as JSON
    GET /clusters/<namespace>/<name>/...    that cluster's dashboard (app.py): page, script,
                                            /api/* JSON twins, /api/openapi.json

Who serves it: the Kubernetes operator, one controller per TinyStreamCluster
(operator/k8s/dashboard_host.py). The clusters come and go while the server
runs, and aiohttp cannot mount sub-applications into a running one, so each
cluster gets its own `make_dashboard_app` application, frozen but never
served: a request under its prefix is resolved by that application's router
and handled by its handler, so every view of app.py (and any added later)
is there without a second route table. The page uses relative URLs, which is
all a prefix needs.

A cluster's dashboard (its sampler task and source) is created on the first
request for it and closed when the cluster is no longer listed, or when the
server stops. `clusters()` says which clusters exist; `source_for(ns, name)`
makes the `ClusterSource` of one.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import orjson
from aiohttp import web

from tinystream.operator.dashboard.app import SAMPLE_INTERVAL_S, make_dashboard_app
from tinystream.operator.dashboard.sources import ClusterSource

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, order=True)
class ClusterRef:
    namespace: str
    name: str

    @property
    def path(self) -> str:
        return f"/clusters/{self.namespace}/{self.name}/"


ClusterList = Callable[[], Awaitable[Sequence[ClusterRef]]]
SourceFactory = Callable[[ClusterRef], ClusterSource]


class ClustersDashboard:
    """The index and the per-cluster dispatch; see the module docstring."""

    def __init__(self, clusters: ClusterList, source_for: SourceFactory, *,
                 sample_interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._clusters = clusters
        self._source_for = source_for
        self.sample_interval_s = sample_interval_s
        self._apps: dict[ClusterRef, web.Application] = {}

    async def _known(self) -> list[ClusterRef]:
        """The listed clusters, sorted; dashboards of clusters no longer listed are closed."""
        known = sorted(set(await self._clusters()))
        for gone in set(self._apps) - set(known):
            await self._close(gone)
        return known

    async def _app_of(self, ref: ClusterRef) -> web.Application:
        app = self._apps.get(ref)
        if app is None:
            app = make_dashboard_app(self._source_for(ref), sample_interval_s=self.sample_interval_s)
            app.freeze()  # never served itself; only its router and signals are used
            await app.on_startup.send(app)  # starts the sampler
            self._apps[ref] = app
            log.info("dashboard of %s/%s opened", ref.namespace, ref.name)
        return app

    async def _close(self, ref: ClusterRef) -> None:
        app = self._apps.pop(ref, None)
        if app is not None:
            await app.on_cleanup.send(app)  # stops the sampler, closes the source

    async def close(self) -> None:
        for ref in list(self._apps):
            await self._close(ref)

    # -- handlers -------------------------------------------------------------------

    async def index(self, _: web.Request) -> web.Response:
        rows = "".join(
            f'<li><a href="{html.escape(r.path.lstrip("/"))}">{html.escape(r.namespace)}/'
            f"{html.escape(r.name)}</a></li>"
            for r in await self._known())
        body = f"<ul>{rows}</ul>" if rows else "<p>No cluster is controlled by this operator yet.</p>"
        return web.Response(text=INDEX_HTML.format(body=body), content_type="text/html")

    async def cluster_list(self, _: web.Request) -> web.Response:
        clusters = [{"namespace": r.namespace, "name": r.name, "dashboard": r.path,
                     "api": r.path + "api/"} for r in await self._known()]
        return web.Response(body=orjson.dumps({"clusters": clusters}), content_type="application/json",
                            headers={"Cache-Control": "no-store"})

    async def cluster(self, request: web.Request) -> web.StreamResponse:
        ref = ClusterRef(request.match_info["namespace"], request.match_info["name"])
        if ref not in await self._known():
            raise web.HTTPNotFound(text=f"no cluster {ref.namespace}/{ref.name} is controlled here")
        if "tail" not in request.match_info:
            raise web.HTTPFound(ref.path)  # relative URLs in the page need the slash
        app = await self._app_of(ref)
        inner = request.clone(rel_url=request.rel_url.with_path("/" + request.match_info["tail"]))
        match = await app.router.resolve(inner)
        return await match.handler(inner)  # an unknown view: the router's 404 / 405 handler


INDEX_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>TinyStream clusters</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem}}a{{color:#0a58ca}}</style></head>
<body><h1>TinyStream clusters</h1>{body}
<p><a href="api/clusters">api/clusters</a> (JSON)</p></body></html>
"""

CLUSTERS_KEY = web.AppKey("clusters_dashboard", ClustersDashboard)


def make_clusters_dashboard_app(clusters: ClusterList, source_for: SourceFactory, *,
                                sample_interval_s: float = SAMPLE_INTERVAL_S) -> web.Application:
    dashboard = ClustersDashboard(clusters, source_for, sample_interval_s=sample_interval_s)
    app = web.Application()
    app[CLUSTERS_KEY] = dashboard

    async def cleanup(_: web.Application) -> None:
        await dashboard.close()

    app.on_cleanup.append(cleanup)
    app.add_routes([
        web.get("/", dashboard.index),
        web.get("/api/clusters", dashboard.cluster_list),
        web.get("/clusters/{namespace}/{name}", dashboard.cluster),
        web.get("/clusters/{namespace}/{name}/{tail:.*}", dashboard.cluster),
    ])
    return app


