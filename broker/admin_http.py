"""The broker's admin HTTP endpoint (aiohttp): health, Prometheus metrics, a small JSON API.

    GET /healthz      200 {"status": "ok", ...} while the broker serves
    GET /metrics      Prometheus text format, from the broker's own registry
    GET /api/broker   id, cluster id, listener, advertised APIs
    GET /api/topics   topics with per-partition offsets and sizes

Read-only: it changes nothing, so it needs no authentication beyond who can
reach the port.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from tinystream.broker.context import BrokerContext
from tinystream.broker.partition import TopicPartition


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


class AdminHttp:
    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._runner: web.AppRunner | None = None
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/broker", self._broker)
        app.router.add_get("/api/topics", self._topics)
        self._app = app

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server  # aiohttp exposes no public accessor for the bound port
        assert server is not None
        bound = server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, _: web.Request) -> web.Response:
        ctx = self._ctx
        return _json({"status": "ok", "broker_id": ctx.cluster.broker_id, "cluster_id": ctx.cluster.cluster_id})

    async def _metrics(self, _: web.Request) -> web.Response:
        body = self._ctx.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _broker(self, _: web.Request) -> web.Response:
        ctx = self._ctx
        local = ctx.cluster.local
        return _json(
            {
                "broker_id": local.broker_id,
                "cluster_id": ctx.cluster.cluster_id,
                "listener": f"{local.host}:{local.port}",
                "rack": local.rack,
                "partitions": len(ctx.replicas),
                "apis": [{"key": a.key, "name": a.name, "min": a.min_version, "max": a.max_version} for a in ctx.advertised],
            }
        )

    async def _topics(self, _: web.Request) -> web.Response:
        ctx = self._ctx
        out = []
        for spec in ctx.topics.topics():
            partitions = []
            for index in range(spec.partitions):
                p = ctx.replicas.get(TopicPartition(spec.name, index))
                if p is None:
                    continue
                partitions.append(
                    {
                        "partition": index,
                        "leader": p.state.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": list(p.state.replicas),
                        "isr": list(p.state.isr),
                        "log_start_offset": p.log_start_offset,
                        "log_end_offset": p.log_end_offset,
                        "high_watermark": p.high_watermark,
                        "size_bytes": p.log.size_bytes(),
                    }
                )
            out.append(
                {
                    "name": spec.name,
                    "id": str(spec.topic_id),
                    "internal": spec.internal,
                    "replication_factor": spec.replication_factor,
                    "configs": dict(spec.configs),
                    "partitions": partitions,
                }
            )
        return _json({"topics": out})
