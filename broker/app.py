"""Start and stop one broker: `run_broker` (async) and `main` (sync, with signals).

Start-up order, so a client never meets a half-built broker:
log dirs and meta.properties (cluster id; refuses a dir of another node;
under a controller the id is the controller's, adopted at registration) ->
topic store -> partitions opened (producer state restored) -> group
coordinator -> transaction coordinator -> Kafka listeners (one server each,
security/listener_config.py) -> admin HTTP -> background maintenance and the
certificate watcher -> `ready(BrokerInfo)`. Shutdown reverses it: the
listeners stop accepting and drop their connections, maintenance and the
coordinator stop, then every log is snapshotted, flushed and closed.

    info = BrokerInfo(...)       # what `ready` gets: bootstrap "host:port", every listener's, admin URL
    await run_broker(settings, ready=print)   # until cancelled
    main(settings)               # SIGINT / SIGTERM stop it cleanly
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tinystream.broker.control.access import ForwardedAccessAdmin, LocalAccessAdmin
from tinystream.broker.control.forwarding import ForwardedTopicAdmin
from tinystream.broker.control.image import ImageApplier
from tinystream.broker.control.session import ControllerSession
from tinystream.broker.coordinators.group_service import GroupService
from tinystream.broker.coordinators.producer_ids import (
    ControllerBlockSource,
    FileBlockSource,
    ProducerIdManager,
)
from tinystream.broker.coordinators.txn_service import TransactionService
from tinystream.broker.fetch_sessions.cache import FetchSessionCache
from tinystream.broker.fetch_sessions.context import FetchSessionManager
from tinystream.broker.handlers.context import BrokerContext
from tinystream.broker.maintenance import Maintenance, jobs
from tinystream.broker.metadata.cluster import BrokerEndpoint, ClusterView, ListenerAddress
from tinystream.broker.metadata.topics import TopicStore
from tinystream.broker.metrics.broker_metrics import BrokerMetrics
from tinystream.broker.protocol.api_versions import advertised
from tinystream.broker.replication.hw_checkpoint import HighWatermarkCheckpoint
from tinystream.broker.replication.replica_fetcher import ReplicaFetcherManager
from tinystream.broker.replication.replica_manager import ReplicaManager, wall_clock_ms
from tinystream.broker.security.authorizer import Authorizer, authorizer_enabled
from tinystream.broker.security.listener import (
    InterBrokerCredentials,
    broker_principals,
    inter_broker_credentials,
    load_users,
    principal_mapper,
    reloading_server_context,
    super_users,
)
from tinystream.broker.security.listener_config import Listener, mechanisms, plan_listeners
from tinystream.broker.security.peer import ConnectionAuth
from tinystream.broker.security.sasl import SaslSession
from tinystream.broker.security.tls_reload import CertificateWatcher, ReloadingContext
from tinystream.broker.server.admin_http import AdminHttp
from tinystream.broker.server.admission import BrokerConnections
from tinystream.broker.server.connection import KafkaServer
from tinystream.broker.server.dispatcher import RequestDispatcher
from tinystream.broker.storage import meta_properties
from tinystream.broker.storage.log_manager import LogManager
from tinystream.broker.topics.manager import TopicManager
from tinystream.config.settings import BrokerSettings
from tinystream.controller_auth import TokenFile
from tinystream.controller_client import ControllerClient, controller_ssl_context
from tinystream.foreground import run_until_signalled, serve_until_cancelled

log = logging.getLogger(__name__)

_ANY_ADDRESS = ("0.0.0.0", "::", "")


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    cluster_id: str
    host: str  # advertised host clients connect to (the client-facing listener)
    port: int  # bound (and advertised) Kafka port
    admin_host: str
    admin_port: int
    listeners: tuple[ListenerAddress, ...] = ()  # every listener's advertised address

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def endpoint(self, listener: str) -> tuple[str, int]:
        """(host, port) of one listener, e.g. info.endpoint("REPLICATION")."""
        for address in self.listeners:
            if address.name == listener.upper():
                return address.host, address.port
        raise KeyError(f"broker {self.broker_id} has no listener {listener!r}")

    @property
    def admin_url(self) -> str:
        return f"http://{self.admin_host}:{self.admin_port}"


def log_dirs(settings: BrokerSettings) -> list[Path]:
    return [Path(d.strip()).expanduser() for d in settings.log_dirs.split(",") if d.strip()]


def _advertised(listener: Listener, bound_host: str, bound_port: int) -> ListenerAddress:
    host = listener.advertised_host or (socket.getfqdn() if listener.host in _ANY_ADDRESS else bound_host)
    return ListenerAddress(listener.name, host, listener.advertised_port or bound_port, listener.protocol)


class Broker:
    """One broker's parts, assembled; `start` / `stop` run them."""

    def __init__(
        self,
        settings: BrokerSettings,
        *,
        in_memory: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
        with_groups: bool = True,
    ) -> None:
        # Every listener (broker/security/listener_config.py); `listeners` replaces host and port, which
        # then name the client-facing listener's (the admin HTTP endpoint binds that host too).
        self.plan = plan_listeners(settings)
        self.listener = self.plan.client_facing
        if settings.listeners:
            settings = settings.model_copy(update={"host": self.listener.host, "port": self.listener.port})
        self.settings = settings
        self.clock = clock
        dirs = log_dirs(settings)
        self.logs = LogManager(dirs, in_memory=in_memory)
        if settings.controller_url:  # the controller's id, once registered (`_adopt_cluster_id`)
            cluster_id = meta_properties.read(self.logs.log_dirs, settings.broker_id) or ""
        else:
            cluster_id = meta_properties.ensure(self.logs.log_dirs, settings.broker_id)
        local = BrokerEndpoint(settings.broker_id, settings.advertised_host or settings.host, settings.port,
                               settings.broker_rack)
        self.cluster = ClusterView(cluster_id=cluster_id, local=local,
                                   inter_broker_listener=self.plan.inter_broker.name)
        self.metrics = BrokerMetrics(settings.broker_id)
        self.replicas = ReplicaManager(broker_id=settings.broker_id, log_manager=self.logs, clock=clock)
        self.topics = TopicManager(
            settings=settings, store=TopicStore(self.logs.metadata_dir), replicas=self.replicas, cluster=self.cluster
        )
        self.topics.on_topic_deleted.append(lambda spec: self.metrics.forget_topic(spec.name))
        self.groups = self._group_service() if with_groups else None
        self.ctx = BrokerContext(
            settings=settings,
            cluster=self.cluster,
            topics=self.topics,
            replicas=self.replicas,
            producer_ids=ProducerIdManager(FileBlockSource(self.logs.metadata_dir)),
            metrics=self.metrics,
            advertised=advertised(with_groups=self.groups is not None,
                                  with_sasl=any(lst.sasl for lst in self.plan.listeners)),
            groups=self.groups,
            inter_broker_listener=self.plan.inter_broker.name,
            broker_principals=broker_principals(self.plan.inter_broker),
            authorizer=self._authorizer(settings),
            users=load_users(settings),
            fetch_sessions=FetchSessionManager(
                FetchSessionCache(max_slots=settings.max_incremental_fetch_session_cache_slots)),
        )
        # Without a controller, ACLs and SCRAM credentials live beside this broker's metadata (control/access.py).
        if not settings.controller_url:
            self.ctx.access = LocalAccessAdmin(self.logs.metadata_dir, authorizer=self.ctx.authorizer,
                                               users=self.ctx.users)
        # Transactions need the group coordinator (TxnOffsetCommit, markers on __consumer_offsets).
        self.transactions = self._transaction_service() if self.groups is not None else None
        self.ctx.transactions = self.transactions
        self.metrics.watch_partitions(self.replicas.partitions)
        self.tls_contexts: list[ReloadingContext] = []
        dispatcher = RequestDispatcher(self.ctx)
        everyone = BrokerConnections(settings.max_connections, on_change=self.metrics.connections.set)
        self.servers: dict[str, KafkaServer] = {
            listener.name: self._server(listener, dispatcher, everyone) for listener in self.plan.listeners
        }
        self.server = self.servers[self.listener.name]  # the client-facing one
        self.inter_broker_credentials: InterBrokerCredentials | None = None
        self.admin = AdminHttp(self.ctx)
        self.maintenance = Maintenance(jobs(settings, self.replicas))
        self._watcher_task: asyncio.Task[None] | None = None
        self.info: BrokerInfo | None = None
        self.control: ControllerSession | None = None
        self._fatal = asyncio.Event()  # set when the broker must stop on its own (ControllerSession.fatal_error)
        if settings.controller_url:
            self._wire_controller(settings.controller_url)

    def _server(self, listener: Listener, dispatcher: RequestDispatcher, everyone: BrokerConnections) -> KafkaServer:
        """One listener's server, with that listener's own settings (listener.name.<name>.*)."""
        s = listener.settings
        context = None
        if listener.tls:
            reloading = reloading_server_context(listener)
            self.tls_contexts.append(reloading)
            context = reloading.outer
        server = KafkaServer(
            dispatcher,
            max_request_bytes=s.socket_request_max_bytes,
            max_connections=s.max_connections,
            max_connections_per_ip=s.max_connections_per_ip,
            queued_max_request_bytes=None if s.queued_max_request_bytes < 0 else s.queued_max_request_bytes,
            idle_timeout_ms=s.connections_max_idle_ms,
            ssl_context=context,
            new_auth=self._auth_factory(listener),
            listener_name=listener.name,
            principal_mapper=principal_mapper(listener),
            broker_connections=everyone,
            failed_authentication_delay_ms=s.connection_failed_authentication_delay_ms,
            max_receive_before_login=s.sasl_server_max_receive_size,
            # KIP-402: the broker-wide limit never refuses the inter-broker listener (when it is not the only one).
            protected=listener is self.plan.inter_broker and len(self.plan.listeners) > 1,
        )
        server.on_protocol_error = self.metrics.protocol_errors.inc
        server.on_session_expired = self.metrics.expired_connections_killed.inc
        return server

    def _wire_controller(self, controller_url: str) -> None:
        """Replicated mode: the controller's image drives topics and roles (see `control/`)."""
        s = self.settings
        self.replicas.use_hw_checkpoint(HighWatermarkCheckpoint(self.logs.metadata_dir))
        credentials = inter_broker_credentials(self.plan.inter_broker)
        self.inter_broker_credentials = credentials
        if credentials.tls is not None:
            self.tls_contexts.append(credentials.tls)
        self.fetchers = ReplicaFetcherManager(
            broker_id=s.broker_id, replicas=self.replicas, cluster=self.cluster, max_bytes=s.replica_fetch_max_bytes,
            credentials=credentials,
        )
        if self.transactions is not None:  # WriteTxnMarkers and KIP-890 verification go to the same listener
            self.transactions.markers.credentials = credentials
        controller = ControllerClient(controller_url, token=self._controller_token(),
                                      ssl_context=controller_ssl_context(controller_url, s.controller_ssl_truststore_location))
        applier = ImageApplier(broker_id=s.broker_id, cluster=self.cluster, topics=self.topics,
                               replicas=self.replicas, fetchers=self.fetchers, groups=self.groups, clock=self.clock,
                               transactions=self.transactions, authorizer=self.ctx.authorizer, users=self.ctx.users)
        self.control = ControllerSession(
            settings=s,
            controller=controller,
            cluster=self.cluster,
            topics=self.topics,
            replicas=self.replicas,
            fetchers=self.fetchers,
            applier=applier,
            clock=self.clock,
            adopt_cluster_id=self._adopt_cluster_id,
            on_fatal=lambda _message: self._fatal.set(),
        )
        self.ctx.control = self.control
        self.ctx.forwarding = ForwardedTopicAdmin(settings=s, controller=controller, session=self.control,
                                                  cluster=self.cluster, topics=self.topics)
        # ACLs and SCRAM credentials are cluster metadata: changed through the controller, applied from its image.
        self.ctx.access = ForwardedAccessAdmin(controller=controller, session=self.control)
        # KIP-730: the controller hands out disjoint blocks; a file per broker would not be.
        self.ctx.producer_ids = ProducerIdManager(ControllerBlockSource(self.control.allocate_producer_ids))

    def _auth_factory(self, listener: Listener) -> Callable[[], ConnectionAuth]:
        """Each connection's auth state: on a SASL listener, a SaslSession over the users (sasl.users.file and
        the controller's image) with that listener's mechanisms."""
        if not listener.sasl:
            return ConnectionAuth
        users, enabled = self.ctx.users, mechanisms(listener.settings)
        reauth_ms = listener.settings.connections_max_reauth_ms
        assert users is not None
        return lambda: ConnectionAuth(sasl=SaslSession(users, enabled=enabled, reauthentication=reauth_ms > 0),
                                      max_reauth_ms=reauth_ms)

    def _authorizer(self, settings: BrokerSettings) -> Authorizer | None:
        """authorizer.class.name set: ACLs on; super.users and the inter-broker user may do anything."""
        if not authorizer_enabled(settings.authorizer_class_name):
            return None
        return Authorizer(super_users=super_users(settings), allow_if_no_acl=settings.allow_everyone_if_no_acl_found)

    async def wait_fatal(self) -> None:
        """Returns when the broker must stop on its own (see ControllerSession.fatal_error)."""
        await self._fatal.wait()

    def _controller_token(self) -> TokenFile | None:
        """This broker's controller API token (controller.token.file, "{broker_id}" filled in), read again
        when the file changes (on Kubernetes the kubelet rotates the pod's own token in it)."""
        path = self.settings.controller_token_file
        if not path:
            return None
        token = TokenFile(path.replace("{broker_id}", str(self.settings.broker_id)))
        token()  # a missing or empty file stops the start here, with its name
        return token

    def _adopt_cluster_id(self, cluster_id: str) -> None:
        meta_properties.adopt(self.logs.log_dirs, self.settings.broker_id, cluster_id)
        self.cluster.cluster_id = cluster_id

    def _group_service(self) -> GroupService:
        return GroupService(settings=self.settings, topics=self.topics, replicas=self.replicas, clock=self.clock)

    def _transaction_service(self) -> TransactionService:
        return TransactionService(
            settings=self.settings, topics=self.topics, replicas=self.replicas, cluster=self.cluster,
            producer_ids=lambda: self.ctx.producer_ids, groups=self.groups, clock=self.clock,
        )

    async def start(self) -> BrokerInfo:
        """Open everything and listen; on failure whatever was started is stopped again."""
        raise_open_file_limit()  # before any partition opens (also for brokers run inside another program)
        try:
            return await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> BrokerInfo:
        if self.control is not None and not self.plan.inter_broker.authenticates:
            log.warning("inter-broker listener %s (%s) authenticates no one: no broker can prove it is one, so "
                        "this broker refuses other brokers' follower fetches and transaction markers; replicate "
                        "on a SASL or mTLS listener (tinystream dev and the operator do)",
                        self.plan.inter_broker.name, self.plan.inter_broker.protocol)
        if self.control is None:
            self.topics.open_all()  # with a controller, its image says what to open
        if self.groups is not None:
            if self.control is None:
                await self.groups.start()
            else:
                await self.groups.coordinator.start()  # partitions load as this broker gains leadership
        if self.transactions is not None:
            await self.transactions.start(load_local=self.control is None)
        s = self.settings
        addresses: dict[str, ListenerAddress] = {}
        for listener in self.plan.listeners:
            bound_host, bound_port = await self.servers[listener.name].start(listener.host, listener.port)
            addresses[listener.name] = _advertised(listener, bound_host, bound_port)
        inter = addresses[self.plan.inter_broker.name]
        self.cluster.set_local(BrokerEndpoint(s.broker_id, inter.host, inter.port, s.broker_rack,
                                              tuple(addresses.values())))
        # Every port is bound before the broker registers: one that cannot serve never joins the cluster.
        admin_host, admin_port = await self.admin.start(s.host, s.admin_port)
        if self.control is not None:
            await self.control.start()
        client = addresses[self.listener.name]
        self.maintenance.start()
        watcher = CertificateWatcher(self.tls_contexts, s.ssl_reload_interval_ms)
        self._watcher_task = asyncio.ensure_future(watcher.run())
        self.info = BrokerInfo(
            broker_id=s.broker_id,
            cluster_id=self.cluster.cluster_id,
            host=client.host,
            port=client.port,
            admin_host=client.host if admin_host in _ANY_ADDRESS else admin_host,
            admin_port=admin_port,
            listeners=tuple(addresses.values()),
        )
        log.info(
            "broker %d of cluster %s serving on %s (admin %s), %d partitions",
            s.broker_id, self.cluster.cluster_id,
            ", ".join(f"{a.name}://{a.host}:{a.port} ({a.security_protocol})" for a in self.info.listeners),
            self.info.admin_url, len(self.replicas),
        )
        return self.info

    async def stop(self, *, fence: bool = True) -> None:
        """`fence=False` (tests) leaves the controller to notice by session expiry, like a crash."""
        if self.control is not None:
            await self.control.stop(fence=fence)
        if self._watcher_task is not None:
            self._watcher_task.cancel()
            await asyncio.gather(self._watcher_task, return_exceptions=True)
        for server in self.servers.values():
            await server.stop()
        await self.maintenance.stop()
        if self.transactions is not None:
            await self.transactions.stop()
        if self.groups is not None:
            await self.groups.stop()
        await self.admin.stop()
        self.replicas.close()
        log.info("broker %d stopped", self.settings.broker_id)


async def run_broker(settings: BrokerSettings, *, ready: Callable[[BrokerInfo], None] | None = None) -> None:
    """Run a broker until cancelled, or until it must stop (exit code 1); shutdown flushes and closes every log."""
    try:
        broker = Broker(settings)
    except ValueError as exc:  # settings whose fault shows when used: an unreadable truststore, a listener plan
        raise SystemExit(f"broker {settings.broker_id}: {exc}") from None
    await serve_until_cancelled(broker.start, broker.stop, ready, until=broker.wait_fatal)
    if broker.control is not None and broker.control.fatal_error:
        raise SystemExit(f"broker {settings.broker_id}: {broker.control.fatal_error}")


def raise_open_file_limit() -> None:
    """Lift this process's soft RLIMIT_NOFILE to its hard limit: partitions hold a descriptor each
    (TopicManager.check_room counts them against the soft limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            log.warning("could not raise the open-file limit from %d to %d", soft, hard)


def main(settings: BrokerSettings, *, ready: Callable[[BrokerInfo], None] | None = None) -> None:
    """Run a broker in this thread until SIGINT or SIGTERM."""
    run_until_signalled(lambda: run_broker(settings, ready=ready))
