"""Clients for the fast tier's tests: a kubectl stand-in and the operator's login, against the real API server."""

from __future__ import annotations

import datetime

import aiohttp
import kopf
from kmock_helpers import Api, path_of

from tinystream.testing.kube_control_plane import ADMIN_TOKEN, KubeControlPlane


class RealApi(Api):
    """kmock_helpers.Api's calls (a kubectl stand-in) against the real API server, as its admin."""

    def __init__(self, control_plane: KubeControlPlane, namespace: str) -> None:  # noqa: D107
        self.url, self.ns = control_plane.url, namespace
        self.session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                                             connector=aiohttp.TCPConnector(ssl=False))

    async def create(self, api_version: str, plural: str, obj: dict) -> None:
        # Unlike KMock, the real server assigns uid and resourceVersion itself (and refuses a preset one).
        obj = {**obj, "metadata": {**obj["metadata"], "namespace": self.ns}}
        async with self.session.post(self.url + path_of(api_version, plural, namespace=self.ns), json=obj) as r:
            assert r.status < 300, await r.text()

    async def mark_pod_ready(self, pod: dict) -> None:
        """What a kubelet would report once the pod's containers run: Running and Ready (no kubelet here).
        A pod already Ready, being deleted or gone is left alone."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (pod.get("status") or {}).get("conditions") or []):
            return
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now}]}}
        async with self.session.patch(self.url + path_of("v1", "pods", meta["name"], self.ns) + "/status",
                                      json=body, headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status < 300 or r.status in (404, 409), await r.text()


def connection(control_plane: KubeControlPlane, token: str = ADMIN_TOKEN) -> kopf.ConnectionInfo:
    """How the operator logs in: a bearer token; the server's certificate is self-signed (loopback)."""
    return kopf.ConnectionInfo(server=control_plane.url, token=token, insecure=True)
