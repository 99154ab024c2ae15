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

from tinystream.broker.assembly.control import ControllerControl, LocalControl
from tinystream.broker.assembly.coordination import build_coordination
from tinystream.broker.assembly.network import build_network
from tinystream.broker.assembly.rack import with_rack_file
from tinystream.broker.assembly.security import build_security
from tinystream.broker.assembly.storage import build_storage
from tinystream.broker.control.broker_configs import BrokerConfigs
from tinystream.broker.control.session import ControllerSession
from tinystream.broker.fetch_sessions.cache import FetchSessionCache
from tinystream.broker.fetch_sessions.context import FetchSessionManager
from tinystream.broker.handlers.shared.context import BrokerContext
from tinystream.broker.maintenance import Maintenance, jobs
from tinystream.broker.metadata.cluster import BrokerEndpoint, ListenerAddress
from tinystream.broker.protocol.api_versions import advertised
from tinystream.broker.replication.replica_manager import wall_clock_ms
from tinystream.broker.security.listener import InterBrokerCredentials
from tinystream.broker.security.listener_config import Listener, plan_listeners
from tinystream.broker.security.tls_reload import CertificateWatcher
from tinystream.broker.server.connection import KafkaServer
from tinystream.broker.topics.schema_ids import SchemaIdLookup
from tinystream.config.settings import BrokerSettings
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


def _advertised(listener: Listener, bound_host: str, bound_port: int) -> ListenerAddress:
    host = listener.advertised_host or (socket.getfqdn() if listener.host in _ANY_ADDRESS else bound_host)
    return ListenerAddress(listener.name, host, listener.advertised_port or bound_port, listener.protocol)


class Broker:
    """One broker's parts, assembled in stages (broker/assembly/); `start` / `stop` run them."""

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
        self._fatal = asyncio.Event()  # set when the broker must stop on its own (ControllerSession.fatal_error)
        storage = build_storage(settings, self.plan, in_memory=in_memory, clock=clock)
        # Before any partition opens: the stored dynamic broker configs are part of every LogConfig (under a
        # controller they come from its image, applied before the image's partitions open).
        broker_configs = BrokerConfigs.for_mode(storage.logs.metadata_dir, settings)
        broker_configs.subscribe(storage.topics.use_settings)
        if storage.replicas.throttles is not None:
            broker_configs.subscribe(storage.replicas.throttles.use_settings)
        security = build_security(settings, self.plan)
        mode = (ControllerControl(settings, storage, security, clock, on_fatal=lambda _message: self._fatal.set(),
                                  broker_configs=broker_configs)
                if settings.controller_url else LocalControl(settings, storage, security))
        coordination = build_coordination(settings, storage, mode.producer_ids, clock=clock, with_groups=with_groups)
        control = mode.finish(coordination.groups, coordination.transactions)
        self.ctx = BrokerContext(
            settings=settings, cluster=storage.cluster, topics=storage.topics, replicas=storage.replicas,
            producer_ids=control.producer_ids, metrics=storage.metrics,
            advertised=advertised(with_groups=with_groups, with_sasl=any(lst.sasl for lst in self.plan.listeners)),
            access=control.access, users=security.users, inter_broker_listener=self.plan.inter_broker.name,
            broker_principals=security.broker_principals,
            fetch_sessions=FetchSessionManager(
                FetchSessionCache(max_slots=settings.max_incremental_fetch_session_cache_slots)),
            groups=coordination.groups, transactions=coordination.transactions, control=control.session,
            forwarding=control.forwarding, authorizer=security.authorizer,
            quotas=control.quotas,
            schema_ids=(SchemaIdLookup(settings.confluent_schema_registry_url,
                                       user_info_file=settings.confluent_basic_auth_user_info_file)
                        if settings.confluent_schema_registry_url else None),
            broker_configs=broker_configs,
        )
        client_tls = () if control.credentials is None or control.credentials.tls is None else (control.credentials.tls,)
        network = build_network(settings, self.ctx, security, extra_tls=client_tls)
        broker_configs.subscribe(network.use_settings)
        self.storage, self.coordination, self.network = storage, coordination, network
        # The parts by name, as tests and the dev tools reach them.
        self.logs, self.cluster, self.metrics = storage.logs, storage.cluster, storage.metrics
        self.replicas, self.topics = storage.replicas, storage.topics
        self.groups, self.transactions = coordination.groups, coordination.transactions
        self.control: ControllerSession | None = control.session
        self.inter_broker_credentials: InterBrokerCredentials | None = control.credentials
        self.fetchers = control.fetchers  # None without a controller
        self.servers: dict[str, KafkaServer] = network.servers
        self.server = self.servers[self.listener.name]  # the client-facing one
        self.admin = network.admin
        self.tls_contexts = network.tls_contexts
        self.maintenance = Maintenance(jobs(settings, self.replicas))
        self._watcher_task: asyncio.Task[None] | None = None
        self.info: BrokerInfo | None = None

    async def wait_fatal(self) -> None:
        """Returns when the broker must stop on its own (see ControllerSession.fatal_error)."""
        await self._fatal.wait()

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
        await self.coordination.start(local=self.control is None)
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
        await self.coordination.stop()
        await self.admin.stop()
        if self.ctx.schema_ids is not None:
            await self.ctx.schema_ids.close()
        self.replicas.close()
        log.info("broker %d stopped", self.settings.broker_id)


async def run_broker(settings: BrokerSettings, *, ready: Callable[[BrokerInfo], None] | None = None) -> None:
    """Run a broker until cancelled, or until it must stop (exit code 1); shutdown flushes and closes every log."""
    try:
        settings = with_rack_file(settings)
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
