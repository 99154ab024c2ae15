"""Issue 21, item 6: a broker pod holds only its own identity, which expires with its pod.

Before: every broker pod mounted a Secret with every broker's controller API token (a StatefulSet has one
pod template), tokens never expired and nothing could revoke one. Now a pod proves who it is with its own
service-account token, bound to the pod, for the controller's audience only; the operator asks the real
API server (TokenReview) and believes the pod name the server bound into it. Tokens here are made as the
kubelet makes them (TokenRequest bound to a Pod object); no kubelet runs, so the pods stay Pending.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from real_api import connection

from tinystream.controller_auth import ADMIN, broker_principal, token_for
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.broker_identity import AUDIENCE, TokenReviewer
from tinystream.operator.service.http_api import make_clusters_app

pytestmark = pytest.mark.timeout(120)


def make_pod(control_plane, namespace: str, name: str) -> dict:
    status, pod = control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"automountServiceAccountToken": False, "containers": [{"name": "broker", "image": "x"}]}})
    assert status == 201, pod
    return pod


def pod_token(control_plane, namespace: str, pod: dict, *, audience: str = AUDIENCE) -> str:
    """The token the kubelet would project into `pod` (TokenRequest bound to the Pod)."""
    deadline = time.monotonic() + 20
    while control_plane.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")[0] != 200:
        assert time.monotonic() < deadline, "the default service account never appeared"
        time.sleep(0.1)
    status, made = control_plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/default/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"audiences": [audience], "expirationSeconds": 600,
                  "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"],
                                     "uid": pod["metadata"]["uid"]}}})
    assert status == 201, made
    return made["status"]["token"]


async def test_a_pod_token_proves_that_pod_and_nothing_else(control_plane, namespace) -> None:
    client = KubeClient.from_connection_info(connection(control_plane))
    reviewer = TokenReviewer(lambda: client, cache_s=0)
    try:
        broker_1 = make_pod(control_plane, namespace, "demo-broker-1")
        token = pod_token(control_plane, namespace, broker_1)
        assert await reviewer(namespace, "demo", token) == broker_principal(1)
        assert await reviewer(namespace, "other", token) is None  # another cluster's broker it is not
        assert await reviewer("elsewhere", "demo", token) is None  # nor a broker of another namespace
        wrong_audience = pod_token(control_plane, namespace, broker_1, audience="vault")
        assert await reviewer(namespace, "demo", wrong_audience) is None
        mallory = pod_token(control_plane, namespace, make_pod(control_plane, namespace, "mallory-0"))
        assert await reviewer(namespace, "demo", mallory) is None  # a pod, but no broker of the cluster
        assert await reviewer(namespace, "demo", token[:-4] + "AAAA") is None  # a forged signature
        status, _ = control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/demo-broker-1"
                                                    "?gracePeriodSeconds=0")
        assert status == 200
        deadline = time.monotonic() + 20  # the API server voids a token bound to a deleted pod
        while await reviewer(namespace, "demo", token) is not None:
            assert time.monotonic() < deadline, "the deleted pod's token still proves broker-1"
            time.sleep(0.2)
    finally:
        await client.close()


SECRET = "cluster-secret"


@contextlib.asynccontextmanager
async def controller_api(control_plane, namespace: str) -> AsyncIterator[tuple[TokenReviewer, str]]:
    """The controller API as the operator serves it (brokers proven by TokenReview against the real API
    server; tokens of SECRET for the admin), no controller behind it: (its reviewer, cluster demo's base URL)."""
    client = KubeClient.from_connection_info(connection(control_plane))
    reviewer = TokenReviewer(lambda: client)
    app = make_clusters_app(lambda _ns, _name: None, secrets=lambda _ns, _name: SECRET, brokers=reviewer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield reviewer, f"http://127.0.0.1:{port}/clusters/{namespace}/demo"
    finally:
        await runner.cleanup()
        await client.close()


async def test_the_controller_api_takes_brokers_only_by_their_pod_token(control_plane, namespace) -> None:
    async with controller_api(control_plane, namespace) as (reviewer, base):
        base += "/v1/metadata"
        token = pod_token(control_plane, namespace, make_pod(control_plane, namespace, "demo-broker-2"))
        async with aiohttp.ClientSession() as http:
            async def status_with(bearer: str) -> int:
                async with http.get(base, headers={"Authorization": f"Bearer {bearer}"}) as reply:
                    return reply.status

            # A broker token the cluster secret made (what every pod once mounted) is no proof any more.
            assert await status_with(token_for(SECRET, broker_principal(2))) == 401
            # The pod's own token is; no controller runs here, so the answer is "not the controller".
            assert await status_with(token) not in (401, 403)
            assert await status_with(token_for(SECRET, ADMIN)) not in (401, 403)  # the operator's own
            assert reviewer.reviews == 1  # the pod token was reviewed once


async def test_a_broker_on_kubernetes_grants_no_rights(control_plane, namespace) -> None:
    """Cluster-admin actions are not a broker's (issue 21, item 6): with pod identities, ACLs and SCRAM
    credentials are the admin's alone (TinyStreamUser resources), even from a proven broker."""
    async with controller_api(control_plane, namespace) as (_, base):
        token = pod_token(control_plane, namespace, make_pod(control_plane, namespace, "demo-broker-0"))
        allow_all = {"acls": [{"resource_type": "TOPIC", "resource_name": "*", "pattern_type": "LITERAL",
                               "principal": "User:mallory", "host": "*", "operation": "ALL",
                               "permission": "ALLOW"}]}
        async with aiohttp.ClientSession() as http:
            for path, body in (("/v1/acls", allow_all), ("/v1/acls/delete", {"filters": []}),
                               ("/v1/scram-credentials", {"upsertions": [], "deletions": []})):
                async with http.post(base + path, json=body, headers={"Authorization": f"Bearer {token}"}) as r:
                    assert r.status == 403, (path, r.status, await r.text())
                    assert "TinyStreamUser" in (await r.json())["message"]
            async with http.post(base + "/v1/acls", json=allow_all,
                                 headers={"Authorization": f"Bearer {token_for(SECRET, ADMIN)}"}) as r:
                assert r.status not in (401, 403)  # the operator's own (no controller runs here: not 2xx)


async def test_an_old_pod_mid_upgrade_keeps_its_old_token_until_it_is_replaced(control_plane, namespace) -> None:
    """Upgrading: pods of the old template hold a token the cluster secret made; they keep heartbeating
    until the operator's roll replaces each, and a replaced pod's old token proves nothing."""
    client = KubeClient.from_connection_info(connection(control_plane))
    reviewer = TokenReviewer(lambda: client)
    try:
        make_pod(control_plane, namespace, "demo-broker-0")  # an old template: no projected controller token
        status, new = control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "demo-broker-1"},
            "spec": {"automountServiceAccountToken": False, "containers": [{"name": "broker", "image": "x"}],
                     "volumes": [{"name": "controller-identity", "projected": {"sources": [
                         {"serviceAccountToken": {"audience": AUDIENCE, "path": "controller-token"}}]}}]}})
        assert status == 201, new
        assert await reviewer.legacy(namespace, "demo", 0) is True
        assert await reviewer.legacy(namespace, "demo", 1) is False  # replaced: its pod token only
        assert await reviewer.legacy(namespace, "demo", 2) is False  # no such pod
        reads = reviewer.pod_reads
        assert await reviewer.legacy(namespace, "demo", 0) is True  # an old pod's heartbeats: answered from memory
        assert reviewer.pod_reads == reads == 3
        # Made-up tokens never reach the API server: not JWT-shaped, or claims that cannot be ours.
        assert await reviewer(namespace, "demo", "broker-1.forged") is None
        assert await reviewer(namespace, "demo", "eyJhbGciOiJub25lIn0.eyJhdWQiOiJ2YXVsdCJ9.c2ln") is None
        assert reviewer.reviews == 0
    finally:
        await client.close()


async def test_a_node_pool_pod_proves_its_pool_id_and_an_unlisted_pod_nothing(control_plane, namespace) -> None:
    """A pool pod's id is not its ordinal (node_pools.py): demo-fast-1 is broker 7 as the pool's status.nodeIds
    says; a pod of the pool's name pattern that no pool lists proves no broker."""
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=30s",
                          "crd/tinystreamnodepools.tinystream.io")
    group = f"/apis/tinystream.io/v1alpha1/namespaces/{namespace}/tinystreamnodepools"
    status, made = control_plane.request("POST", group, {
        "apiVersion": "tinystream.io/v1alpha1", "kind": "TinyStreamNodePool",
        "metadata": {"name": "fast", "labels": {"tinystream.io/cluster": "demo"}}, "spec": {"replicas": 2}})
    assert status == 201, made
    status, made = control_plane.request("PATCH", f"{group}/fast/status", {"status": {"nodeIds": [4, 7]}},
                                         content_type="application/merge-patch+json")
    assert status == 200, made
    client = KubeClient.from_connection_info(connection(control_plane))
    reviewer = TokenReviewer(lambda: client, cache_s=0)
    try:
        token = pod_token(control_plane, namespace, make_pod(control_plane, namespace, "demo-fast-1"))
        assert await reviewer(namespace, "demo", token) == broker_principal(7)
        assert await reviewer(namespace, "other", token) is None
        stray = pod_token(control_plane, namespace, make_pod(control_plane, namespace, "demo-fast-2"))
        assert await reviewer(namespace, "demo", stray) is None  # the pool has no third id
    finally:
        await client.close()
