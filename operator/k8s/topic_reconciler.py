"""One pass over a Topic: observe -> validate (pure) -> apply -> report; and its deletion.

- observe: the cluster (its broker count) and the topic as the controller
  core has it.
- validate: topics.validate_topic, pure; the first problem is the Ready reason.
- apply: topics.plan_topic through the controller port; the partitions'
  placement goes to status, with Ready=False while an ISR is incomplete.
- report: an Event per change of the Ready reason (Warning when not ready).
- delete: the topic's data is removed; the finalizer is released whenever
  that cannot be done any more (the cluster is gone, or the controller is
  unavailable after TOPIC_DELETE_TRIES tries).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import kopf

from tinystream.operator.k8s.caches import ReportedReasons
from tinystream.operator.k8s.conditions import Condition, TopicReason, merge_condition, ready, refusal_reason
from tinystream.operator.k8s.controller_port import ClusterKey, ControllerRefused, ControllerUnavailable
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, ClusterSpec, TopicSpec
from tinystream.operator.k8s.topics import TopicView, plan_topic, validate_topic

TOPIC_DELETE_TRIES = 3


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

    async def reconcile(self, body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> None:
        spec = TopicSpec.from_resource(body)
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
        brokers = ClusterSpec.from_resource(cluster).brokers
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
        patch.status["partitions"] = [
            {"partition": p.partition, "leader": p.leader, "leaderEpoch": p.leader_epoch,
             "replicas": list(p.replicas), "isr": list(p.isr)} for p in sorted(partitions, key=lambda p: p.partition)]
        under = [p for p in partitions if p.under_replicated]
        if under:
            return ready(False, TopicReason.UNDER_REPLICATED,
                         f"{len(under)} of {len(partitions)} partitions have an incomplete ISR",
                         generation=spec.generation)
        return ready(True, TopicReason.READY,
                     f"{len(partitions)} partitions, replication factor {spec.replication_factor}",
                     generation=spec.generation)

    def report(self, spec: TopicSpec, condition: Condition, body: Any, status: Any, patch: kopf.Patch) -> None:
        previous = (status or {}).get("conditions") or []
        if self.reported.changed(body, status, condition.reason):  # an Event per state change: Warning when not ready
            event = kopf.warn if condition.status is False else kopf.info
            event(body, reason=condition.reason, message=condition.message)
        patch.status["conditions"] = merge_condition(previous, condition)
        patch.status["observedGeneration"] = spec.generation

    async def delete(self, body: Any, status: Any, retry: int, logger: logging.Logger) -> None:
        self.reported.forget((body.get("metadata") or {}).get("uid") or "")
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
