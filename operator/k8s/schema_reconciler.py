"""One pass over a TinyStreamSchema: cluster -> registry calls (schemas.py, pure) -> report; and its deletion.

The operator calls its cluster's registry (spec.schemaRegistry) over HTTP as
its own login (schema_registry.OPERATOR_LOGIN, a derived password in the
registry's users file). A refusal the user must fix (409, 422) is reported
and not retried until the spec changes; an unreachable registry is retried.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Sequence
from typing import Any

import aiohttp
import kopf

from tinystream.operator.k8s.conditions import Condition, SchemaReason, merge_condition, ready
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, ClusterSpec, SchemaSpec
from tinystream.operator.k8s.registry_tls import trust_bundle
from tinystream.operator.k8s.schema_registry import OPERATOR_LOGIN, operator_password, registry_url
from tinystream.operator.k8s.schemas import (
    Refusal,
    RegistryCall,
    deletion_calls,
    refusal,
    register_calls,
    registered_status,
)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TIMEOUT_S = 10.0
RETRY_S = 10.0
DELETE_TRIES = 3


class SchemaReconciler:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def cluster_of(self, spec: SchemaSpec) -> ClusterSpec | None:
        body = await self.deps.kube().get(API_VERSION, CLUSTER_KIND, spec.cluster, spec.namespace)
        return None if body is None else ClusterSpec.from_resource(body)

    def _url(self, cluster: ClusterSpec) -> str:
        return (self.deps.registry_url or registry_url)(cluster)

    async def _call(self, cluster: ClusterSpec, spec: SchemaSpec,
                    calls: Sequence[RegistryCall]) -> tuple[Any, Refusal | None]:
        """Make `calls` in order; the last answer, or the refusal that stopped them."""
        master = self.deps.master_secret or ""
        login = aiohttp.encode_basic_auth(OPERATOR_LOGIN, operator_password(master, cluster))
        answer: Any = None
        tls: ssl.SSLContext | bool = True
        if self._url(cluster).startswith("https://"):  # the registry's certificate is from the cluster CA
            bundle = await trust_bundle(self.deps.kube(), master, cluster, now=self.deps.clock())
            if bundle is None:
                return None, refusal(spec, calls[0].step, None, "the cluster CA cannot be used now")
            tls = ssl.create_default_context(cadata=bundle)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
                                         headers={"Accept": CONTENT_TYPE, "Authorization": login},
                                         connector=aiohttp.TCPConnector(ssl=tls)) as session:
            for call in calls:
                try:
                    async with session.request(call.method, self._url(cluster) + call.path, json=call.body,
                                               headers={"Content-Type": CONTENT_TYPE}) as response:
                        status = response.status
                        answer = await response.json(content_type=None)
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    status, answer = None, str(exc)
                stop = refusal(spec, call.step, status, answer)
                if stop is not None:
                    return answer, stop
        return answer, None

    async def reconcile(self, body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> None:
        spec = SchemaSpec.from_resource(body)
        cluster = await self.cluster_of(spec)
        if cluster is None or cluster.schema_registry is None:
            reason, message = ((SchemaReason.CLUSTER_NOT_FOUND, f"no TinyStreamCluster {spec.cluster}")
                               if cluster is None else
                               (SchemaReason.REGISTRY_NOT_DEPLOYED, f"cluster {spec.cluster} has no spec.schemaRegistry"))
            self._report(body, status, patch, ready(False, reason, message, generation=spec.generation))
            raise kopf.TemporaryError(message, delay=30)
        answer, stop = await self._call(cluster, spec, register_calls(spec))
        if stop is not None:
            self._report(body, status, patch, stop.condition)
            if stop.retry:
                raise kopf.TemporaryError(stop.condition.message, delay=RETRY_S)
            return
        fields, condition = registered_status(spec, answer)
        for key, value in fields.items():
            patch.status[key] = value
        self._report(body, status, patch, condition)
        logger.info("%s", condition.message)

    def _report(self, body: Any, status: Any, patch: kopf.Patch, condition: Condition) -> None:
        previous = next((c for c in (status or {}).get("conditions") or () if c.get("type") == "Ready"), {})
        if previous.get("reason") != condition.reason or previous.get("message") != condition.message:
            (kopf.info if condition.status else kopf.warn)(body, reason=condition.reason, message=condition.message)
        patch.status["conditions"] = merge_condition((status or {}).get("conditions") or [], condition)

    async def remove(self, body: Any, retry: int, logger: logging.Logger) -> None:
        """spec.deletionPolicy: Keep does nothing; Delete soft-deletes the subject, given up after DELETE_TRIES."""
        spec = SchemaSpec.from_resource(body)
        calls = deletion_calls(spec)
        cluster = await self.cluster_of(spec) if calls else None
        if cluster is None or cluster.schema_registry is None:
            return  # Keep, or no registry left to delete from
        _, stop = await self._call(cluster, spec, calls)
        if stop is None or (stop.condition.message.find("40401") >= 0):  # done, or the subject is gone already
            logger.info("subject %s soft-deleted", spec.subject)
            return
        if retry + 1 >= DELETE_TRIES:
            kopf.warn(body, reason="SubjectKept", message=f"gave up deleting {spec.subject}: {stop.condition.message}")
            return
        raise kopf.TemporaryError(stop.condition.message, delay=RETRY_S)


