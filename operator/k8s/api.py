"""The one module that talks to the Kubernetes API (besides kopf itself).

A small async client over aiohttp for the few kinds the operator touches.
Credentials come from the same kopf login functions that kopf uses
(service account in a pod, kubeconfig elsewhere), as a kopf ConnectionInfo.

Create-or-patch is server-side apply (`PATCH` with
`application/apply-patch+yaml`, field manager `tinystream-operator`,
force): one idempotent call that creates the object or updates the fields
the operator owns, and drops fields it stopped setting. A server that
answers 404 to it (API mocks without apply support) gets a `POST` instead.

Errors from the server are translated to errors.KubeApiError subclasses.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from tinystream.operator.k8s.errors import NotFound, api_error
from tinystream.operator.k8s.model import (
    API_VERSION,
    CLUSTER_KIND,
    CLUSTER_PLURAL,
    POOL_KIND,
    POOL_PLURAL,
    SCHEMA_KIND,
    SCHEMA_PLURAL,
    TOPIC_KIND,
    TOPIC_PLURAL,
    USER_KIND,
    USER_PLURAL,
)

FIELD_MANAGER = "tinystream-operator"
USER_AGENT = "tinystream-operator"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"  # RFC 6902: its `test` op makes a write conditional


@dataclass(frozen=True, slots=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
        return base


KINDS: dict[tuple[str, str], Kind] = {(k.api_version, k.kind): k for k in [
    Kind("v1", "ConfigMap", "configmaps"),
    Kind("v1", "Secret", "secrets"),
    Kind("v1", "Service", "services"),
    Kind("v1", "Pod", "pods"),
    Kind("v1", "Node", "nodes", namespaced=False),
    Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    Kind("v1", "ServiceAccount", "serviceaccounts"),
    Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    Kind("storage.k8s.io/v1", "StorageClass", "storageclasses", namespaced=False),
    Kind("apps/v1", "StatefulSet", "statefulsets"),
    Kind("apps/v1", "Deployment", "deployments"),  # the registry of earlier releases, deleted (schema_registry.py)
    Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
    Kind(API_VERSION, CLUSTER_KIND, CLUSTER_PLURAL),
    Kind(API_VERSION, TOPIC_KIND, TOPIC_PLURAL),
    Kind(API_VERSION, SCHEMA_KIND, SCHEMA_PLURAL),
    Kind(API_VERSION, POOL_KIND, POOL_PLURAL),  # node_pools.py
    Kind(API_VERSION, USER_KIND, USER_PLURAL),  # listed while the clients CA rotates (who is re-issued)
    Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False),
    Kind("authentication.k8s.io/v1", "TokenReview", "tokenreviews", namespaced=False),
]}


def kind_of(api_version: str, kind: str) -> Kind:
    try:
        return KINDS[(api_version, kind)]
    except KeyError:
        raise ValueError(f"the operator does not manage {kind} ({api_version})") from None


def _ssl_context(info: Any) -> ssl.SSLContext | bool:
    if getattr(info, "insecure", False):
        return False
    if not str(info.server).startswith("https"):
        return True
    ctx = ssl.create_default_context()
    if info.ca_path:
        ctx.load_verify_locations(cafile=info.ca_path)
    elif info.ca_data:
        ctx.load_verify_locations(cadata=_pem(info.ca_data).decode())
    cert, key = info.certificate_path, info.private_key_path
    if info.certificate_data or info.private_key_data:
        # ssl wants files; kubeconfig inlines them base64-encoded.
        with tempfile.NamedTemporaryFile("wb", delete=False) as cf, tempfile.NamedTemporaryFile("wb", delete=False) as kf:
            cf.write(_pem(info.certificate_data or b""))
            kf.write(_pem(info.private_key_data or b""))
        cert, key = cf.name, kf.name
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def _pem(data: str | bytes) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return raw if raw.lstrip().startswith(b"-----") else base64.b64decode(raw)


class KubeClient:
    """Typed calls for the operator's kinds; one aiohttp session."""

    def __init__(self, server: str, *, headers: Mapping[str, str] | None = None,
                 ssl_context: ssl.SSLContext | bool = True) -> None:
        self.server = server.rstrip("/")
        self._headers = dict(headers or {})
        self._ssl = ssl_context
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_connection_info(cls, info: Any) -> KubeClient:
        """From a kopf ConnectionInfo (what kopf's login functions return)."""
        return cls(info.server, headers=info.as_http_headers(), ssl_context=_ssl_context(info))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _request(self, method: str, path: str, *, body: Any = None, params: Mapping[str, str] | None = None,
                       content_type: str = "application/json") -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(headers={"User-Agent": USER_AGENT, **self._headers},
                                                  timeout=aiohttp.ClientTimeout(total=30))
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        try:
            async with self._session.request(method, self.server + path, data=data, params=params,
                                             headers=headers, ssl=self._ssl) as resp:
                text = await resp.text()
                payload = json.loads(text) if text else None
                if resp.status >= 400:
                    status = payload if isinstance(payload, dict) else {}
                    raise api_error(resp.status, str(status.get("reason") or resp.reason),
                                    str(status.get("message") or text[:200]), method=method, path=path)
                return payload
        except aiohttp.ClientError as exc:
            raise api_error(0, "ConnectionError", str(exc), method=method, path=path) from exc

    # --- reads ---

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None
                  ) -> dict[str, Any] | None:
        try:
            return await self._request("GET", kind_of(api_version, kind).path(namespace, name))
        except NotFound:
            return None

    async def list(self, api_version: str, kind: str, namespace: str | None = None, *,
                   labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())} if labels else None
        result = await self._request("GET", kind_of(api_version, kind).path(namespace), params=params)
        items = (result or {}).get("items") or []
        if labels:  # also filter here: not every server (or mock) honours labelSelector
            items = [i for i in items if labels.items() <= ((i.get("metadata") or {}).get("labels") or {}).items()]
        return items

    # --- writes ---

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        kind = kind_of(obj["apiVersion"], obj["kind"])
        return await self._request("POST", kind.path((obj.get("metadata") or {}).get("namespace")), body=obj)

    async def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create or update (server-side apply) the fields of `obj`."""
        meta = obj["metadata"]
        kind = kind_of(obj["apiVersion"], obj["kind"])
        try:
            return await self._request("PATCH", kind.path(meta.get("namespace"), meta["name"]), body=obj,
                                       params={"fieldManager": FIELD_MANAGER, "force": "true"},
                                       content_type=APPLY)
        except NotFound:
            return await self.create(obj)

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None, patch: Any,
                    *, subresource: str | None = None, json_patch: bool = False) -> dict[str, Any]:
        """A merge patch (a mapping), or with `json_patch` an RFC 6902 list of operations (all or none apply)."""
        path = kind_of(api_version, kind).path(namespace, name, subresource)
        return await self._request("PATCH", path, body=patch, content_type=JSON_PATCH if json_patch else MERGE)

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None, *,
                     propagation: str | None = None) -> bool:
        """True when deleted (or deletion started), False when already gone.

        `propagation`: the DeleteOptions propagationPolicy (Orphan keeps the dependents).
        """
        body = None if propagation is None else {"apiVersion": "v1", "kind": "DeleteOptions",
                                                 "propagationPolicy": propagation}
        try:
            await self._request("DELETE", kind_of(api_version, kind).path(namespace, name), body=body)
        except NotFound:
            return False
        return True
