"""Prometheus metrics of the operator, served at GET /metrics on its controller port.

One registry per operator (`OperatorMetrics`) holds:

* reconcile counts, errors and durations per kopf handler, recorded by the
  `instrument` wrapper that each *_handlers.py puts under its kopf decorators, so
  the handlers themselves stay free of metrics code;
* the controller series of every TinyStreamCluster the operator runs
  (tinystream.operator.service.metrics), labelled `namespace` and `cluster`,
  and the controller API's per-request series (`controller`, a
  ControllerMetrics on the same registry, given to OperatorController).

An error is whatever the handler raised; kopf then retries it (TemporaryError
with its delay, other exceptions with kopf's backoff) or gives up
(PermanentError). The `error` label is the exception's class name: a small,
fixed set, unlike messages.

Names and meanings: operator/dashboard/METRICS.md ("Operator").
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from tinystream.operator.service.metrics import ControllerMetrics

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class OperatorMetrics:
    """The operator's registry; see the module docstring."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.reconciles = Counter(
            "tinystream_operator_reconciles", "Handler invocations (reconcile passes), by handler",
            ["handler"], registry=self.registry,
        )
        self.errors = Counter(
            "tinystream_operator_reconcile_errors", "Handler invocations that raised, by handler and exception class",
            ["handler", "error"], registry=self.registry,
        )
        self.duration = Histogram(
            "tinystream_operator_reconcile_duration_seconds", "Time spent in a handler, by handler",
            ["handler"], buckets=RECONCILE_BUCKETS, registry=self.registry,
        )
        self.controller = ControllerMetrics(self.registry)

    def observe(self, handler: str, seconds: float, error: BaseException | None = None) -> None:
        self.reconciles.labels(handler).inc()
        self.duration.labels(handler).observe(seconds)
        if error is not None:
            self.errors.labels(handler, type(error).__name__).inc()

    def instrument(self, handler: str) -> Callable[[F], F]:
        """Count, time and classify every call of an async kopf handler (signature kept for kopf)."""

        def decorate(fn: F) -> F:
            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    result = await fn(*args, **kwargs)
                except Exception as exc:
                    self.observe(handler, time.perf_counter() - start, exc)
                    raise
                self.observe(handler, time.perf_counter() - start)
                return result

            return wrapper  # type: ignore[return-value]

        return decorate

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
