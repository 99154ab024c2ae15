"""The operator's dashboard (operator/k8s/dashboard_host.py): every controlled cluster on one port.

An in-process OperatorController (memory state stores) runs the cluster's
controller core; a stand-in KubeClient answers the cluster resource and its
broker pods. The dashboard reads the controller over its real HTTP API; the
broker admin URLs are pod DNS names that do not resolve here, so brokers
show as down with the URL the operator derived. A last test runs the kopf
handlers against KMock to check start-up and cleanup wiring.
"""

from __future__ import annotations

from k8s_requirements import require

require('kopf', 'kmock')

import socket
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from kmock_helpers import memory_secret

from tinystream.operator.controller import BrokerHeartbeat, RegisterBroker
from tinystream.operator.k8s.controller_host import OperatorController
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.dashboard_host import OperatorDashboard, broker_admin_urls
from tinystream.operator.k8s.topics import CreateTopic
from tinystream.operator.service.controller_service import DriverTiming
from tinystream.operator.service.state_store import MemoryStateStore

pytestmark = pytest.mark.timeout(30)

NS = "streaming"
KEY = ClusterKey(NS, "demo")
CLUSTER = {"apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamCluster",
           "metadata": {"name": "demo", "namespace": NS, "uid": "u1"},
           "spec": {"brokers": 1, "listeners": {"admin": 8081}}}
BROKER_LABELS = {"tinystream.io/cluster": "demo", "app.kubernetes.io/component": "broker"}
ADMIN_URL = "http://demo-broker-0.demo-brokers.streaming.svc:8081"
LOGIN = "the-dashboard-login-token"
AS_VIEWER = {"Authorization": f"Bearer {LOGIN}"}


class StubKube:
    """The two reads the dashboard makes: the cluster resource and its pods."""

    def __init__(self) -> None:
        self.pod_lists = 0

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return CLUSTER if (kind, name, namespace) == ("TinyStreamCluster", "demo", NS) else None

    async def list(self, api_version: str, kind: str, namespace: str | None = None, *,
                   labels: Any = None) -> list[dict[str, Any]]:
        assert (kind, namespace, dict(labels or {})) == ("Pod", NS, BROKER_LABELS)
        self.pod_lists += 1
        return [{"metadata": {"name": "demo-broker-0", "labels": BROKER_LABELS}},
                {"metadata": {"name": "demo-other-0", "labels": BROKER_LABELS}}]  # not a broker pod


@pytest_asyncio.fixture
async def controller():
    host = OperatorController(host="127.0.0.1", port=0, timing=DriverTiming(tick_interval_s=0.2),
                              store_factory=lambda client, key: MemoryStateStore(),
                              secret_source=memory_secret)
    await host.start(client=StubKube())
    service = await host.attach(KEY)
    registered = await service.submit(RegisterBroker(broker_id=0, incarnation_id="i0",
                                                     host="demo-broker-0.demo-brokers.streaming.svc", port=9092))
    epoch = registered.state.image.brokers[0].epoch
    await service.submit(BrokerHeartbeat(broker_id=0, broker_epoch=epoch, metadata_version=service.image.version))
    await host.apply_topic(KEY, [CreateTopic(name="orders", partitions=2, replication_factor=1, config={})])
    yield host
    await host.stop()


@pytest_asyncio.fixture
async def dashboard(controller):
    kube = StubKube()
    board = OperatorDashboard(controller, host="127.0.0.1", port=0, pods_ttl_s=60, login_token=LOGIN)
    url = await board.start(kube)
    assert url is not None
    board.kube = kube  # type: ignore[attr-defined]
    yield board
    await board.stop()


async def test_admin_urls_come_from_broker_pods_and_the_admin_listener():
    assert await broker_admin_urls(StubKube(), KEY) == {0: ADMIN_URL}
    assert await broker_admin_urls(StubKube(), ClusterKey(NS, "gone")) == {}


async def test_index_lists_the_clusters_and_each_has_its_dashboard(controller, dashboard):
    base = dashboard.url
    async with aiohttp.ClientSession(headers=AS_VIEWER) as http:
        async with http.get(base + "/") as r:
            assert r.status == 200 and 'href="clusters/streaming/demo/"' in await r.text()
        async with http.get(base + "/api/clusters") as r:
            assert (await r.json())["clusters"] == [{"namespace": NS, "name": "demo",
                                                     "dashboard": "/clusters/streaming/demo/",
                                                     "api": "/clusters/streaming/demo/api/"}]

        async with http.get(base + "/clusters/streaming/demo/api/overview") as r:
            assert r.status == 200 and r.content_type == "application/json"
            overview = await r.json()
        image = controller.service(KEY).image
        assert overview["cluster_id"] == image.cluster_id
        assert overview["metadata_version"] == image.version
        assert overview["controller"]["up"] is True
        assert overview["controller"]["url"] == controller.cluster_url(KEY)
        assert overview["brokers"]["registered"] == 1 and overview["topics"] == 1
        assert overview["partitions"] == 2

        async with http.get(base + "/clusters/streaming/demo/api/topics") as r:
            topics = (await r.json())["topics"]
        assert [t["name"] for t in topics] == ["orders"]
        async with http.get(base + "/clusters/streaming/demo/api/brokers") as r:
            (broker,) = (await r.json())["brokers"]
        assert broker["broker_id"] == 0 and broker["admin_url"] == ADMIN_URL and broker["up"] is False

        # The page (relative URLs need the slash), its script, the OpenAPI twin; unknown views and clusters.
        async with http.get(base + "/clusters/streaming/demo", allow_redirects=False) as r:
            assert r.status == 302 and r.headers["Location"] == "/clusters/streaming/demo/"
        async with http.get(base + "/clusters/streaming/demo/") as r:
            assert r.status == 200 and r.content_type == "text/html"
        async with http.get(base + "/clusters/streaming/demo/dashboard.js") as r:
            assert r.status == 200
        async with http.get(base + "/clusters/streaming/demo/api/openapi.json") as r:
            assert "/api/overview" in (await r.json())["paths"]
        async with http.get(base + "/clusters/streaming/demo/api/nope") as r:
            assert r.status == 404
        async with http.get(base + "/clusters/streaming/nope/api/overview") as r:
            assert r.status == 404
    assert dashboard.kube.pod_lists == 1  # the pods are read once per TTL, not per request

    # A deleted cluster leaves the index, and its dashboard (sampler, HTTP session) is closed.
    await controller.forget(KEY)
    async with aiohttp.ClientSession(headers=AS_VIEWER) as http:
        async with http.get(dashboard.url + "/api/clusters") as r:
            assert (await r.json())["clusters"] == []
        async with http.get(dashboard.url + "/clusters/streaming/demo/api/overview") as r:
            assert r.status == 404


async def test_nobody_sees_a_cluster_without_the_login_token(controller, dashboard):
    """Issue 21: the operator's dashboard needed no login; now every view wants the token."""
    base = dashboard.url
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:  # cookies for 127.0.0.1
        for path in ("/api/clusters", "/clusters/streaming/demo/api/overview", "/clusters/streaming/demo/api/groups"):
            async with http.get(base + path) as r:
                assert r.status == 401, path
            async with http.get(base + path, headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401, path
        async with http.get(base + "/clusters/streaming/demo/", allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/login"
        async with http.post(base + "/login", data={"token": "wrong"}) as r:
            assert r.status == 401 and "not the dashboard" in await r.text()
        async with http.get(base + "/api/clusters") as r:
            assert r.status == 401  # a refused login leaves no session
        async with http.post(base + "/login", data={"token": LOGIN}, allow_redirects=False) as r:
            assert r.status == 303
            assert LOGIN not in r.headers["Set-Cookie"] and "HttpOnly" in r.headers["Set-Cookie"]
        async with http.get(base + "/api/clusters") as r:  # the browser's session cookie
            assert r.status == 200 and [c["name"] for c in (await r.json())["clusters"]] == ["demo"]
        async with http.get(base + "/logout", allow_redirects=False) as r:
            assert r.status == 303
        async with http.get(base + "/api/clusters") as r:
            assert r.status == 401


async def test_the_dashboard_reads_brokers_with_the_clusters_admin_token(controller, monkeypatch):
    """The brokers' admin HTTP wants the cluster's admin token (admin.token.file from the tokens Secret);
    the operator derives the same token and sends it."""
    from aiohttp import web

    from tinystream.operator.k8s import dashboard_host
    from tinystream.operator.k8s.controller_secret import broker_admin_token

    seen: list[str | None] = []

    async def api(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        view = request.match_info["view"]
        return web.json_response({"broker_id": 0} if view == "broker" else {view: []})

    async def metrics(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(text="")

    app = web.Application()
    app.add_routes([web.get("/api/{view}", api), web.get("/metrics", metrics)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def urls(client: Any, cluster: ClusterKey) -> dict[int, str]:
        return {0: url}

    monkeypatch.setattr(dashboard_host, "broker_admin_urls", urls)
    board = OperatorDashboard(controller, host="127.0.0.1", port=0, login_token=LOGIN)
    try:
        assert await board.start(StubKube()) is not None
        async with aiohttp.ClientSession(headers=AS_VIEWER) as http:
            async with http.get(board.url + "/clusters/streaming/demo/api/brokers") as r:
                (broker,) = (await r.json())["brokers"]
        assert broker["up"] is True
        expected = broker_admin_token(await memory_secret(None, KEY))
        assert len(seen) == 4 and set(seen) == {f"Bearer {expected}"}  # /api/broker, partitions, groups, /metrics
    finally:
        await board.stop()
        await runner.cleanup()


async def test_a_taken_port_is_not_fatal(controller):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        board = OperatorDashboard(controller, host="127.0.0.1", port=taken.getsockname()[1])
        assert await board.start(StubKube()) is None
        await board.stop()


async def test_operator_startup_serves_the_dashboard_and_cleanup_stops_it():
    import kmock
    from kmock_helpers import Api, declare, running_operator

    controller = OperatorController(host="127.0.0.1", port=0, timing=DriverTiming(tick_interval_s=0.2),
                                    secret_source=memory_secret)
    board = OperatorDashboard(controller, host="127.0.0.1", port=0)
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        declare(emulator)
        api = Api(str(emulator.url), NS)
        try:
            async with running_operator(str(emulator.url), controller=controller, dashboard=board):
                await api.create("tinystream.io/v1alpha1", "tinystreamclusters",
                                 {**CLUSTER, "metadata": {"name": "demo"}})
                await api.wait_for("tinystream.io/v1alpha1", "tinystreamclusters", "demo",  # saved, then registered
                                   lambda o: ((o or {}).get("status") or {}).get("controller")
                                   and controller.clusters())
                assert board.url is not None
                async with api.session.get(board.url + "/api/clusters") as r:
                    assert [c["name"] for c in (await r.json())["clusters"]] == ["demo"]
            assert board.url is None  # cleanup stopped it
        finally:
            await api.close()


class PoolKube:
    """A node pool cluster: its pods are named by pool, their ids come from the pools' status."""

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        meta = {**CLUSTER["metadata"], "annotations": {"tinystream.io/node-pools": "enabled"}}
        return {**CLUSTER, "metadata": meta} if (kind, name) == ("TinyStreamCluster", "demo") else None

    async def list(self, api_version: str, kind: str, namespace: str | None = None, *,
                   labels: Any = None) -> list[dict[str, Any]]:
        if kind == "TinyStreamNodePool":
            return [{"metadata": {"name": "fast", "labels": {"tinystream.io/cluster": "demo"}},
                     "spec": {"replicas": 2}, "status": {"nodeIds": [5, 9]}}]
        return [{"metadata": {"name": n, "labels": BROKER_LABELS}} for n in ("demo-fast-0", "demo-fast-1", "demo-x-0")]


async def test_admin_urls_of_a_pool_cluster_are_keyed_by_the_pool_ids():
    assert await broker_admin_urls(PoolKube(), KEY) == {
        5: "http://demo-fast-0.demo-brokers.streaming.svc:8081", 9: "http://demo-fast-1.demo-brokers.streaming.svc:8081"}
