"""The operator's metrics: reconcile series per handler, and /metrics on the controller port."""

from __future__ import annotations

from k8s_requirements import require

require('kopf')

import aiohttp
import kopf
import pytest
from kmock_helpers import BareClusters, memory_secret
from prometheus_client.parser import text_string_to_metric_families

from tinystream.operator.k8s.controller_host import OperatorController
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.handlers import Deps, make_registry
from tinystream.operator.k8s.metrics import OperatorMetrics
from tinystream.operator.service import MemoryStateStore
from tinystream.operator.service.controller_service import DriverTiming


def samples(text: str | bytes) -> dict[tuple[str, frozenset], float]:
    text = text.decode() if isinstance(text, bytes) else text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def test_instrument_counts_times_and_classifies_errors():
    metrics = OperatorMetrics()

    @metrics.instrument("topic_changed")
    async def handler(fail: BaseException | None = None, **_) -> str:
        if fail is not None:
            raise fail
        return "done"

    assert await handler() == "done"
    with pytest.raises(kopf.TemporaryError):
        await handler(fail=kopf.TemporaryError("later", delay=1))
    with pytest.raises(RuntimeError):
        await handler(fail=RuntimeError("bug"))
    found = samples(metrics.exposition())
    assert value(found, "tinystream_operator_reconciles_total", handler="topic_changed") == 3
    assert value(found, "tinystream_operator_reconcile_errors_total", handler="topic_changed",
                 error="TemporaryError") == 1
    assert value(found, "tinystream_operator_reconcile_errors_total", handler="topic_changed",
                 error="RuntimeError") == 1
    assert value(found, "tinystream_operator_reconcile_duration_seconds_count", handler="topic_changed") == 3


def test_instrumented_handlers_keep_their_kopf_ids():
    # kopf derives handler ids (stored in progress annotations) from the function's qualified name.
    registry = make_registry(Deps(connect=lambda **_: None))
    handlers = [*registry._changing.get_all_handlers(), *registry._spawning.get_all_handlers()]
    ids = {h.id for h in handlers}
    for name in ("cluster_changed", "cluster_deleted", "topic_changed", "topic_deleted", "cluster_health",
                 "topic_health", "rebalance_changed", "rebalance_progress", "pool_changed", "pool_health"):
        assert f"make_registry.<locals>.{name}" in ids
    for name in ("user_changed", "user_health", "user_secret_check", "user_deleted"):
        assert f"register_user_handlers.<locals>.{name}" in ids
    wrapped = {h.fn.__wrapped__.__name__ for h in handlers if hasattr(h.fn, "__wrapped__")}
    assert wrapped == {"cluster_changed", "cluster_deleted", "topic_changed", "topic_deleted", "cluster_health",
                       "topic_health", "user_changed", "user_health", "user_secret_check", "user_deleted",
                       "rebalance_changed", "rebalance_progress", "schema_changed", "schema_check",
                       "schema_deleted", "pool_changed", "pool_health"}


async def test_operator_serves_metrics_with_every_clusters_controller_series():
    metrics = OperatorMetrics()
    metrics.observe("cluster_health", 0.01)
    host = OperatorController(host="127.0.0.1", port=0, timing=DriverTiming(tick_interval_s=0.2),
                              store_factory=lambda client, key: MemoryStateStore(),
                              secret_source=memory_secret, metrics=metrics.controller)
    await host.start(client=BareClusters())  # memory stores; the clusters' spec.config is read (empty here)
    try:
        await host.attach(ClusterKey("ns", "demo"))
        await host.attach(ClusterKey("other", "big"))
        async with aiohttp.ClientSession() as http:
            admin = {"Authorization": f"Bearer {host.admin_token(ClusterKey('ns', 'demo'))}"}
            async with http.get(host.cluster_url(ClusterKey("ns", "demo")) + "/v1/metadata", headers=admin) as response:
                assert response.status == 200
            async with http.get(host.url + "/metrics") as response:
                assert response.status == 200
                found = samples(await response.text())
    finally:
        await host.stop()
    for namespace, cluster in (("ns", "demo"), ("other", "big")):
        assert value(found, "tinystream_controller_brokers", namespace=namespace, cluster=cluster,
                     state="registered") == 0
        assert ("tinystream_controller_metadata_version",
                frozenset({"namespace": namespace, "cluster": cluster}.items())) in found
    assert value(found, "tinystream_operator_reconciles_total", handler="cluster_health") == 1
    # Route templates without the /clusters/{namespace}/{cluster} prefix: the same names as the local controller.
    assert value(found, "tinystream_controller_http_requests_total", route="/v1/metadata", method="GET",
                 status="200") == 1
