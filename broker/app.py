"""Start and stop one broker: `run_broker` (async) and `main` (sync, with signals).

Start-up order, so a client never meets a half-built broker:
log dirs and meta.properties (cluster id; refuses a dir of another node;
under a controller the id is the controller's, adopted at registration) ->
topic store -> partitions opened (producer state restored) -> group
coordinator -> transaction coordinator -> Kafka listener -> admin HTTP -> background maintenance ->
`ready(BrokerInfo)`. Shutdown reverses it: the listener stops accepting and
drops its connections, maintenance and the coordinator stop, then every log
is snapshotted, flushed and closed.

    info = BrokerInfo(...)       # what `ready` gets: bootstrap "host:port", admin URL
    await run_broker(settings, ready=print)   # until cancelled
    main(settings)               # SIGINT / SIGTERM stop it cleanly
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
from tinystream.broker.handlers.context import BrokerContext, ConnectionAuth
from tinystream.broker.maintenance import Maintenance, jobs
from tinystream.broker.metadata.cluster import BrokerEndpoint, ClusterView
from tinystream.broker.metadata.topics import TopicStore
from tinystream.broker.metrics.broker_metrics import BrokerMetrics
from tinystream.broker.protocol.api_versions import advertised
from tinystream.broker.replication.hw_checkpoint import HighWatermarkCheckpoint
from tinystream.broker.replication.replica_fetcher import ReplicaFetcherManager
from tinystream.broker.replication.replica_manager import ReplicaManager, wall_clock_ms
from tinystream.broker.security.listener import (
    broker_principals,
    client_listener,
    inter_broker_credentials,
    load_users,
    mechanisms,
    server_ssl_context,
)
from tinystream.broker.security.sasl import SaslSession
from tinystream.broker.server.admin_http import AdminHttp
from tinystream.broker.server.connection import KafkaServer
from tinystream.broker.server.dispatcher import RequestDispatcher
from tinystream.broker.storage import meta_properties
from tinystream.broker.storage.log_manager import LogManager
from tinystream.broker.topics.manager import TopicManager
from tinystream.config.settings import BrokerSettings
from tinystream.controller_auth import read_secret
from tinystream.controller_client import ControllerClient
from tinystream.foreground import run_until_signalled, serve_until_cancelled

log = logging.getLogger(__name__)

_ANY_ADDRESS = ("0.0.0.0", "::", "")


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    cluster_id: str
    host: str  # advertised host clients connect to
    port: int  # bound (and advertised) Kafka port
    admin_host: str
    admin_port: int

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.admin_host}:{self.admin_port}"


def log_dirs(settings: BrokerSettings) -> list[Path]:
    return [Path(d.strip()).expanduser() for d in settings.log_dirs.split(",") if d.strip()]


def _advertised_host(settings: BrokerSettings, bound_host: str) -> str:
    if settings.advertised_host:
        return settings.advertised_host
    if settings.host in _ANY_ADDRESS:
        return socket.getfqdn()
    return bound_host


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
        # One client listener (broker/security/listener.py); `listeners` replaces host and port.
        self.listener = client_listener(settings)
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
        self.cluster = ClusterView(cluster_id=cluster_id, local=local)
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
            advertised=advertised(with_groups=self.groups is not None, with_sasl=self.listener.sasl),
            groups=self.groups,
            broker_principals=broker_principals(settings, self.listener),
            fetch_sessions=FetchSessionManager(
                FetchSessionCache(max_slots=settings.max_incremental_fetch_session_cache_slots)),
        )
        # Transactions need the group coordinator (TxnOffsetCommit, markers on __consumer_offsets).
        self.transactions = self._transaction_service() if self.groups is not None else None
        self.ctx.transactions = self.transactions
        self.metrics.watch_partitions(self.replicas.partitions)
        self.server = KafkaServer(
            RequestDispatcher(self.ctx),
            max_request_bytes=settings.socket_request_max_bytes,
            max_connections=settings.max_connections,
            max_connections_per_ip=settings.max_connections_per_ip,
            queued_max_request_bytes=(None if settings.queued_max_request_bytes < 0
                                      else settings.queued_max_request_bytes),
            idle_timeout_ms=settings.connections_max_idle_ms,
            on_connections_changed=self.metrics.connections.set,
            ssl_context=server_ssl_context(settings) if self.listener.tls else None,
            new_auth=self._auth_factory(),
        )
        self.server.on_protocol_error = self.metrics.protocol_errors.inc
        self.admin = AdminHttp(self.ctx)
        self.maintenance = Maintenance(jobs(settings, self.replicas))
        self.info: BrokerInfo | None = None
        self.control: ControllerSession | None = None
        self._fatal = asyncio.Event()  # set when the broker must stop on its own (ControllerSession.fatal_error)
        if settings.controller_url:
            self._wire_controller(settings.controller_url)

    def _wire_controller(self, controller_url: str) -> None:
        """Replicated mode: the controller's image drives topics and roles (see `control/`)."""
        s = self.settings
        self.replicas.use_hw_checkpoint(HighWatermarkCheckpoint(self.logs.metadata_dir))
        credentials = inter_broker_credentials(s, self.listener)
        self.fetchers = ReplicaFetcherManager(
            broker_id=s.broker_id, replicas=self.replicas, cluster=self.cluster, max_bytes=s.replica_fetch_max_bytes,
            credentials=credentials,
        )
        if self.transactions is not None:  # WriteTxnMarkers and KIP-890 verification go to the same listener
            self.transactions.markers.credentials = credentials
        controller = ControllerClient(controller_url, token=self._controller_token())
        applier = ImageApplier(broker_id=s.broker_id, cluster=self.cluster, topics=self.topics,
                               replicas=self.replicas, fetchers=self.fetchers, groups=self.groups, clock=self.clock,
                               transactions=self.transactions)
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
        # KIP-730: the controller hands out disjoint blocks; a file per broker would not be.
        self.ctx.producer_ids = ProducerIdManager(ControllerBlockSource(self.control.allocate_producer_ids))

    def _auth_factory(self) -> Callable[[], ConnectionAuth]:
        """Each connection's auth state: on a SASL listener, a SaslSession over the users file."""
        if not self.listener.sasl:
            return ConnectionAuth
        users, enabled = load_users(self.settings), mechanisms(self.settings)
        return lambda: ConnectionAuth(sasl=SaslSession(users, enabled=enabled))

    async def wait_fatal(self) -> None:
        """Returns when the broker must stop on its own (see ControllerSession.fatal_error)."""
        await self._fatal.wait()

    def _controller_token(self) -> str | None:
        """This broker's controller API token (controller.token.file, "{broker_id}" filled in)."""
        path = self.settings.controller_token_file
        if not path:
            return None
        return read_secret(path.replace("{broker_id}", str(self.settings.broker_id)))

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
        try:
            return await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> BrokerInfo:
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
        bound_host, port = await self.server.start(s.host, s.port)
        host = _advertised_host(s, bound_host)
        self.cluster.set_local(BrokerEndpoint(s.broker_id, host, s.advertised_port or port, s.broker_rack))
        if self.control is not None:
            await self.control.start()
        admin_host, admin_port = await self.admin.start(s.host, s.admin_port)
        self.maintenance.start()
        self.info = BrokerInfo(
            broker_id=s.broker_id,
            cluster_id=self.cluster.cluster_id,
            host=host,
            port=s.advertised_port or port,
            admin_host=host if admin_host in _ANY_ADDRESS else admin_host,
            admin_port=admin_port,
        )
        log.info(
            "broker %d of cluster %s serving on %s (admin %s), %d partitions",
            s.broker_id, self.cluster.cluster_id, self.info.bootstrap, self.info.admin_url, len(self.replicas),
        )
        return self.info

    async def stop(self, *, fence: bool = True) -> None:
        """`fence=False` (tests) leaves the controller to notice by session expiry, like a crash."""
        if self.control is not None:
            await self.control.stop(fence=fence)
        await self.server.stop()
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
    broker = Broker(settings)
    await serve_until_cancelled(broker.start, broker.stop, ready, until=broker.wait_fatal)
    if broker.control is not None and broker.control.fatal_error:
        raise SystemExit(f"broker {settings.broker_id}: {broker.control.fatal_error}")


def main(settings: BrokerSettings, *, ready: Callable[[BrokerInfo], None] | None = None) -> None:
    """Run a broker in this thread until SIGINT or SIGTERM."""
    run_until_signalled(lambda: run_broker(settings, ready=ready))
