"""The operator's kopf registry: one module of handlers per resource kind, each over a reconciler.

    lifecycle_handlers.py   login, start-up (persistence, CRDs, controller host, dashboard), clean-up
    cluster_handlers.py     TinyStreamCluster -> cluster_reconciler.py (secure, observe, plan, execute, report)
    pod_handlers.py         broker pods: a broker process that is gone ends its session now
    topic_handlers.py       Topic -> topic_reconciler.py (observe, validate, apply, report; delete)
    user_handlers.py        TinyStreamUser -> user_reconciler.py (refusal, Secret, access, report; removal)
    schema_handlers.py      TinyStreamSchema -> schema_reconciler.py (registry REST calls, report; deletion policy)
    rebalance_handlers.py   TinyStreamRebalance -> rebalance_reconciler.py (propose, approve, follow, stop)

Handlers are thin: they call a reconciler, which observes, calls the pure
decision (reconcile.py, topics.py, users.py), executes it through api.py
and the controller port, and writes status and Kubernetes Events. Every
reconciling handler is wrapped by `deps.metrics.instrument(name)`
(metrics.py: count, duration, errors by exception class), under the kopf
decorators, so kopf sees the same name and signature; the handlers' kopf ids
are fixed (handler_ids.py).

Handlers register into a registry made by `make_registry`, so the operator
and the tests each get their own (no import-time globals).
"""

from __future__ import annotations

from typing import Any

import kopf

from tinystream.operator.k8s import (
    cluster_handlers,
    lifecycle_handlers,
    pod_handlers,
    pool_handlers,
    rebalance_handlers,
    schema_handlers,
    topic_handlers,
    user_handlers,
)
from tinystream.operator.k8s.deps import Deps

__all__ = ["Deps", "default_connect", "make_registry"]  # Deps lives in deps.py; callers import it from here too

KINDS = (lifecycle_handlers, cluster_handlers, pod_handlers, topic_handlers, user_handlers, schema_handlers,
         rebalance_handlers, pool_handlers)


def default_connect(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """The pod's service account, else the kubeconfig (kopf's own login functions)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


def make_registry(deps: Deps) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    for kind in KINDS:
        kind.register(registry, deps)
    return registry
