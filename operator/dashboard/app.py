"""The dashboard as an aiohttp application: a page, its script, JSON twins and their OpenAPI.

    GET /                   the page (self-refreshing every 2 s)
    GET /dashboard.js       its script (served here: no CDN)
    GET /api/overview       brokers up / fenced, controller, offline and under-replicated partitions
    GET /api/brokers        address, rack, partitions led, bytes in / out
    GET /api/topics         partitions: leader, replicas, ISR, epoch, offsets, HW, size, retention
    GET /api/groups         state, members, assignment, committed offset and lag per partition
    GET /api/throughput     bytes / records per second over time (ring buffer)
    GET /api/openapi.json   the description of the above

`make_dashboard_app(source)` returns an app that can run alone
(`DashboardServer`) or be mounted into another (`app.add_subapp("/dashboard/",
...)`; the page uses relative URLs). A background task samples the brokers'
counters every `sample_interval_s` into the throughput ring buffer; a
request within `cache_s` of the last snapshot reuses it, so the page's five
parallel fetches cost one round of reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tinystream.operator.dashboard import views
from tinystream.operator.dashboard.openapi import openapi_document
from tinystream.operator.dashboard.page import DASHBOARD_JS, INDEX_HTML
from tinystream.operator.dashboard.sources import ClusterSource, RawSnapshot
from tinystream.operator.dashboard.throughput import Sample, ThroughputRecorder

log = logging.getLogger(__name__)

DEFAULT_PORT = 3200
SAMPLE_INTERVAL_S = 2.0
CACHE_S = 0.5


class Dashboard:
    """Snapshots (cached briefly), the throughput sampler, and the handlers."""

    def __init__(self, source: ClusterSource, *, sample_interval_s: float = SAMPLE_INTERVAL_S,
                 cache_s: float = CACHE_S, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.sample_interval_s = sample_interval_s
        self.cache_s = cache_s
        self.throughput = ThroughputRecorder()
        self._monotonic = monotonic
        self._last: tuple[float, RawSnapshot] | None = None
        self._lock = asyncio.Lock()
        self._sampler: asyncio.Task[None] | None = None

    async def snapshot(self) -> RawSnapshot:
        async with self._lock:
            now = self._monotonic()
            if self._last is not None and now - self._last[0] < self.cache_s:
                return self._last[1]
            raw = await self.source.snapshot()
            self._last = (now, raw)
            self.throughput.add(Sample(at=raw.taken_at, totals={b.broker_id: dict(b.totals) for b in raw.brokers if b.up}))
            return raw

    async def _sample_forever(self) -> None:
        while True:
            try:
                await self.snapshot()
            except Exception:  # a bad round must not stop the sampler
                log.exception("dashboard sample failed")
            await asyncio.sleep(self.sample_interval_s)

    async def on_startup(self, _: web.Application) -> None:
        self._sampler = asyncio.create_task(self._sample_forever(), name="dashboard-sampler")

    async def on_cleanup(self, _: web.Application) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None
        close = getattr(self.source, "close", None)
        if close is not None:
            await close()

    # -- handlers -------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.StreamResponse:
        if request.path.endswith("/dashboard") and not request.path.endswith("/"):
            raise web.HTTPFound(request.path + "/")  # relative URLs need the slash when mounted
        return web.Response(text=INDEX_HTML, content_type="text/html")

    async def script(self, _: web.Request) -> web.Response:
        return web.Response(text=DASHBOARD_JS, content_type="application/javascript")

    async def overview(self, _: web.Request) -> web.Response:
        return _json(views.overview(await self.snapshot()))

    async def brokers(self, _: web.Request) -> web.Response:
        return _json({"brokers": views.brokers(await self.snapshot())})

    async def topics(self, _: web.Request) -> web.Response:
        return _json({"topics": views.topics(await self.snapshot())})

    async def groups(self, _: web.Request) -> web.Response:
        return _json({"groups": views.groups(await self.snapshot())})

    async def throughput_view(self, _: web.Request) -> web.Response:
        return _json({"interval_s": self.sample_interval_s, "totals": self.throughput.totals(),
                      "points": self.throughput.rates()})

    async def openapi(self, _: web.Request) -> web.Response:
        return _json(openapi_document())


def _json(data: Any) -> web.Response:
    return web.Response(body=orjson.dumps(data), content_type="application/json",
                        headers={"Cache-Control": "no-store"})


DASHBOARD_KEY = web.AppKey("dashboard", Dashboard)


def make_dashboard_app(source: ClusterSource, *, sample_interval_s: float = SAMPLE_INTERVAL_S) -> web.Application:
    dashboard = Dashboard(source, sample_interval_s=sample_interval_s)
    app = web.Application()
    app[DASHBOARD_KEY] = dashboard
    app.on_startup.append(dashboard.on_startup)
    app.on_cleanup.append(dashboard.on_cleanup)
    app.add_routes([
        web.get("/", dashboard.index),
        web.get("/dashboard.js", dashboard.script),
        web.get("/api/overview", dashboard.overview),
        web.get("/api/brokers", dashboard.brokers),
        web.get("/api/topics", dashboard.topics),
        web.get("/api/groups", dashboard.groups),
        web.get("/api/throughput", dashboard.throughput_view),
        web.get("/api/openapi.json", dashboard.openapi),
    ])
    return app
