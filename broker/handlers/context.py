"""What every request handler can reach: the broker's parts, wired once by `app`.

Handlers are functions `(BrokerContext, Call) -> response`; they hold no state
of their own, so each can be tested with a context built from in-memory parts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tinystream.broker.control.forwarding import ForwardedTopicAdmin
from tinystream.broker.control.session import ControllerSession
from tinystream.broker.coordinators.group_service import GroupService
from tinystream.broker.coordinators.producer_ids import ProducerIdManager
from tinystream.broker.coordinators.txn_service import TransactionService
from tinystream.broker.fetch_sessions.cache import FetchSessionCache
from tinystream.broker.fetch_sessions.context import FetchSessionManager
from tinystream.broker.metadata.cluster import ClusterView
from tinystream.broker.metrics.broker_metrics import BrokerMetrics
from tinystream.broker.protocol.api_versions import ApiRange
from tinystream.broker.protocol.codec import ApiSchemas, RequestHeader, build
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.security.sasl import SaslSession
from tinystream.broker.topics.manager import TopicManager
from tinystream.config.settings import BrokerSettings

#: A dispatcher result that closes the connection instead of answering (Kafka
#: does this for a failed acks=0 produce, whose client reads no response).
CLOSE_CONNECTION = object()


@dataclass(slots=True)
class ConnectionAuth:
    """Who is on a connection: its SASL exchange (on a SASL listener) and the principal it proved."""

    sasl: SaslSession | None = None  # None: the listener asks for no SASL
    principal: str = "User:ANONYMOUS"  # or User:<sasl user>, or User:CN=<client certificate>
    close_after_reply: bool = False  # a failed authentication: answer, then close (as Kafka does)

    @property
    def authenticated(self) -> bool:
        return self.sasl is None or self.sasl.authenticated


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Who sent a request (for groups' client_host, for logs, and for what it may do)."""

    connection_id: int
    host: str
    port: int
    auth: ConnectionAuth = field(default_factory=ConnectionAuth)


@dataclass(slots=True)
class BrokerContext:
    settings: BrokerSettings
    cluster: ClusterView
    topics: TopicManager
    replicas: ReplicaManager
    producer_ids: ProducerIdManager
    metrics: BrokerMetrics
    advertised: tuple[ApiRange, ...]
    groups: GroupService | None = None  # None when the broker runs without a group coordinator
    transactions: TransactionService | None = None  # None without a group coordinator (offsets need one)
    control: ControllerSession | None = None  # set with controller.url: the session and its applied image
    forwarding: ForwardedTopicAdmin | None = None  # set with controller.url: topic admin goes to the controller
    # Principals whose Fetch replica_id is believed (followers); None: the listener authenticates no one,
    # so any known broker id is (spoofable: use a SASL or mTLS listener).
    broker_principals: frozenset[str] | None = None
    # Incremental fetch sessions (KIP-227); `app` sizes the cache from max.incremental.fetch.session.cache.slots.
    fetch_sessions: FetchSessionManager = field(default_factory=lambda: FetchSessionManager(FetchSessionCache()))


@dataclass(frozen=True, slots=True)
class Call:
    """One decoded request as a handler sees it."""

    header: RequestHeader
    body: Any
    api: ApiSchemas  # schemas of the version answered (Produce v0-2: v3's)
    client: ClientInfo

    @property
    def version(self) -> int:
        return self.header.api_version

    def respond(self, **fields: Any) -> Any:
        """The top-level response entity; fields this version lacks are dropped."""
        return build(self.api.response_type, fields)

    def make(self, name: str, /, **fields: Any) -> Any:
        """A nested response entity by its kio class name."""
        return self.api.response(name, **fields)
