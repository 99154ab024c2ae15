"""One pass over a Topic: observe -> validate (pure) -> apply -> report; and its deletion.

- observe: the cluster (its broker count) and the topic as the controller
  core has it.
- validate: topics.validate_topic, pure; the first problem is the Ready reason.
- apply: topics.plan_topic through the controller port; the partitions'
  placement goes to status, with Ready=False while an ISR is incomplete or
  a replication-factor change moves replicas (topics.placement_condition).
- refresh placement (the timer's ticks between full passes): leaders and
  ISR in status follow the controller's changes within seconds (a failover),
  written only when they changed.
- report: an Event per change of the Ready reason (Warning when not ready).
- delete: the topic's data is removed; the finalizer is released whenever
  that cannot be done any more (the cluster is gone, or the controller is
  unavailable after TOPIC_DELETE_TRIES tries).
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from typing import Any

import kopf

from tinystream.operator.k8s.caches import ReportedReasons
from tinystream.operator.k8s.conditions import Condition, TopicReason, merge_condition, ready, refusal_reason
from tinystream.operator.k8s.controller_port import ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, POOL_KIND, ClusterSpec, TopicSpec
from tinystream.operator.k8s.node_pools import CLUSTER_LABEL, pool_brokers
from tinystream.operator.k8s.topics import TopicView, partition_rows, placement_condition, plan_topic, validate_topic

TOPIC_DELETE_TRIES = 3
# The Ready reasons placement_condition gives: the ones refresh_placement may replace.
PLACEMENT_REASONS = frozenset({TopicReason.READY.value, TopicReason.UNDER_REPLICATED.value,
                               TopicReason.REPLICATION_FACTOR_CHANGING.value})


@dataclass(frozen=True, slots=True)
class TopicObserved:
    cluster_brokers: int | None  # None: no such cluster
    existing: TopicView | None = None
    unavailable: str | None = None  # why the controller could not be asked


class TopicReconciler:
    """The I/O around validate_topic and plan_topic for every Topic of one registry."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.reported = ReportedReasons()
        self.last_full: dict[str, datetime.datetime] = {}  # by uid: when the last full pass ran

    async def tick(self, body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> None:
        """The timer: the full pass once deps.health_interval_s has gone by since the last one, else the
        placement refresh."""
        uid = (body.get("metadata") or {}).get("uid") or ""
        last = self.last_full.get(uid)
        if last is None or (self.deps.clock() - last).total_seconds() >= self.deps.health_interval_s:
            await self.reconcile(body, status, patch, logger)
        else:
            await self.refresh_placement(body, status, patch)

    async def reconcile(self, body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> None:
        spec = TopicSpec.from_resource(body)
        self.last_full[spec.uid] = self.deps.clock()
        observed = await self.observe(spec)
        problems = validate_topic(spec, cluster_brokers=observed.cluster_brokers, existing=observed.existing,
                                  created_name=(status or {}).get("topicName"))
        if problems:
            condition = ready(False, problems[0].reason, "; ".join(p.message for p in problems),
                              generation=spec.generation)
        elif observed.unavailable:
            condition = ready(False, TopicReason.CONTROLLER_UNAVAILABLE, observed.unavailable,
                              generation=spec.generation)
        else:
            condition = await self.apply(spec, observed.existing, patch)
        self.report(spec, condition, body, status, patch)

    async def observe(self, spec: TopicSpec) -> TopicObserved:
        cluster = await self.deps.kube().get(API_VERSION, CLUSTER_KIND, spec.cluster, spec.namespace)
        if cluster is None:
            return TopicObserved(None)
        cluster_spec = ClusterSpec.from_resource(cluster)
        brokers = cluster_spec.brokers
        if cluster_spec.node_pools:  # the brokers are the pools' (node_pools.py): spec.brokers counts none
            pools = await self.deps.kube().list(API_VERSION, POOL_KIND, spec.namespace,
                                                labels={CLUSTER_LABEL: spec.cluster})
            brokers = pool_brokers(pools, spec.cluster)
        try:
            existing = await self.deps.controller.topic(ClusterKey(spec.namespace, spec.cluster), spec.topic_name)
        except ControllerUnavailable as exc:
            return TopicObserved(brokers, unavailable=str(exc))
        return TopicObserved(brokers, existing)

    async def apply(self, spec: TopicSpec, existing: TopicView | None, patch: kopf.Patch) -> Condition:
        key = ClusterKey(spec.namespace, spec.cluster)
        try:
            await self.deps.controller.apply_topic(key, plan_topic(spec, existing))
            partitions = [p for p in await self.deps.controller.partitions(key) or () if p.topic == spec.topic_name]
        except ControllerUnavailable as exc:
            return ready(False, TopicReason.CONTROLLER_UNAVAILABLE, str(exc), generation=spec.generation)
        except ControllerRefused as exc:
            return ready(False, refusal_reason(exc.error), str(exc), generation=spec.generation)
        patch.status["topicName"] = spec.topic_name
        patch.status["partitions"] = partition_rows(partitions)
        return placement_condition(spec, partitions)

    async def refresh_placement(self, body: Any, status: Any, patch: kopf.Patch) -> None:
        """Leaders, ISR and moving replicas in status as the controller has them now, and the Ready they imply;
        nothing is written when they are as status says. Only over a status the last full pass wrote for this
        generation with the placement's own reasons: a spec problem or a refusal stays until that pass."""
        spec = TopicSpec.from_resource(body)
        status = status or {}
        reason = next((c.get("reason") for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
        if status.get("observedGeneration") != spec.generation or reason not in PLACEMENT_REASONS:
            return
        try:
            everything = await self.deps.controller.partitions(ClusterKey(spec.namespace, spec.cluster))
        except ControllerUnavailable:
            return
        partitions = [p for p in everything or () if p.topic == spec.topic_name]
        rows = partition_rows(partitions)
        if not partitions or rows == status.get("partitions"):
            return
        patch.status["partitions"] = rows
        self.report(spec, placement_condition(spec, partitions), body, status, patch)

    def report(self, spec: TopicSpec, condition: Condition, body: Any, status: Any, patch: kopf.Patch) -> None:
        previous = (status or {}).get("conditions") or []
        if self.reported.changed(body, status, condition.reason):  # an Event per state change: Warning when not ready
            event = kopf.warn if condition.status is False else kopf.info
            event(body, reason=condition.reason, message=condition.message)
        patch.status["conditions"] = merge_condition(previous, condition)
        patch.status["observedGeneration"] = spec.generation

    async def delete(self, body: Any, status: Any, retry: int, logger: logging.Logger) -> None:
        self.reported.forget((body.get("metadata") or {}).get("uid") or "")
        self.last_full.pop((body.get("metadata") or {}).get("uid") or "", None)
        spec = TopicSpec.from_resource(body)
        if await self.deps.kube().get(API_VERSION, CLUSTER_KIND, spec.cluster, spec.namespace) is None:
            logger.info("cluster %s is gone; nothing to delete, releasing the topic", spec.cluster)
            return
        name = (status or {}).get("topicName") or spec.topic_name
        try:
            await self.deps.controller.delete_topic(ClusterKey(spec.namespace, spec.cluster), name)
        except ControllerUnavailable as exc:
            if retry + 1 >= TOPIC_DELETE_TRIES:
                # Never block deletion (or the namespace's) on a controller that is not there.
                kopf.warn(body, reason="TopicDataNotDeleted",
                          message=f"released after {TOPIC_DELETE_TRIES} tries; data of {name} may remain: {exc}")
                return
            raise kopf.TemporaryError(f"controller unavailable: {exc}", delay=2) from exc
