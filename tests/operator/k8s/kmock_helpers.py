"""Run the operator in-process against KMock, the Kubernetes API mock by kopf's author.

KMock's KubernetesEmulator keeps objects in memory, serves list/watch/get,
applies PATCH as a JSON merge patch, and honours finalizers on DELETE. It
does no defaulting, assigns no uid or resourceVersion, and runs no
controllers (no pods appear for a StatefulSet): tests create what a real
cluster would (uids, a resourceVersion for kopf's JSON-patch `test` op,
pods) themselves. It also keys objects by name only, so kopf's Events
(generateName) after the first answer 409; kopf logs and ignores that.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import kmock
import kopf

from tinystream.operator.k8s.handlers import Deps, make_registry
from tinystream.operator.k8s.model import OperatorContext
from tinystream.testing.waiting import wait_until_async

NS = "streaming"

# (group/version/plural, kind, namespaced, subresources)
RESOURCES = [
    ("tinystream.io/v1alpha1/tinystreamclusters", "TinyStreamCluster", True, {"status", "scale"}),
    ("tinystream.io/v1alpha1/topics", "Topic", True, {"status"}),
    ("tinystream.io/v1alpha1/tinystreamrebalances", "TinyStreamRebalance", True, {"status"}),
    ("tinystream.io/v1alpha1/tinystreamnodepools", "TinyStreamNodePool", True, {"status", "scale"}),
    ("apps/v1/statefulsets", "StatefulSet", True, {"status", "scale"}),
    ("policy/v1/poddisruptionbudgets", "PodDisruptionBudget", True, {"status"}),
    ("v1/services", "Service", True, {"status"}),
    ("v1/configmaps", "ConfigMap", True, set()),
    ("v1/secrets", "Secret", True, set()),
    ("v1/pods", "Pod", True, {"status"}),
    ("v1/persistentvolumeclaims", "PersistentVolumeClaim", True, {"status"}),
    ("v1/serviceaccounts", "ServiceAccount", True, set()),
    ("rbac.authorization.k8s.io/v1/clusterrolebindings", "ClusterRoleBinding", False, set()),
    ("storage.k8s.io/v1/storageclasses", "StorageClass", False, set()),
    ("v1/events", "Event", True, set()),
    ("v1/nodes", "Node", False, {"status"}),
    ("v1/namespaces", "Namespace", False, {"status"}),
    ("kopf.dev/v1/clusterkopfpeerings", "ClusterKopfPeering", False, set()),
    ("apiextensions.k8s.io/v1/customresourcedefinitions", "CustomResourceDefinition", False, {"status"}),
]
VERBS = {"get", "list", "watch", "create", "patch", "update", "delete"}

# broker_rack_role: the chart's ClusterRole as release `ts` names it (test_chart_install.py binds to it).
#: The operator's master secret in these tests: a controller a test makes must derive from the same one.
MASTER_SECRET = "test-master-secret"
CTX = OperatorContext(broker_image="tinystream:test", operator_service="ts.ops.svc",
                      broker_rack_role="ts-tinystream-broker-rack")


def declare(server: Any) -> None:
    for path, kind, namespaced, subresources in RESOURCES:
        server.resources[path] = kmock.ResourceInfo(kind=kind, namespaced=namespaced, verbs=VERBS,
                                                    subresources=subresources)


def path_of(api_version: str, plural: str, name: str | None = None, namespace: str | None = NS) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    return f"{base}/{plural}" + (f"/{name}" if name else "")


class Api:
    """A kubectl stand-in: plain HTTP calls to the mock, in one namespace."""

    def __init__(self, url: str, namespace: str = NS) -> None:
        self.url = url.rstrip("/")
        self.ns = namespace
        self.session = aiohttp.ClientSession()

    def in_namespace(self, namespace: str) -> Api:
        other = Api.__new__(Api)
        other.url, other.ns, other.session = self.url, namespace, self.session
        return other

    async def close(self) -> None:
        await self.session.close()

    async def create(self, api_version: str, plural: str, obj: dict[str, Any]) -> None:
        # What the API server adds on create (KMock does not): uid, resourceVersion.
        name = obj["metadata"]["name"]
        obj = {**obj, "metadata": {"uid": f"uid-{self.ns}-{plural}-{name}", "resourceVersion": "1",
                                   **obj["metadata"], "namespace": self.ns}}
        async with self.session.post(self.url + path_of(api_version, plural, namespace=self.ns), json=obj) as r:
            assert r.status < 300, await r.text()

    async def get(self, api_version: str, plural: str, name: str) -> dict | None:
        async with self.session.get(self.url + path_of(api_version, plural, name, self.ns)) as r:
            return None if r.status == 404 else await r.json()

    async def list(self, api_version: str, plural: str) -> list[dict]:
        async with self.session.get(self.url + path_of(api_version, plural, namespace=self.ns)) as r:
            assert r.status < 300, await r.text()
            return list((await r.json()).get("items") or [])

    async def patch(self, api_version: str, plural: str, name: str, patch: dict[str, Any]) -> None:
        async with self.session.patch(self.url + path_of(api_version, plural, name, self.ns), json=patch,
                                      headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status < 300, await r.text()

    async def delete(self, api_version: str, plural: str, name: str) -> None:
        async with self.session.delete(self.url + path_of(api_version, plural, name, self.ns)) as r:
            assert r.status < 300, await r.text()

    async def wait_for(self, api_version: str, plural: str, name: str,
                       predicate: Callable[[dict | None], bool], *, timeout: float = 15.0) -> dict | None:
        obj = None

        async def matches() -> bool:
            nonlocal obj
            obj = await self.get(api_version, plural, name)
            return predicate(obj)

        await wait_until_async(matches, timeout=timeout, interval=0.1, what=lambda: f"{plural}/{name}; last seen: {obj}")
        return obj


def ready_condition(obj: dict | None) -> dict:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return {}


@contextlib.asynccontextmanager
async def running_operator(url: str, *, controller: Any, peering: str | None = None,
                           health_interval_s: float = 0.5, crds_dir: Any = None,
                           scanning: bool = False, dashboard: Any = None,
                           connection: kopf.ConnectionInfo | None = None,
                           namespace: str | None = None, user_secret_interval_s: float = 1.0,
                           clock: Callable[[], datetime.datetime] | None = None,
                           registry_url: Callable[[Any], str] | None = None,
                           schema_interval_s: float = 60.0) -> AsyncIterator[Deps]:
    """The operator as in production (clusterwide, or watching `namespace` as the chart's default) until the
    block ends.

    `connection` logs in to a real API server (token, TLS); the default is KMock's plain URL.

    kopf runs in a thread with its own event loop (as kopf.testing.KopfRunner
    does): on exit kopf waits for every task its loop started after start-up,
    which in a shared loop would include KMock's own request handlers.
    """
    info = connection if connection is not None else kopf.ConnectionInfo(server=url)
    # Brokers are told https exactly when the controller serves it (the CLI derives both from one setting).
    ctx = dataclasses.replace(CTX, controller_tls=getattr(controller, "tls", None) is not None)
    deps = Deps(connect=lambda **_: info, ctx=ctx, controller=controller,
                health_interval_s=health_interval_s, crds_dir=crds_dir, dashboard=dashboard,
                master_secret=MASTER_SECRET, user_secret_interval_s=user_secret_interval_s)
    if clock is not None:
        deps.clock = clock
    deps.registry_url = registry_url  # a schema registry process of the test's (TinyStreamSchema)
    deps.schema_interval_s = schema_interval_s
    registry = make_registry(deps)
    settings = kopf.OperatorSettings()
    settings.watching.reconnect_backoff = 0.1
    settings.networking.request_timeout = 10
    # Short waits for a test server: exit quickly, retry quickly. KMock keeps
    # resourceVersion as created, so kopf's wait for a newer one after its own
    # patch (consistency_timeout) would only add delay.
    settings.queueing.exit_timeout = 0.5
    settings.queueing.idle_timeout = 0.5
    settings.background.instant_exit_timeout = 0.5
    settings.persistence.consistency_timeout = 0.2
    settings.queueing.error_delays = [0.5]
    settings.networking.error_backoffs = [0.1, 0.2]  # kopf's discovery retries end soon after a stop
    # kopf's runtime scanning (watching CRDs and namespaces appear) keeps discovery
    # requests in flight that a stop waits 5 s for; production keeps it on, and so
    # does the RBAC test, which must see those calls.
    settings.scanning.disabled = not scanning
    stop, ready = threading.Event(), threading.Event()

    def run() -> None:
        kopf.run(registry=registry, settings=settings, clusterwide=namespace is None,
                 namespaces=[namespace] if namespace else (), stop_flag=stop, ready_flag=ready,
                 standalone=peering is None, peering_name=peering)

    thread = threading.Thread(target=run, name="kopf", daemon=True)
    thread.start()
    try:
        if not await asyncio.to_thread(ready.wait, 15):
            raise AssertionError("the operator did not start within 15 s")
        yield deps
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 15)
        assert not thread.is_alive(), "the operator did not stop within 15 s"


async def memory_secret(_client: Any, _cluster: Any) -> str:
    """A controller secret for OperatorController tests without a Kubernetes API (memory state stores)."""
    return "test-secret"


class BareClusters:
    """A Kubernetes API whose every TinyStreamCluster has an empty spec: what an OperatorController with
    memory state stores reads when a cluster's controller opens (its spec.config, its uid for the CA)."""

    async def get(self, _api_version: str, _kind: str, name: str, namespace: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}, "spec": {"brokers": 1}}
