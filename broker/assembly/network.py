"""Stage 6: what clients reach: one Kafka server per listener (with that listener's own limits and
login), the admin HTTP endpoint, and the TLS contexts the certificate watcher reloads."""

from __future__ import annotations

from dataclasses import dataclass

from tinystream.broker.assembly.security import Security
from tinystream.broker.handlers.shared.context import BrokerContext
from tinystream.broker.metrics.broker_metrics import BrokerMetrics
from tinystream.broker.security.listener import principal_mapper, reloading_server_context
from tinystream.broker.security.listener_config import Listener
from tinystream.broker.security.tls_reload import ReloadingContext
from tinystream.broker.server.admin_http import AdminHttp
from tinystream.broker.server.admission import BrokerConnections
from tinystream.broker.server.connection import KafkaServer
from tinystream.broker.server.dispatcher import RequestDispatcher
from tinystream.config.settings import BrokerSettings


@dataclass(frozen=True, slots=True)
class Network:
    servers: dict[str, KafkaServer]  # by listener name
    admin: AdminHttp
    tls_contexts: tuple[ReloadingContext, ...]  # every listener's, and the inter-broker client's
    everyone: BrokerConnections  # the broker-wide max.connections

    def use_settings(self, settings: BrokerSettings) -> None:
        """New connection limits (dynamic broker configs): each listener's, its listener.name.* override first.

        They apply to the next connection; open ones stay, as in Kafka.
        """
        self.everyone.max_connections = settings.max_connections
        for name, server in self.servers.items():
            s = settings.for_listener(name)
            server.quotas.max_connections = s.max_connections
            server.quotas.max_connections_per_ip = s.max_connections_per_ip


def build_network(settings: BrokerSettings, ctx: BrokerContext, security: Security,
                  extra_tls: tuple[ReloadingContext, ...] = ()) -> Network:
    dispatcher = RequestDispatcher(ctx)
    everyone = BrokerConnections(settings.max_connections, on_change=ctx.metrics.connections.set)
    tls: list[ReloadingContext] = []
    servers = {listener.name: _server(listener, dispatcher, everyone, security, ctx.metrics, tls)
               for listener in security.plan.listeners}
    return Network(servers=servers, admin=AdminHttp(ctx), tls_contexts=(*tls, *extra_tls), everyone=everyone)


def _server(listener: Listener, dispatcher: RequestDispatcher, everyone: BrokerConnections, security: Security,
            metrics: BrokerMetrics, tls: list[ReloadingContext]) -> KafkaServer:
    """One listener's server, with that listener's own settings (listener.name.<name>.*)."""
    s, plan = listener.settings, security.plan
    context = None
    if listener.tls:
        reloading = reloading_server_context(listener)
        tls.append(reloading)
        context = reloading.outer
    server = KafkaServer(
        dispatcher,
        max_request_bytes=s.socket_request_max_bytes,
        max_connections=s.max_connections,
        max_connections_per_ip=s.max_connections_per_ip,
        queued_max_request_bytes=None if s.queued_max_request_bytes < 0 else s.queued_max_request_bytes,
        idle_timeout_ms=s.connections_max_idle_ms,
        ssl_context=context,
        new_auth=security.auth_factory(listener),
        listener_name=listener.name,
        principal_mapper=principal_mapper(listener),
        broker_connections=everyone,
        failed_authentication_delay_ms=s.connection_failed_authentication_delay_ms,
        max_receive_before_login=s.sasl_server_max_receive_size,
        # KIP-402: the broker-wide limit never refuses the inter-broker listener (when it is not the only one).
        protected=listener is plan.inter_broker and len(plan.listeners) > 1,
    )
    server.on_protocol_error = metrics.protocol_errors.inc
    server.on_session_expired = metrics.expired_connections_killed.inc
    return server
