"""Which broker calls the controller API, on Kubernetes: the pod's own service-account token.

A broker pod mounts one projected service-account token (audience `tinystream-controller`, an hour's
life, rotated by the kubelet before it expires; resources.py) and nothing else of the controller's: no
pod holds another pod's identity, and no token outlives its pod (the API server voids a token bound to a
deleted pod). The operator asks the API server who a token is (TokenReview, with our audience only) and
believes the pod name the server binds into it:

    user system:serviceaccount:<namespace>:<any>, extra authentication.kubernetes.io/pod-name
    = [<cluster>-broker-<n>]                       ->  principal broker-<n> of that cluster

Anything else (another namespace, another pod, another audience, a token the server does not know) is
no broker. `review_principal` is that rule, pure; `TokenReviewer` asks the server and remembers each
answer for CACHE_S, so a broker's heartbeats cost one review per half minute, not one per call; a token
whose unverified claims cannot be ours (`plausible`) costs no review. During an upgrade's roll, a pod
still on the old template may use its old secret-made token (`TokenReviewer.legacy`) until it is replaced.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from tinystream.controller_auth import broker_principal
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.errors import KubeApiError
from tinystream.operator.k8s.model import API_VERSION, POOL_KIND
from tinystream.operator.k8s.node_pools import CLUSTER_LABEL, pool_pod_ids
from tinystream.operator.k8s.resources import IDENTITY_AUDIENCE

log = logging.getLogger(__name__)

AUDIENCE = IDENTITY_AUDIENCE
POD_NAME = "authentication.kubernetes.io/pod-name"
CACHE_S = 30.0
CACHE_ENTRIES = 4096  # answers remembered at most (the oldest go first)
#: How long `legacy` trusts what it read of a pod: a replaced pod's old token is refused this much later at most.
LEGACY_CACHE_S = 10.0
_JWT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


def review_pod(status: Mapping[str, Any], *, namespace: str) -> str | None:
    """The pod a TokenReview's status proves (our audience, a service account of `namespace`), or None."""
    if not status.get("authenticated") or AUDIENCE not in (status.get("audiences") or ()):
        return None
    user = status.get("user") or {}
    if not str(user.get("username") or "").startswith(f"system:serviceaccount:{namespace}:"):
        return None
    pods = (user.get("extra") or {}).get(POD_NAME) or []
    return str(pods[0]) if len(pods) == 1 else None


def review_principal(status: Mapping[str, Any], *, namespace: str, cluster: str,
                     pool_pods: Mapping[str, int] | None = None) -> str | None:
    """The broker principal a TokenReview's status proves for `cluster`, or None. `pool_pods`: the pods of
    the cluster's node pools and their broker ids (node_pools.pool_pod_ids), whose ids are not ordinals."""
    pod = review_pod(status, namespace=namespace)
    if pod is None:
        return None
    if pool_pods and pod in pool_pods:
        return broker_principal(pool_pods[pod])
    found = re.fullmatch(rf"{re.escape(cluster)}-broker-(0|[1-9]\d*)", pod)
    return broker_principal(int(found.group(1))) if found else None


def plausible(token: str, *, namespace: str, now: float) -> bool:
    """A cheap look at a JWT's claims before the API server is asked (the server still checks everything):
    our audience, not expired, a service account of the cluster's namespace. A caller sending made-up
    tokens costs no TokenReview this way."""
    if not _JWT.fullmatch(token):
        return False
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, UnicodeDecodeError):
        return False
    if not isinstance(claims, dict):
        return False
    audiences = claims.get("aud")
    audiences = [audiences] if isinstance(audiences, str) else audiences or []
    return (AUDIENCE in audiences and isinstance(claims.get("exp"), int) and claims["exp"] > now
            and str(claims.get("sub") or "").startswith(f"system:serviceaccount:{namespace}:"))


def token_review(token: str) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token, "audiences": [AUDIENCE]}}


class TokenReviewer:
    """`await reviewer(namespace, cluster, token)` -> the broker principal, or None; see the module docstring."""

    def __init__(self, client: Callable[[], KubeClient | None], *, clock: Callable[[], float] = time.monotonic,
                 cache_s: float = CACHE_S) -> None:
        self._client = client
        self._clock = clock
        self._cache_s = cache_s
        self._answers: OrderedDict[str, tuple[float, str | None]] = OrderedDict()  # key -> (until, principal)
        self.reviews = 0  # TokenReviews asked (tests and metrics)
        self._legacy: dict[tuple[str, str, int], tuple[float, bool]] = {}  # -> (until, answer)
        self.pod_reads = 0  # pods read by `legacy` (tests)

    async def __call__(self, namespace: str, cluster: str, token: str) -> str | None:
        if not plausible(token, namespace=namespace, now=time.time()):
            return None  # not a service-account token for us: not worth a review
        key = hashlib.sha256(f"{namespace}/{cluster}/{token}".encode()).hexdigest()
        now = self._clock()
        cached = self._answers.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        client = self._client()
        if client is None:
            return None
        self.reviews += 1
        try:
            answer = await client.create(token_review(token))
        except (KubeApiError, aiohttp.ClientError, TimeoutError) as exc:  # not an answer: ask again next call
            log.warning("TokenReview failed: %s", exc)
            return None
        principal = review_principal(answer.get("status") or {}, namespace=namespace, cluster=cluster,
                                     pool_pods=await self._pool_pods(client, answer, namespace, cluster))
        self._answers[key] = (now + self._cache_s, principal)
        self._answers.move_to_end(key)
        while len(self._answers) > CACHE_ENTRIES:
            self._answers.popitem(last=False)
        return principal

    async def _pool_pods(self, client: KubeClient, answer: Mapping[str, Any], namespace: str,
                         cluster: str) -> dict[str, int]:
        """The cluster's pool pods and their ids, read only for a proven pod that is not <cluster>-broker-<n>."""
        pod = review_pod(answer.get("status") or {}, namespace=namespace)
        if pod is None or not pod.startswith(f"{cluster}-") or pod.startswith(f"{cluster}-broker-"):
            return {}
        try:
            pools = await client.list(API_VERSION, POOL_KIND, namespace, labels={CLUSTER_LABEL: cluster})
        except (KubeApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("listing node pools failed: %s", exc)
            return {}
        return pool_pod_ids(cluster, pools)

    async def legacy(self, namespace: str, cluster: str, broker_id: int) -> bool:
        """Whether broker <id> may still use a token the cluster secret made: only while its pod runs a
        template from before pod identities (no projected controller token), i.e. during the roll of an
        upgrade, so that old pods keep heartbeating until the operator replaces them one by one. Once the
        pod is replaced, its old token proves nothing (and no Secret holds one any more)."""
        key, now = (namespace, cluster, broker_id), self._clock()
        cached = self._legacy.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]  # an old pod heartbeats every few seconds: one pod read per LEGACY_CACHE_S
        client = self._client()
        if client is None:
            return False
        self.pod_reads += 1
        try:
            pod = await client.get("v1", "Pod", f"{cluster}-broker-{broker_id}", namespace)
        except (KubeApiError, aiohttp.ClientError, TimeoutError):
            return False
        volumes = ((pod or {}).get("spec") or {}).get("volumes") or []
        answer = pod is not None and not any(
            (source.get("serviceAccountToken") or {}).get("audience") == AUDIENCE
            for v in volumes for source in (v.get("projected") or {}).get("sources") or ())
        self._legacy[key] = (now + LEGACY_CACHE_S, answer)  # keys: broker ids of tokens the secret made
        return answer
