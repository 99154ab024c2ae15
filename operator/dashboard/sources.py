"""Where the dashboard's numbers come from: the controller's image and each broker's admin API.

One `RawSnapshot` is everything read in one round: the controller's
`GET /v1/metadata`, and per broker `GET /api/broker`, `/api/partitions`,
`/api/groups` and the byte / record totals summed from `/metrics`. Reads run
concurrently with a short timeout; a broker or controller that does not
answer is recorded with its error (the views show it as down) instead of
failing the snapshot. All network access of the dashboard is in this module;
a test can pass any object with an async `snapshot()`.

Where broker admin URLs come from depends on who serves the dashboard: the
local supervisor knows them (`tinystream dev`), the controller and the
operator derive them from the image with a template such as
`http://{host}:3200` (on Kubernetes the brokers' admin port), or, with no
template, show the controller's view alone.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

FETCH_TIMEOUT_S = 1.5

#: Counter families summed per broker for the overview and the throughput chart (broker/metrics/broker_metrics.py).
TOTALS = {
    "tinystream_bytes_in": "bytes_in",
    "tinystream_bytes_out": "bytes_out",
    "tinystream_messages_in": "records_in",
    "tinystream_requests": "requests",
}


@dataclass(frozen=True, slots=True)
class BrokerReading:
    broker_id: int
    admin_url: str | None
    up: bool
    error: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)  # /api/broker
    partitions: list[Mapping[str, Any]] = field(default_factory=list)  # /api/partitions
    groups: list[Mapping[str, Any]] = field(default_factory=list)  # /api/groups
    totals: Mapping[str, float] = field(default_factory=dict)  # TOTALS values, summed over labels
    per_topic: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # topic -> TOTALS value


@dataclass(frozen=True, slots=True)
class RawSnapshot:
    taken_at: float  # wall clock, seconds
    controller_url: str | None
    controller_up: bool
    controller_error: str | None
    metadata: Mapping[str, Any] | None
    brokers: list[BrokerReading]


class ClusterSource(Protocol):
    async def snapshot(self) -> RawSnapshot: ...


AdminUrls = Callable[[Mapping[str, Any] | None], Mapping[int, str]]


def admin_urls_from_template(template: str | None) -> AdminUrls:
    """Broker id -> admin URL from the image's broker host (`http://{host}:3200`; None: unknown)."""

    def resolve(metadata: Mapping[str, Any] | None) -> Mapping[int, str]:
        if not template or not metadata:
            return {}
        return {b["broker_id"]: template.format(host=b["host"], broker_id=b["broker_id"])
                for b in metadata.get("brokers", [])}

    return resolve


def parse_totals(text: str) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Sum the TOTALS counters of one Prometheus exposition, overall and per topic."""
    totals = {name: 0.0 for name in TOTALS.values()}
    per_topic: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        key = TOTALS.get(family.name)
        if key is None:
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue  # _created timestamps
            totals[key] += sample.value
            topic = sample.labels.get("topic")
            if topic is not None:
                per_topic.setdefault(topic, {})[key] = per_topic.get(topic, {}).get(key, 0.0) + sample.value
    return totals, per_topic


class HttpClusterSource:
    """Reads the controller and the brokers over HTTP (aiohttp), one session per source."""

    def __init__(
        self,
        controller_url: Callable[[], str | None] | str | None,
        *,
        controller_token: str | None = None,  # the controller API wants one (tinystream/controller_auth.py)
        controller_ssl: ssl.SSLContext | None = None,  # verifies an https controller (None: the system's CAs)
        admin_token: str | None = None,  # the brokers' admin HTTP, when they set admin.token.file
        admin_urls: AdminUrls = admin_urls_from_template(None),  # noqa: B008 - a pure function, built once
        timeout_s: float = FETCH_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._controller_url = controller_url if callable(controller_url) else (lambda: controller_url)
        self._admin_urls = admin_urls
        self._controller_headers = {"Authorization": f"Bearer {controller_token}"} if controller_token else {}
        self._controller_ssl: ssl.SSLContext | bool = controller_ssl if controller_ssl is not None else True
        self._admin_headers = {"Authorization": f"Bearer {admin_token}"} if admin_token else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def _json(self, url: str, headers: Mapping[str, str] | None = None,
                    tls: ssl.SSLContext | bool = True) -> Any:
        async with self._http().get(url, headers=headers, ssl=tls) as response:
            response.raise_for_status()
            return await response.json(content_type=None)

    async def _text(self, url: str, headers: Mapping[str, str] | None = None) -> str:
        async with self._http().get(url, headers=headers) as response:
            response.raise_for_status()
            return await response.text()

    async def snapshot(self) -> RawSnapshot:
        url = self._controller_url()
        metadata: Mapping[str, Any] | None = None
        error: str | None = None
        if url:
            try:
                metadata = await self._json(f"{url.rstrip('/')}/v1/metadata", self._controller_headers,
                                            self._controller_ssl)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                error = _describe(exc)
        else:
            error = "no controller URL"
        admin = dict(self._admin_urls(metadata))
        ids = sorted(set(admin) | {b["broker_id"] for b in (metadata or {}).get("brokers", [])})
        readings = await asyncio.gather(*(self._broker(i, admin.get(i)) for i in ids))
        return RawSnapshot(taken_at=self._clock(), controller_url=url, controller_up=metadata is not None,
                           controller_error=error, metadata=metadata, brokers=list(readings))

    async def _broker(self, broker_id: int, admin_url: str | None) -> BrokerReading:
        if admin_url is None:
            return BrokerReading(broker_id=broker_id, admin_url=None, up=False, error="admin URL unknown")
        base = admin_url.rstrip("/")
        auth = self._admin_headers
        calls: list[Awaitable[Any]] = [self._json(f"{base}/api/broker", auth), self._json(f"{base}/api/partitions", auth),
                                       self._json(f"{base}/api/groups", auth), self._text(f"{base}/metrics", auth)]
        try:
            info, partitions, groups, metrics = await asyncio.gather(*calls)
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            return BrokerReading(broker_id=broker_id, admin_url=admin_url, up=False, error=_describe(exc))
        totals, per_topic = parse_totals(metrics)
        return BrokerReading(broker_id=broker_id, admin_url=admin_url, up=True, info=info,
                             partitions=partitions.get("partitions", []), groups=groups.get("groups", []),
                             totals=totals, per_topic=per_topic)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
