"""The operator as the controller: one `ControllerService` per TinyStreamCluster, one HTTP server.

`OperatorController` is the `ControllerPort` behind the kopf handlers:

- `start(client)` (kopf start-up) listens on the controller port; each
  cluster's broker-facing API (the local driver's, unchanged) is served
  under /clusters/<namespace>/<name>, which is the `controller.url` the
  broker ConfigMap names (resources.controller_url).
- A cluster's service is opened on first use (a reconcile of the cluster or
  of one of its Topics): its state is loaded from the cluster's status
  (status_store.py), or a new cluster is bootstrapped and saved there, so an
  operator restart resumes at the same image version with the same topic ids.
  Loading restarts every broker session (`ControllerActivated`): brokers get
  a full session timeout to find the new operator. Each service has its own
  driver loop (session checks, preferred-leader elections).
- Until a cluster's service is open, its brokers get NOT_CONTROLLER (503)
  and retry; a cluster whose status cannot be read or written is
  ControllerUnavailable to the handlers.
- Topic actions become core events (CreateTopic, CreatePartitions,
  AlterTopicConfig, DeleteTopic; a new replication factor becomes
  ReassignPartitions onto the live brokers, `plan_replication_factor`); a refusal comes back as ControllerRefused
  with the Kafka error name. Broker actions: MoveLeadership -> DrainBroker
  (KIP-841 controlled shutdown: leaders move to other ISR members) until
  the restart: the core ends it when the broker registers again, and keeps
  it in the image (status), so an operator restart mid-roll loses nothing;
  DrainBrokers -> DrainBroker each, then ReassignPartitions planned by
  `plan_reassignment` onto the remaining brokers; Rebalance ->
  ReassignPartitions onto every live broker; BrokerDown (a Pod event says
  the process is not running) -> ExpireSession, unless already fenced.

With `metrics` (the operator's registry, operator/k8s/metrics.py), the same
server answers GET /metrics: the operator's reconcile series, every open
cluster's controller series and the API's per-request series.

Callers authenticate with tokens signed by the cluster's own secret
(controller_secret.py: derived from the operator's secret, broker tokens in a Secret);
a cluster whose service is not open has no secret here and refuses every call.
With `tls` (controller_tls.py, the operator's default) the API is HTTPS: a
cluster's controller name is answered with a certificate from that cluster's
CA once its service opens; `RENEWAL_CHECK_S` apart, certificates near expiry
are re-issued in place.

`forget` (cluster deleted) stops the cluster's service; its state went with
the resource.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from aiohttp import web

from tinystream.controller_auth import ADMIN, token_for
from tinystream.operator.controller import (
    AlterTopicConfig,
    ControllerError,
    CreatePartitions,
    CreateTopic,
    Decision,
    DeleteTopic,
    DrainBroker,
    Event,
    ExpireSession,
    PlacementError,
    ReassignPartitions,
    UndrainBroker,
)
from tinystream.operator.controller.config import overrides_from_settings
from tinystream.operator.controller.errors import StateFormatError
from tinystream.operator.controller.events import AlterClientQuotas, AlterScramCredentials, CreateAcls, DeleteAcls
from tinystream.operator.controller.image import AclRecord, ClientQuotaRecord, ScramCredentialRecord
from tinystream.operator.controller.reassignment import plan_reassignment, plan_replication_factor
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.controller_port import (
    BrokerAction,
    ClusterKey,
    ControllerRefused,
    ControllerUnavailable,
    RebalanceMoves,
    RebalanceProgress,
)
from tinystream.operator.k8s.controller_secret import SecretSource, broker_admin_token
from tinystream.operator.k8s.controller_tls import ControllerTLS
from tinystream.operator.k8s.errors import KubeApiError
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, ClusterSpec
from tinystream.operator.k8s.reconcile import (
    BrokerDown,
    DrainBrokers,
    EndRollDrain,
    EndScaleDownDrain,
    MoveLeadership,
    PartitionView,
    Rebalance,
)
from tinystream.operator.k8s.status_store import ClusterStatusStore
from tinystream.operator.k8s.topics import AlterConfig, ChangeReplicationFactor, GrowPartitions, TopicAction, TopicView
from tinystream.operator.k8s.topics import CreateTopic as CreateTopicAction
from tinystream.operator.k8s.users import UserAccessPlan
from tinystream.operator.service import rebalancing
from tinystream.operator.service.controller_service import ControllerService, DriverTiming, monotonic_ms
from tinystream.operator.service.errors import ApiError, StateFileError
from tinystream.operator.service.http_api import IdentityLookup, LegacyLookup, make_clusters_app
from tinystream.operator.service.metrics import ControllerMetrics

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 2.0
RENEWAL_CHECK_S = 3600.0


class OperatorController:
    """Runs and serves the controller core of every cluster; see the module docstring."""

    def __init__(self, *, host: str = "0.0.0.0", port: int = 9091, timing: DriverTiming = DriverTiming(),
                 clock: Callable[[], int] = monotonic_ms,
                 store_factory: Callable[[KubeClient, ClusterKey], Any] = ClusterStatusStore,
                 secret_source: SecretSource,
                 metrics: ControllerMetrics | None = None,
                 config_overrides: Mapping[str, Any] | None = None,
                 tls: ControllerTLS | None = None,
                 brokers: IdentityLookup | None = None,
                 legacy_brokers: LegacyLookup | None = None) -> None:
        self.host = host
        self.port = port
        self.timing = timing
        self.clock = clock
        self.store_factory = store_factory
        self.secret_source = secret_source  # the cluster's API secret (controller_secret.py)
        self.config_overrides = dict(config_overrides or {})  # ControllerConfig fields for every cluster
        self.tls = tls
        # Who a broker is: its pod's service-account token (broker_identity.TokenReviewer) in production;
        # None: tokens the cluster secret made (tests without an API server that reviews tokens).
        self.brokers = brokers
        self.legacy_brokers = legacy_brokers  # old pods mid-upgrade (broker_identity.TokenReviewer.legacy)
        self._renewals: asyncio.Task[None] | None = None
        self._client: KubeClient | None = None
        self._runner: web.AppRunner | None = None
        self._services: dict[ClusterKey, ControllerService] = {}
        self._secrets: dict[ClusterKey, str] = {}  # signs each open cluster's API tokens
        self._drivers: dict[ClusterKey, asyncio.Task[None]] = {}
        self._opening: dict[ClusterKey, asyncio.Lock] = {}
        self._standing_down = False  # told to stop (stand_down): no cluster is served or opened again
        # GET /metrics on the controller port: every open cluster's image series, labelled namespace/cluster.
        self.metrics = metrics
        if metrics is not None:
            metrics.watch(lambda: [((k.namespace, k.name), s) for k, s in list(self._services.items())],
                          labels=("namespace", "cluster"))

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    @property
    def client(self) -> KubeClient | None:
        """The API server client it started with (None before start)."""
        return self._client

    def cluster_url(self, cluster: ClusterKey) -> str:
        return f"{self.url}/clusters/{cluster.namespace}/{cluster.name}"

    async def start(self, client: KubeClient) -> None:
        self._client = client
        runner = web.AppRunner(make_clusters_app(self._lookup, secrets=self._secret, metrics=self.metrics,
                                                 brokers=self.brokers, legacy_brokers=self.legacy_brokers),
                               shutdown_timeout=SHUTDOWN_TIMEOUT_S, access_log=None)
        await runner.setup()
        self._runner = runner
        await web.TCPSite(runner, self.host, self.port, ssl_context=self.tls.server if self.tls else None).start()
        for address in runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                self.port = int(address[1])
                break
        if self.tls is not None:
            self._renewals = asyncio.create_task(self._renew_certificates(), name="controller-certificates")
        log.info("controller API for every cluster on %s/clusters/<namespace>/<name>", self.url)

    async def _renew_certificates(self) -> None:
        assert self.tls is not None
        while True:
            await asyncio.sleep(RENEWAL_CHECK_S)
            for renewed in self.tls.renew_due():
                log.info("controller API certificate of %s renewed", renewed)

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """How the operator's own dashboard verifies this API (None: plain HTTP)."""
        return self.tls.client_context() if self.tls is not None else None

    def stand_down(self) -> None:
        """Stop being every cluster's controller now; `stop` (kopf's clean-up, seconds later) frees the rest.

        Synchronous, for a signal handler (hand_over.py): the drivers make no more decisions, every
        service refuses changes and releases its long-polls, and every call is answered NOT_CONTROLLER
        with its connection closed (http_api), so a broker's next call reaches the operator that took over.
        """
        self._standing_down = True
        for driver in self._drivers.values():
            driver.cancel()
        for service in self._services.values():
            service.begin_close()
        log.info("controller API standing down: %d cluster(s) answered NOT_CONTROLLER from now on",
                 len(self._services))

    async def stop(self) -> None:
        if self._renewals is not None:
            self._renewals.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewals
            self._renewals = None
        for key in list(self._services):
            await self._close(key, begin_only=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for key in list(self._services):
            await self._close(key)
        self._client = None

    async def _close(self, key: ClusterKey, *, begin_only: bool = False) -> None:
        driver = self._drivers.pop(key, None)
        if driver is not None:
            driver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await driver
        service = self._services.get(key)
        if service is None:
            return
        if begin_only:
            service.begin_close()
            return
        del self._services[key]
        self._secrets.pop(key, None)
        if self.tls is not None:
            self.tls.remove_cluster(key)
        await service.close()

    def _lookup(self, namespace: str, name: str) -> ControllerService | None:
        return None if self._standing_down else self._services.get(ClusterKey(namespace, name))

    def _secret(self, namespace: str, name: str) -> str | None:
        return None if self._standing_down else self._secrets.get(ClusterKey(namespace, name))

    def admin_token(self, cluster: ClusterKey) -> str | None:
        """A token for the cluster's API as admin (the operator's own dashboard), once its service is open."""
        secret = self._secrets.get(cluster)
        return token_for(secret, ADMIN) if secret is not None else None

    def broker_admin_token(self, cluster: ClusterKey) -> str | None:
        """What the cluster's brokers ask of callers of their admin HTTP (controller_secret.py), once its service is open."""
        secret = self._secrets.get(cluster)
        return broker_admin_token(secret) if secret is not None else None

    def clusters(self) -> list[ClusterKey]:
        """The clusters whose controller runs here, sorted (the dashboard's index)."""
        return sorted(self._services)

    def service(self, cluster: ClusterKey) -> ControllerService | None:
        """The running service of `cluster`, if open (tests and status)."""
        return self._services.get(cluster)

    async def attach(self, cluster: ClusterKey) -> ControllerService:
        """The cluster's service, opened from its status on first use; none once standing down."""
        if self._standing_down:
            raise ControllerUnavailable("the operator is stopping: it serves no cluster's controller")
        service = self._services.get(cluster)
        if service is not None:
            return service
        if self._client is None:
            raise ControllerUnavailable("the operator has not started its controller API yet")
        lock = self._opening.setdefault(cluster, asyncio.Lock())
        async with lock:
            service = self._services.get(cluster)
            if service is not None:
                return service
            store = self.store_factory(self._client, cluster)
            if isinstance(store, ClusterStatusStore):  # another operator took over: stop serving this cluster
                store.on_fenced = lambda: self._fenced(cluster)
            try:
                self._secrets[cluster] = await self.secret_source(self._client, cluster)
            except (KubeApiError, LookupError, OSError) as exc:
                raise ControllerUnavailable(f"cannot read or make the controller secret of {cluster}: {exc}") from exc
            try:
                spec = await self._cluster_spec(cluster)
                overrides = {**self.config_overrides, **overrides_from_settings(spec.config)}
                service = await ControllerService.open(store, clock=self.clock, timing=self.timing,
                                                       config_overrides=overrides)
            except (OSError, StateFileError, StateFormatError) as exc:
                raise ControllerUnavailable(f"cannot open the controller state of {cluster}: {exc}") from exc
            if self._standing_down:  # SIGTERM came while it opened: no driver may start (it would fence)
                await service.close()
                raise ControllerUnavailable("the operator is stopping: it serves no cluster's controller")
            if self.tls is not None:
                self.tls.add_cluster(spec)
            self._services[cluster] = service
            self._drivers[cluster] = asyncio.create_task(service.run_driver(), name=f"controller-{cluster}")
            log.info("controller of %s: cluster id %s, metadata version %d", cluster,
                     service.image.cluster_id, service.image.version)
            return service

    def _fenced(self, cluster: ClusterKey) -> None:
        log.warning("another operator took over the controller state of %s: no longer serving it", cluster)
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.forget(cluster)))

    async def _cluster_spec(self, cluster: ClusterKey) -> ClusterSpec:
        """The cluster as its controller opens: ControllerConfig fields its spec.config sets
        (default.replication.factor, ...; a later edit takes effect at the next open, an operator
        restart) and what its CA is derived from."""
        assert self._client is not None
        try:
            obj = await self._client.get(API_VERSION, CLUSTER_KIND, cluster.name, cluster.namespace)
        except KubeApiError as exc:
            raise StateFileError(f"cannot read TinyStreamCluster {cluster}: {exc}") from exc
        if obj is None:
            raise StateFileError(f"TinyStreamCluster {cluster} does not exist")
        return ClusterSpec.from_resource(obj)

    async def forget(self, cluster: ClusterKey) -> None:
        await self._close(cluster)
        self._opening.pop(cluster, None)

    def follow_ca(self, spec: ClusterSpec) -> None:
        if self.tls is not None and self.tls.follow_ca(spec):
            log.info("controller API certificate of %s/%s re-issued from the cluster CA now signing",
                     spec.namespace, spec.name)

    # -- reads -----------------------------------------------------------------------------

    async def partitions(self, cluster: ClusterKey) -> tuple[PartitionView, ...] | None:
        try:
            service = await self.attach(cluster)
        except ControllerUnavailable as exc:  # said out loud: on a real cluster a refused save hid here
            log.warning("controller of %s unavailable: %s", cluster, exc)
            return None
        return tuple(
            PartitionView(topic=name, partition=p.partition, leader=p.leader, replicas=tuple(p.replicas),
                          isr=tuple(p.isr), leader_epoch=p.leader_epoch, adding=tuple(p.adding_replicas),
                          removing=tuple(p.removing_replicas))
            for name, p in service.image.iter_partitions())

    def _brokers_where(self, cluster: ClusterKey, flag: str) -> frozenset[int]:
        """Brokers of an open cluster whose BrokerRecord has `flag` set (none while it is not open)."""
        service = self._services.get(cluster)
        if service is None:
            return frozenset()
        return frozenset(b for b, record in service.image.brokers.items() if getattr(record, flag))

    async def fenced(self, cluster: ClusterKey) -> frozenset[int]:
        return self._brokers_where(cluster, "fenced")

    async def drained_for_roll(self, cluster: ClusterKey) -> frozenset[int]:
        return self._brokers_where(cluster, "drained_until_restart")

    async def registered(self, cluster: ClusterKey) -> frozenset[int] | None:
        service = self._services.get(cluster)
        return None if service is None else frozenset(service.image.brokers)

    async def cluster_id(self, cluster: ClusterKey) -> str | None:
        service = self._services.get(cluster)
        return None if service is None else service.image.cluster_id

    async def topic(self, cluster: ClusterKey, name: str) -> TopicView | None:
        record = (await self.attach(cluster)).image.topic(name)
        if record is None:
            return None
        rf = len(record.partitions[0].target_replicas) if record.partitions else 0
        return TopicView(name=name, partitions=len(record.partitions), replication_factor=rf,
                         config=dict(record.config))

    # -- writes ----------------------------------------------------------------------------

    async def _submit(self, service: ControllerService, event: Event, *, ok: frozenset[ControllerError] = frozenset()
                      ) -> Decision:
        try:
            decision = await service.submit(event)
        except ApiError as exc:  # a failed save, or shutting down: the state is unchanged
            raise ControllerUnavailable(str(exc)) from exc
        if decision.error is not None and decision.error not in ok:
            raise ControllerRefused(decision.error.name, decision.message)
        return decision

    async def apply_topic(self, cluster: ClusterKey, actions: Sequence[TopicAction]) -> None:
        service = await self.attach(cluster)
        for action in actions:
            event: Event
            if isinstance(action, CreateTopicAction):
                event = CreateTopic(topic=action.name, partitions=action.partitions,
                                    replication_factor=action.replication_factor, config=dict(action.config))
            elif isinstance(action, GrowPartitions):
                event = CreatePartitions(topic=action.name, count=action.partitions)
            elif isinstance(action, AlterConfig):
                event = AlterTopicConfig(topic=action.name, config=dict(action.config))
            elif isinstance(action, ChangeReplicationFactor):
                live = [b for b, r in service.image.brokers.items() if not r.fenced and not r.drained]
                try:
                    plan = plan_replication_factor(service.image, action.name, action.replication_factor, live)
                except PlacementError as exc:
                    raise ControllerRefused(exc.error.name, exc.message) from exc
                if not plan:
                    continue
                event = ReassignPartitions(assignments=tuple(plan))
            else:  # pragma: no cover - the union is closed
                raise TypeError(f"unknown topic action {action!r}")
            await self._submit(service, event)

    async def delete_topic(self, cluster: ClusterKey, name: str) -> None:
        service = await self.attach(cluster)
        await self._submit(service, DeleteTopic(topic=name), ok=frozenset({ControllerError.UNKNOWN_TOPIC_OR_PARTITION}))

    async def access(self, cluster: ClusterKey) -> tuple[tuple[AclRecord, ...], tuple[ScramCredentialRecord, ...]]:
        image = (await self.attach(cluster)).image
        return image.acls, image.scram_credentials

    async def client_quotas(self, cluster: ClusterKey) -> tuple[ClientQuotaRecord, ...]:
        return (await self.attach(cluster)).image.client_quotas

    async def alter_access(self, cluster: ClusterKey, plan: UserAccessPlan) -> None:
        service = await self.attach(cluster)
        if plan.delete:
            await self._submit(service, DeleteAcls(filters=plan.delete))
        if plan.create:
            await self._submit(service, CreateAcls(acls=plan.create))
        if plan.upsert or plan.remove:
            await self._submit(service, AlterScramCredentials(upsertions=plan.upsert, deletions=plan.remove))
        if plan.quotas is not None:
            await self._submit(service, AlterClientQuotas(alterations=(plan.quotas,)))

    async def broker_actions(self, cluster: ClusterKey, actions: Sequence[BrokerAction]) -> None:
        service = await self.attach(cluster)
        for action in actions:
            if isinstance(action, MoveLeadership):
                if service.image.broker(action.broker_id) is not None:
                    # The core ends this drain when the restarted broker registers again.
                    await self._submit(service, DrainBroker(broker_id=action.broker_id, until_restart=True))
            elif isinstance(action, DrainBrokers):
                for broker_id in action.broker_ids:
                    if service.image.broker(broker_id) is not None:
                        await self._submit(service, DrainBroker(broker_id=broker_id, scale_down=True))
                targets = [b for b in service.image.brokers if b not in action.broker_ids]
                await self._reassign(service, targets)
            elif isinstance(action, Rebalance):
                targets = [b for b, r in service.image.brokers.items() if not r.fenced and not r.drained]
                await self._reassign(service, targets)
            elif isinstance(action, EndRollDrain):
                record = service.image.broker(action.broker_id)
                if record is not None and record.drained_until_restart:
                    await self._submit(service, UndrainBroker(broker_id=action.broker_id))
            elif isinstance(action, EndScaleDownDrain):
                for broker_id in action.broker_ids:
                    record = service.image.broker(broker_id)
                    if record is not None and record.drained_by_scale_down:  # never an admin's drain
                        log.info("%s: broker %d is a pool's again: its scale-down drain ends", cluster, broker_id)
                        await self._submit(service, UndrainBroker(broker_id=broker_id))
            elif isinstance(action, BrokerDown):
                record = service.image.broker(action.broker_id)
                if record is not None and not record.fenced:
                    log.info("%s: broker %d down (%s): ending its session", cluster, action.broker_id, action.reason)
                    await self._submit(service, ExpireSession(broker_id=action.broker_id))

    # -- rebalance (TinyStreamRebalance; the same steps as the local API's /v1/rebalance/*) ---------------

    async def rebalance_proposal(self, cluster: ClusterKey, mode: str, brokers: Sequence[int], *,
                                 members: Collection[int] | None = None) -> dict[str, Any]:
        service = await self.attach(cluster)
        try:
            return (await rebalancing.proposal(service, mode, brokers, {}, members=members)).to_dict()
        except ValueError as exc:
            raise ControllerRefused("INVALID_REQUEST", str(exc)) from exc
        except PlacementError as exc:
            raise ControllerRefused(exc.error.name, exc.message) from exc

    async def rebalance_moves(self, cluster: ClusterKey, step: str, moves: RebalanceMoves, *,
                              throttle: int | None = None) -> RebalanceProgress:
        service = await self.attach(cluster)

        async def submit(event: Event, *, validate_only: bool = False) -> Decision:
            if validate_only:
                decision = service.preview(event)
                if decision.error is not None:
                    raise ControllerRefused(decision.error.name, decision.message)
                return decision
            return await self._submit(service, event)

        try:
            if step == "execute":
                progress = await rebalancing.execute(service, submit, moves, throttle=True, rate=throttle)
            elif step == "verify":
                progress = await rebalancing.verify(service, submit, moves, rate=throttle)
            elif step == "stop":
                progress = await rebalancing.stop(service, submit, moves, rate=throttle)
            else:
                raise ValueError(f"unknown rebalance step {step!r}")
        except ValueError as exc:
            raise ControllerRefused("INVALID_REQUEST", str(exc)) from exc
        return RebalanceProgress(remaining=progress.remaining, cancelled=progress.cancelled)

    async def _reassign(self, service: ControllerService, targets: Sequence[int]) -> None:
        try:
            plan = plan_reassignment(service.state, targets)
        except PlacementError as exc:
            raise ControllerRefused(exc.error.name, exc.message) from exc
        if plan:
            await self._submit(service, ReassignPartitions(assignments=tuple(plan)))
