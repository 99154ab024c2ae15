"""Prometheus metrics of the controller service, in a registry of its own.

Two kinds of series:

* computed from the metadata image when scraped (`ImageCollector`): metadata
  version, brokers by state, topics, partitions, offline and under-replicated
  partitions, and the service's state-save counters. Nothing is updated on
  the write path, so `ControllerService` needs no Prometheus code: it keeps
  two plain integers (`saves`, `save_failures`) that the collector reads.
* updated per request by the HTTP middleware (`http_middleware`): requests
  and latency per route template, method and status.

A per-service CollectorRegistry (not prometheus_client's global one) keeps
several controllers in one process (tests, `tinystream dev`) apart, as
broker/metrics/broker_metrics.py does for brokers. The operator hosts one ControllerService
per TinyStreamCluster: it watches them all with `namespace` and `cluster`
labels (operator/k8s/metrics.py); the local controller has no extra labels.

    metrics = ControllerMetrics()
    metrics.watch(lambda: [((), service)])
    app = make_app(service, secret=secret, metrics=metrics)  # GET /metrics + the middleware

Names and meanings: operator/dashboard/METRICS.md ("Controller").
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tinystream.operator.controller import MetadataImage

# Long-polled GET /v1/metadata?wait_ms= answers after up to 30 s (DriverTiming.max_wait_ms), hence the top buckets.
HTTP_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BROKER_STATES = ("registered", "fenced", "drained")
UNMATCHED_ROUTE = "unmatched"  # 404s: never the raw path, which would make one series per typo

# A service as the collector sees it: its label values and the object with `image`, `saves`, `save_failures`.
Watched = Callable[[], Iterable[tuple[Sequence[str], Any]]]


def image_counts(image: MetadataImage) -> dict[str, int]:
    """The image's health in numbers (pure; the collector and the tests use it).

    Under-replicated follows Kafka's UnderReplicatedPartitions: ISR smaller
    than the replica set (during a reassignment that set includes the replicas
    being added); an offline partition (no leader) counts as offline only.
    """
    partitions = offline = under = 0
    for _, p in image.iter_partitions():
        partitions += 1
        if p.offline:
            offline += 1
        elif len(p.isr) < len(p.replicas):
            under += 1
    brokers = image.brokers.values()
    return {
        "registered": len(image.brokers),
        "fenced": sum(b.fenced for b in brokers),
        "drained": sum(b.drained for b in brokers),
        "topics": len(image.topics),
        "partitions": partitions,
        "offline": offline,
        "under_replicated": under,
    }


class ImageCollector(Collector):
    """Scrape-time gauges from each watched service's current image; see the module docstring."""

    def __init__(self, services: Watched, labels: Sequence[str] = ()) -> None:
        self._services = services
        self._labels = list(labels)

    def collect(self) -> Iterable[Any]:
        names = self._labels
        version = GaugeMetricFamily("tinystream_controller_metadata_version",
                                    "Version of the controller's metadata image", labels=names)
        brokers = GaugeMetricFamily("tinystream_controller_brokers",
                                    "Brokers in the image: registered (all), fenced, drained",
                                    labels=[*names, "state"])
        topics = GaugeMetricFamily("tinystream_controller_topics", "Topics in the image", labels=names)
        partitions = GaugeMetricFamily("tinystream_controller_partitions", "Partitions in the image", labels=names)
        offline = GaugeMetricFamily("tinystream_controller_offline_partitions",
                                    "Partitions without a leader", labels=names)
        under = GaugeMetricFamily("tinystream_controller_under_replicated_partitions",
                                  "Partitions with a leader whose ISR is smaller than their replica set",
                                  labels=names)
        saves = CounterMetricFamily("tinystream_controller_state_saves",
                                    "Controller state saves that succeeded", labels=names)
        failures = CounterMetricFamily("tinystream_controller_state_save_failures",
                                       "Controller state saves that failed (the change was refused)", labels=names)
        for values, service in self._services():
            values = list(values)
            counts = image_counts(service.image)
            version.add_metric(values, service.image.version)
            for state in BROKER_STATES:
                brokers.add_metric([*values, state], counts[state])
            topics.add_metric(values, counts["topics"])
            partitions.add_metric(values, counts["partitions"])
            offline.add_metric(values, counts["offline"])
            under.add_metric(values, counts["under_replicated"])
            saves.add_metric(values, service.saves)
            failures.add_metric(values, service.save_failures)
        yield from (version, brokers, topics, partitions, offline, under, saves, failures)


class ControllerMetrics:
    """The controller's registry: image collector(s), HTTP counters, `/metrics` exposition."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.http_requests = Counter(
            "tinystream_controller_http_requests", "Controller API requests, by route template, method and status",
            ["route", "method", "status"], registry=self.registry,
        )
        self.http_latency = Histogram(
            "tinystream_controller_http_request_duration_seconds",
            "Controller API request time (long-polls included), by route template, method and status",
            ["route", "method", "status"], buckets=HTTP_LATENCY_BUCKETS, registry=self.registry,
        )

    def watch(self, services: Watched, *, labels: Sequence[str] = ()) -> None:
        """Collect image gauges from `services()` at every scrape; call once per registry."""
        self.registry.register(ImageCollector(services, labels))

    def observe_http(self, *, route: str, method: str, status: int, seconds: float) -> None:
        labels = (route, method, str(status))
        self.http_requests.labels(*labels).inc()
        self.http_latency.labels(*labels).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


# -- aiohttp glue ----------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def route_template(request: web.Request, *, strip_prefix: str = "") -> str:
    """The matched route's template (`/v1/brokers/{broker_id}/heartbeat`), never the raw path."""
    route = request.match_info.route
    resource = getattr(route, "resource", None)
    if resource is None:  # 404 / 405 system routes
        return UNMATCHED_ROUTE
    template = resource.canonical
    if strip_prefix and template.startswith(strip_prefix):
        template = template[len(strip_prefix):] or "/"
    return template


def http_middleware(metrics: ControllerMetrics, *, strip_prefix: str = "") -> Callable[..., Any]:
    """Outermost middleware: times every request and counts it by the status actually sent.

    `strip_prefix` drops the operator's /clusters/{namespace}/{cluster} so both
    controllers report the same route names.
    """

    @web.middleware
    async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            metrics.observe_http(route=route_template(request, strip_prefix=strip_prefix), method=request.method,
                                 status=status, seconds=time.perf_counter() - start)

    return observe


def metrics_handler(metrics: ControllerMetrics) -> Handler:
    async def serve_metrics(_: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    return serve_metrics
