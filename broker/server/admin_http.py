"""The broker's admin HTTP endpoint (aiohttp): health, Prometheus metrics, a small JSON API.

    GET /healthz      200 {"status": "ok", ...} while the broker serves (liveness)
    GET /readyz       200 when ready for traffic, else 503 with the reason (readiness.py)
    GET /metrics      Prometheus text format, from the broker's own registry
    GET /api/broker   id, cluster id, listeners, advertised APIs
    GET /api/topics   topics with per-partition offsets and sizes
    GET /api/partitions every partition this broker hosts: role, offsets, size, segments, retention
    GET /api/groups   groups this broker coordinates: state, members, assignment, committed offsets, lag

Read-only: it changes nothing. With `admin.token.file` set, everything but
/healthz and /readyz (the kubelet's probes) needs `Authorization: Bearer
<that token>`: topic names, group members and lag are not for anyone who can
reach the port. `admin.metrics.public` leaves /metrics open as well, for a
Prometheus that scrapes many clusters without their tokens (the operator sets
it when the chart's broker ServiceMonitor is on); /api/* keeps the token.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from prometheus_client import CONTENT_TYPE_LATEST

from tinystream.broker.groups.stats import GroupStats
from tinystream.broker.handlers.shared.context import BrokerContext
from tinystream.broker.server.readiness import Readiness, replicated_readiness
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.controller_auth import TokenFile, bearer


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


class AdminHttp:
    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._runner: web.AppRunner | None = None
        token_file = ctx.settings.admin_token_file
        # Read at each guarded request (again only once the file changed): a Secret's new key reaches a
        # running pod's volume late, and a token file not readable yet refuses everyone instead of
        # stopping the broker.
        self._token = TokenFile(token_file) if token_file else None
        self._open_paths = {"/healthz", "/readyz"} | ({"/metrics"} if ctx.settings.admin_metrics_public else set())
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/broker", self._broker)
        app.router.add_get("/api/topics", self._topics)
        app.router.add_get("/api/partitions", self._partitions)
        app.router.add_get("/api/groups", self._groups)
        self._app = app
        ctx.metrics.watch_broker(ctx)

    @web.middleware
    async def _authenticate(self, request: web.Request,
                            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if self._token is None or request.path in self._open_paths:
            return await handler(request)
        given = bearer(request.headers.get("Authorization")) or ""
        try:
            expected = self._token()
        except (OSError, ValueError):
            return _json({"error": "unauthorized", "message": "the admin token file (admin.token.file) cannot be "
                          "read yet: nobody is let in"}, status=401)
        if not hmac.compare_digest(given.encode(), expected.encode()):
            return _json({"error": "unauthorized", "message": "this endpoint needs the admin token "
                          "(Authorization: Bearer ...; admin.token.file)"}, status=401)
        return await handler(request)

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

    async def _readyz(self, _: web.Request) -> web.Response:
        ctx = self._ctx
        if ctx.control is None:
            state = Readiness(True, "standalone broker: serving")
        else:
            state = replicated_readiness(ctx.control.image, ctx.cluster.broker_id)
        body = {"ready": state.ready, "reason": state.reason, "broker_id": ctx.cluster.broker_id}
        if state.lagging:
            body["lagging"] = state.lagging
        return _json(body, status=200 if state.ready else 503)

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
                "listener": f"{local.host}:{local.port}",  # the inter-broker listener's address
                "listeners": [{"name": a.name, "address": f"{a.host}:{a.port}", "security_protocol": a.security_protocol}
                              for a in local.listeners],
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
                partitions.append({"partition": index, **_placement_and_offsets(p), "size_bytes": p.log.size_bytes()})
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

    async def _partitions(self, _: web.Request) -> web.Response:
        """Every hosted partition as this broker sees it (a follower's HW trails the leader's)."""
        ctx = self._ctx
        settings = ctx.topics.settings  # the topic defaults as they are now (dynamic broker configs)
        out = []
        for p in ctx.replicas.partitions():
            spec = ctx.topics.get(p.tp.topic)
            configs = dict(spec.configs) if spec is not None else {}
            try:
                size, segments = p.log.size_bytes(), p.log.segment_count()
            except Exception:  # a closed or failing log: report it without its sizes
                size, segments = None, None
            out.append(
                {
                    "topic": p.tp.topic,
                    "partition": p.tp.partition,
                    "is_leader": bool(p.is_leader),
                    **_placement_and_offsets(p),
                    "size_bytes": size,
                    "segments": segments,
                    "retention_ms": int(configs.get("retention.ms", settings.log_retention_ms)),
                    "retention_bytes": int(configs.get("retention.bytes", settings.log_retention_bytes)),
                }
            )
        return _json({"broker_id": ctx.cluster.broker_id, "partitions": out})

    async def _groups(self, _: web.Request) -> web.Response:
        """Groups coordinated here. Lag = this broker's high watermark of the partition - committed,
        where it hosts the partition (null otherwise: the dashboard takes the leader's)."""
        return _json({"broker_id": self._ctx.cluster.broker_id, "groups": await group_rows(self._ctx)})


async def group_rows(ctx: BrokerContext) -> list[dict[str, Any]]:
    service = ctx.groups
    if service is None:
        return []
    coordinator = service.coordinator
    listings = coordinator.list_groups()
    descriptions = await coordinator.describe_groups([g.group_id for g in listings])
    rows = []
    for desc in descriptions:
        members = []
        for m in desc.members:
            members.append(
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": decode_assignment(m.assignment) if desc.protocol_type == "consumer" else [],
                }
            )
        owner = {(t["topic"], p): m["member_id"] for m in members for t in m["assignment"] for p in t["partitions"]}
        offsets = []
        for (topic, partition), committed in sorted(coordinator.committed(desc.group_id).items()):
            p = ctx.replicas.get(TopicPartition(topic, partition))
            end = p.high_watermark if p is not None else None
            offsets.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "committed": committed,
                    "end_offset": end,
                    "lag": max(end - committed, 0) if end is not None and committed >= 0 else None,
                    "member_id": owner.get((topic, partition)),
                }
            )
        protocol = desc.protocol
        if coordinator.group_type(desc.group_id) == "consumer":
            # KIP-848: DescribeGroups shows such a group Dead; its members and assignment come from
            # ConsumerGroupDescribe's view (the assignor stands where a classic group's protocol does).
            (cdesc,) = await coordinator.consumer_group_describe([desc.group_id])
            members = [
                {"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                 "client_host": m.client_host, "member_epoch": m.member_epoch,
                 "assignment": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(m.assignment.items())]}
                for m in cdesc.members
            ]
            owner = {(t["topic"], p): m["member_id"] for m in members for t in m["assignment"] for p in t["partitions"]}
            for row in offsets:
                row["member_id"] = owner.get((row["topic"], row["partition"]))
            desc = replace(desc, state=cdesc.state, protocol_type="consumer")
            protocol = cdesc.assignor
        rows.append(
            {
                "group_id": desc.group_id,
                "state": desc.state,
                "protocol_type": desc.protocol_type,
                "protocol": protocol,
                "coordinator": ctx.cluster.broker_id,
                "members": members,
                "offsets": offsets,
                "activity": activity_row(coordinator.stats(desc.group_id)),
            }
        )
    return rows


def activity_row(stats: GroupStats | None) -> dict[str, Any] | None:
    """A group's counters and its recent rebalances (the dashboard draws them over time)."""
    if stats is None:
        return None
    return {
        "joins": stats.joins,
        "leaves": stats.leaves,
        "expirations": stats.expirations,
        "commits": stats.commits,
        "records_committed": stats.records_committed,
        "rebalances": {cause.value: count for cause, count in stats.rebalances.items()},
        "rebalance_history": [
            {"at_ms": r.at_ms, "cause": r.cause.value, "generation": r.generation} for r in stats.history
        ],
    }


def decode_assignment(raw: bytes) -> list[dict[str, Any]]:
    """The consumer protocol's MemberAssignment (KIP-429 layout v0-v3: version, [topic, [partition]], ...)."""
    if not raw:
        return []
    try:
        by_topic: dict[str, list[int]] = {}
        for tp in ConsumerProtocolAssignment.decode(raw).partitions():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]
    except Exception:  # an unknown or custom assignor's bytes: show none rather than fail
        return []


def _placement_and_offsets(p: Any) -> dict[str, Any]:
    """A partition's placement and offsets as this broker sees it (both /api views share them)."""
    return {
        "leader": p.state.leader,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.state.replicas),
        "isr": list(p.state.isr),
        "log_start_offset": p.log_start_offset,
        "log_end_offset": p.log_end_offset,
        "high_watermark": p.high_watermark,
    }
