"""kopf handlers for TinyStreamCluster and Topic: observe, decide (pure), act, report.

Each handler is thin: it gathers what is observed (owned objects, broker
pods, the controller's view), calls the pure decision (reconcile.plan_cluster,
topics.validate_topic / plan_topic), executes the actions through api.py and
the controller port, and writes status and Kubernetes Events.

- Cluster: create/update/resume run one reconcile pass; a timer repeats it
  (health: ready brokers, per-broker state, and the next step of a roll or a
  scale), so waiting never blocks a handler. A field handler on spec.brokers
  records the scale request as an Event. Delete is optional (no finalizer):
  the owned objects go with the cluster through their owner references, and
  a namespace deletion is never blocked by the operator.
- Broker pods: an event saying a broker's process is not running (its
  container terminated or crash-looping, the pod deleted) ends the broker's
  session at once (pod_health.py), so leadership moves before the timeout.
- TinyStreamUser: user_handlers.py (credentials, ACLs, removal on delete).
- Topic: create/update/resume validate and apply; a timer refreshes the
  partition state in status. Delete has a finalizer (the data must be
  removed) but releases it whenever the topic cannot be deleted any more:
  the cluster is gone or the controller is unavailable after a few tries.

Every reconciling handler is wrapped by `deps.metrics.instrument(name)`
(metrics.py: count, duration, errors by exception class), under the kopf
decorators, so kopf sees the same name and signature.

Handlers register into a registry made by `make_registry`, so the operator
and the tests each get their own (no import-time globals). Persistence of
kopf's own state uses tinystream.io annotations, not status, so the
structural schemas need no kopf fields.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.cluster_tls import ForeignSecret, SecurityOutcome, ensure_security
from tinystream.operator.k8s.conditions import (
    ClusterReason,
    TopicReason,
    merge_condition,
    ready,
    refusal_reason,
    secure_condition,
)
from tinystream.operator.k8s.controller_port import (
    ClusterKey,
    ControllerRefused,
    ControllerUnavailable,
)
from tinystream.operator.k8s.crds import bundled_crds, upgrade_crds
from tinystream.operator.k8s.deps import Deps
from tinystream.operator.k8s.model import (
    API_VERSION,
    CLUSTER_KIND,
    CLUSTER_PLURAL,
    GROUP,
    TOPIC_PLURAL,
    VERSION,
    ClusterSpec,
    TopicSpec,
)
from tinystream.operator.k8s.pod_health import broker_down, process_gone
from tinystream.operator.k8s.reconcile import (
    Apply,
    BrokerPod,
    ClusterPlan,
    Delete,
    DeletePod,
    DrainBrokers,
    EndRollDrain,
    MoveLeadership,
    Observed,
    Rebalance,
    plan_cluster,
)
from tinystream.operator.k8s.resources import MANAGED_BY, Names, owned_objects, selector_labels
from tinystream.operator.k8s.topics import plan_topic, validate_topic
from tinystream.operator.k8s.user_handlers import register_user_handlers

__all__ = ["Deps", "default_connect", "make_registry"]  # Deps lives in deps.py; callers import it from here too

FINALIZER = "tinystream.io/finalizer"
BROKER_POD_LABELS = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": "broker"}
BROKER_POD_SELECTOR = ",".join(f"{k}={v}" for k, v in BROKER_POD_LABELS.items())
ANNOTATION_PREFIX = "tinystream.io"
TOPIC_DELETE_TRIES = 3


def default_connect(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """The pod's service account, else the kubeconfig (kopf's own login functions)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


def make_registry(deps: Deps) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    clusters = (GROUP, VERSION, CLUSTER_PLURAL)
    topics = (GROUP, VERSION, TOPIC_PLURAL)

    def client() -> KubeClient:
        assert deps.client is not None, "startup handler has not run"
        return deps.client

    # The last Ready reason reported per object (uid): a timer may run on a body older than the
    # status patch just written, which would repeat the Event; status is the fallback after a restart.
    reported: dict[str, str] = {}

    def reason_changed(body: Any, status: Any, reason: str) -> bool:
        uid = (body.get("metadata") or {}).get("uid") or ""
        conditions = (status or {}).get("conditions") or []
        written = next((c.get("reason") for c in conditions if c.get("type") == "Ready"), None)
        before = reported.get(uid, written)
        reported[uid] = reason
        return before != reason

    # --- operator lifecycle ---

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return deps.connect(**kwargs)

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, logger: logging.Logger, **kwargs: Any) -> None:
        settings.persistence.finalizer = FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATION_PREFIX)
        settings.posting.level = logging.INFO
        # Watch broker pods only (server-side), not every pod of the cluster.
        settings.watching.label_selectors["v1", "pods"] = BROKER_POD_SELECTOR
        info = deps.connect(settings=settings, logger=logger)
        if info is None:
            raise kopf.PermanentError("no Kubernetes credentials: no service account and no kubeconfig")
        deps.client = KubeClient.from_connection_info(info)
        if deps.crds_dir is not None:
            await upgrade_crds(deps.client, bundled_crds(deps.crds_dir), logger)
        await deps.controller.start(deps.client)
        if deps.dashboard is not None:
            await deps.dashboard.start(deps.client)  # best effort: a taken port is logged, not fatal

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        try:
            if deps.dashboard is not None:
                await deps.dashboard.stop()  # first: its samplers read the controller API
            await deps.controller.stop()
        finally:
            if deps.client is not None:
                await deps.client.close()

    # --- TinyStreamCluster ---

    async def observe(spec: ClusterSpec) -> Observed:
        names = Names.of(spec)
        objects: dict[tuple[str, str], dict[str, Any]] = {}
        for obj in owned_objects(spec, deps.ctx, replicas=spec.brokers):
            current = await client().get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], spec.namespace)
            if current is not None:
                objects[(obj["kind"], obj["metadata"]["name"])] = current
        if not spec.dashboard:
            dashboard = await client().get("v1", "Service", names.dashboard, spec.namespace)
            if dashboard is not None:
                objects[("Service", names.dashboard)] = dashboard
        pods = await client().list("v1", "Pod", spec.namespace, labels=selector_labels(spec))
        broker_pods = tuple(BrokerPod.from_pod(p) for p in pods
                            if p["metadata"]["name"].startswith(names.statefulset + "-"))
        key = ClusterKey(spec.namespace, spec.name)
        topic_rfs = [int((t.get("spec") or {}).get("replicationFactor", 1))
                     for t in await client().list(API_VERSION, "Topic", spec.namespace)
                     if (t.get("spec") or {}).get("cluster") == spec.name]
        racks: dict[int, str] = {}
        if spec.rack_topology_key:
            for pod in broker_pods:
                node = await client().get("v1", "Node", pod.node) if pod.node else None
                rack = ((node or {}).get("metadata", {}).get("labels") or {}).get(spec.rack_topology_key)
                if rack:
                    racks[pod.ordinal] = rack
        partitions = await deps.controller.partitions(key)  # opens the cluster's controller on first use
        return Observed(objects=objects, pods=broker_pods, partitions=partitions,
                        max_replication_factor=max(topic_rfs, default=0),
                        fenced=await deps.controller.fenced(key), racks=racks,
                        drained_for_roll=await deps.controller.drained_for_roll(key),
                        registered=await deps.controller.registered(key),
                        cluster_id=await deps.controller.cluster_id(key))

    async def execute(spec: ClusterSpec, plan: ClusterPlan, body: Any, logger: logging.Logger) -> None:
        key = ClusterKey(spec.namespace, spec.name)
        broker_actions = []
        for action in plan.actions:
            if isinstance(action, Apply):
                await client().apply(action.obj)
                logger.info("%s %s/%s", "created" if action.create else "updated", *action.key)
            elif isinstance(action, Delete):
                await client().delete(action.api_version, action.kind, action.name, spec.namespace)
            elif isinstance(action, DeletePod):
                kopf.info(body, reason="RollingBroker", message=f"restarting {action.name} for the new revision")
                await client().delete("v1", "Pod", action.name, spec.namespace)
            elif isinstance(action, (MoveLeadership, DrainBrokers, Rebalance, EndRollDrain)):
                broker_actions.append(action)
        if broker_actions:
            try:
                await deps.controller.broker_actions(key, broker_actions)
            except ControllerUnavailable as exc:
                logger.warning("controller actions postponed: %s", exc)
            except ControllerRefused as exc:  # e.g. replicas cannot be placed on the remaining brokers
                kopf.warn(body, reason="BrokerActionRefused", message=str(exc))

    # The certificate each cluster (uid) was last issued here: a timer may run on a body older than the
    # status patch that recorded it, which would issue again.
    issued: dict[str, dict[str, str]] = {}

    async def make_secrets(spec: ClusterSpec, body: Any, status: Any) -> SecurityOutcome:
        if deps.master_secret is None:
            raise kopf.TemporaryError("the operator has no master secret to make certificates and passwords with")
        latest = {**(status or {}), "certificates": issued.get(spec.uid) or (status or {}).get("certificates")}
        outcome = await ensure_security(client(), spec, latest, master=deps.master_secret, ctx=deps.ctx,
                                        now=deps.clock())
        if outcome.certificates is not None:
            issued[spec.uid] = outcome.certificates
        if outcome.issued_because:
            kopf.info(body, reason="CertificateIssued",
                      message=f"broker certificate {outcome.certificates and outcome.certificates['serial']}: "
                              f"{outcome.issued_because}")
        return outcome

    async def reconcile_cluster(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> ClusterPlan:
        spec = ClusterSpec.from_resource(body)
        try:
            security = await make_secrets(spec, body, status)
        except ForeignSecret as exc:  # never mount (or write into) a Secret that is not the cluster's
            condition = ready(False, ClusterReason.SECRET_NOT_OWNED, str(exc), generation=spec.generation)
            if reason_changed(body, status, condition.reason):
                kopf.warn(body, reason=condition.reason, message=condition.message)
            patch.status["conditions"] = merge_condition((status or {}).get("conditions") or [], condition)
            raise kopf.TemporaryError(str(exc), delay=30) from exc
        if security.certificates is not None:
            patch.status["certificates"] = security.certificates
        plan = plan_cluster(spec, status, await observe(spec), ctx=deps.ctx)
        await execute(spec, plan, body, logger)
        previous = (status or {}).get("conditions") or []
        if reason_changed(body, status, plan.condition.reason):
            event = kopf.info if plan.condition.status else kopf.warn
            if plan.condition.status is not False or plan.phase.value != "Creating":
                event(body, reason=plan.condition.reason, message=plan.condition.message)
        for k, v in plan.status.items():
            patch.status[k] = v
        conditions = merge_condition(previous, plan.condition)
        patch.status["conditions"] = merge_condition(conditions, secure_condition(spec.insecure, generation=spec.generation))
        return plan

    @kopf.on.create(*clusters, registry=registry)
    @kopf.on.update(*clusters, registry=registry)
    @kopf.on.resume(*clusters, registry=registry)
    @deps.metrics.instrument("cluster_changed")
    async def cluster_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconcile_cluster(body, status, patch, logger)

    @kopf.on.field(*clusters, field="spec.brokers", registry=registry)
    def brokers_changed(old: Any, new: Any, body: Any, **_: Any) -> None:
        if old is not None and new is not None and old != new:
            kopf.info(body, reason="ScaleRequested", message=f"brokers {old} -> {new}")

    @kopf.timer(*clusters, interval=deps.health_interval_s, initial_delay=deps.health_interval_s,
                registry=registry)
    @deps.metrics.instrument("cluster_health")
    async def cluster_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconcile_cluster(body, status, patch, logger)

    @kopf.on.delete(*clusters, optional=True, registry=registry)
    @deps.metrics.instrument("cluster_deleted")
    async def cluster_deleted(name: str, namespace: str, body: Any, logger: logging.Logger, **_: Any) -> None:
        reported.pop((body.get("metadata") or {}).get("uid") or "", None)
        issued.pop((body.get("metadata") or {}).get("uid") or "", None)
        await deps.controller.forget(ClusterKey(namespace, name))
        logger.info("cluster deleted; its objects go with it (owner references)")

    # --- broker pods ---

    @kopf.on.event("v1", "pods", labels=BROKER_POD_LABELS, registry=registry)
    @deps.metrics.instrument("broker_pod_event")
    async def broker_pod_event(event: Any, body: Any, namespace: str, logger: logging.Logger, **_: Any) -> None:
        """A broker process that is certainly not running ends its session now, not at the timeout."""
        down = broker_down(body, deleted=event.get("type") == "DELETED")
        cluster = ((body.get("metadata") or {}).get("labels") or {}).get("tinystream.io/cluster")
        if down is None or not cluster:
            return
        key = ClusterKey(namespace, cluster)
        if down.broker_id in await deps.controller.fenced(key):
            return  # already out: nothing to do, nothing to repeat
        if not process_gone(await client().get("v1", "Pod", body["metadata"]["name"], namespace)):
            return  # handled late: a new process runs now and may have registered; leave its session alone
        try:
            await deps.controller.broker_actions(key, [down])
        except (ControllerUnavailable, ControllerRefused) as exc:
            logger.info("broker %d down, session not ended early (%s); the session timeout will", down.broker_id, exc)
            return
        if event.get("type") != "DELETED":
            kopf.warn(body, reason="BrokerDown", message=f"{down.reason}: its session ended, leadership moves now")

    # --- Topic ---

    async def reconcile_topic(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger) -> None:
        spec = TopicSpec.from_resource(body)
        key = ClusterKey(spec.namespace, spec.cluster)
        cluster = await client().get(API_VERSION, CLUSTER_KIND, spec.cluster, spec.namespace)
        brokers = ClusterSpec.from_resource(cluster).brokers if cluster else None
        created_name = (status or {}).get("topicName")
        existing, unavailable = None, None
        if cluster is not None:
            try:
                existing = await deps.controller.topic(key, spec.topic_name)
            except ControllerUnavailable as exc:
                unavailable = str(exc)
        problems = validate_topic(spec, cluster_brokers=brokers, existing=existing, created_name=created_name)
        if problems:
            condition = ready(False, problems[0].reason, "; ".join(p.message for p in problems),
                              generation=spec.generation)
        elif unavailable:
            condition = ready(False, TopicReason.CONTROLLER_UNAVAILABLE, unavailable, generation=spec.generation)
        else:
            try:
                await deps.controller.apply_topic(key, plan_topic(spec, existing))
                partitions = [p for p in await deps.controller.partitions(key) or () if p.topic == spec.topic_name]
                patch.status["topicName"] = spec.topic_name
                patch.status["partitions"] = [
                    {"partition": p.partition, "leader": p.leader, "leaderEpoch": p.leader_epoch,
                     "replicas": list(p.replicas), "isr": list(p.isr)} for p in sorted(partitions,
                                                                                       key=lambda p: p.partition)]
                under = [p for p in partitions if p.under_replicated]
                if under:
                    condition = ready(False, TopicReason.UNDER_REPLICATED,
                                      f"{len(under)} of {len(partitions)} partitions have an incomplete ISR",
                                      generation=spec.generation)
                else:
                    condition = ready(True, TopicReason.READY,
                                      f"{len(partitions)} partitions, replication factor {spec.replication_factor}",
                                      generation=spec.generation)
            except ControllerUnavailable as exc:
                condition = ready(False, TopicReason.CONTROLLER_UNAVAILABLE, str(exc), generation=spec.generation)
            except ControllerRefused as exc:
                condition = ready(False, refusal_reason(exc.error), str(exc), generation=spec.generation)
        previous = (status or {}).get("conditions") or []
        if reason_changed(body, status, condition.reason):  # an Event per state change: Warning when not ready
            event = kopf.warn if condition.status is False else kopf.info
            event(body, reason=condition.reason, message=condition.message)
        patch.status["conditions"] = merge_condition(previous, condition)
        patch.status["observedGeneration"] = spec.generation

    @kopf.on.create(*topics, registry=registry)
    @kopf.on.update(*topics, registry=registry)
    @kopf.on.resume(*topics, registry=registry)
    @deps.metrics.instrument("topic_changed")
    async def topic_changed(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconcile_topic(body, status, patch, logger)

    @kopf.timer(*topics, interval=deps.health_interval_s, initial_delay=deps.health_interval_s,
                registry=registry)
    @deps.metrics.instrument("topic_health")
    async def topic_health(body: Any, status: Any, patch: kopf.Patch, logger: logging.Logger, **_: Any) -> None:
        await reconcile_topic(body, status, patch, logger)

    register_user_handlers(registry, deps, client)

    @kopf.on.delete(*topics, registry=registry)
    @deps.metrics.instrument("topic_deleted")
    async def topic_deleted(body: Any, status: Any, retry: int, logger: logging.Logger, **_: Any) -> None:
        reported.pop((body.get("metadata") or {}).get("uid") or "", None)
        spec = TopicSpec.from_resource(body)
        key = ClusterKey(spec.namespace, spec.cluster)
        if await client().get(API_VERSION, CLUSTER_KIND, spec.cluster, spec.namespace) is None:
            logger.info("cluster %s is gone; nothing to delete, releasing the topic", spec.cluster)
            return
        name = (status or {}).get("topicName") or spec.topic_name
        try:
            await deps.controller.delete_topic(key, name)
        except ControllerUnavailable as exc:
            if retry + 1 >= TOPIC_DELETE_TRIES:
                # Never block deletion (or the namespace's) on a controller that is not there.
                kopf.warn(body, reason="TopicDataNotDeleted",
                          message=f"released after {TOPIC_DELETE_TRIES} tries; data of {name} may remain: {exc}")
                return
            raise kopf.TemporaryError(f"controller unavailable: {exc}", delay=2) from exc

    return registry
