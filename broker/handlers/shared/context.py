"""What every request handler can reach: the broker's parts, wired once by `app`.

Handlers are functions `(BrokerContext, Call) -> response`; they hold no state
of their own, so each can be tested with a context built from in-memory parts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tinystream.broker.control.access import AccessAdmin
from tinystream.broker.control.broker_configs import BrokerConfigs
from tinystream.broker.control.forwarding import ForwardedTopicAdmin
from tinystream.broker.control.quotas import ClientQuotas
from tinystream.broker.control.session import ControllerSession
from tinystream.broker.coordinators.group_service import GroupService
from tinystream.broker.coordinators.producer_ids import ProducerIdManager
from tinystream.broker.coordinators.txn_service import TransactionService
from tinystream.broker.fetch_sessions.context import FetchSessionManager
from tinystream.broker.metadata.cluster import ClusterView
from tinystream.broker.metrics.broker_metrics import BrokerMetrics
from tinystream.broker.protocol.api_versions import ApiRange
from tinystream.broker.protocol.codec import ApiSchemas, RequestHeader, build
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.security.authorizer import Authorizer
from tinystream.broker.security.peer import ClientInfo
from tinystream.broker.topics.manager import TopicManager
from tinystream.broker.topics.schema_ids import SchemaIdLookup
from tinystream.config.settings import BrokerSettings
from tinystream.scram_users import UserStore

#: A dispatcher result that closes the connection instead of answering (Kafka
#: does this for a failed acks=0 produce, whose client reads no response).
CLOSE_CONNECTION = object()


@dataclass(frozen=True, slots=True)
class BrokerContext:
    """Built once, by `app` (broker/assembly/), and never changed: local or controller mode chose the parts."""

    settings: BrokerSettings
    cluster: ClusterView
    topics: TopicManager
    replicas: ReplicaManager
    producer_ids: ProducerIdManager
    metrics: BrokerMetrics
    advertised: tuple[ApiRange, ...]
    # Where CreateAcls / DeleteAcls / AlterUserScramCredentials take effect (control/access.py): a file beside
    # this broker's metadata, or the controller.
    access: AccessAdmin
    # The SCRAM users this broker authenticates (sasl.users.file, plus the image's credentials).
    users: UserStore
    # The listener brokers use (replication, transaction markers): only there may a request act as a broker.
    inter_broker_listener: str
    # Principals that may act as brokers on it (security/listener.py broker_principals); empty where that
    # listener authenticates no one: then no client is a broker, whatever it claims.
    broker_principals: frozenset[str]
    # Incremental fetch sessions (KIP-227), sized from max.incremental.fetch.session.cache.slots.
    fetch_sessions: FetchSessionManager
    groups: GroupService | None = None  # None when the broker runs without a group coordinator
    transactions: TransactionService | None = None  # None without a group coordinator (offsets need one)
    control: ControllerSession | None = None  # set with controller.url: the session and its applied image
    forwarding: ForwardedTopicAdmin | None = None  # set with controller.url: topic admin goes to the controller
    # authorizer.class.name set: the ACL authorizer (its ACLs come from the controller's image, or from
    # acls.json in the metadata dir for a broker without a controller); None: everything is allowed.
    authorizer: Authorizer | None = None
    # Client quotas (control/quotas.py): what AlterClientQuotas stores and Produce / Fetch are throttled by.
    quotas: ClientQuotas = field(default_factory=lambda: ClientQuotas(None))
    # confluent.schema.registry.url set: what registry-validated topics ask about schema ids (cached).
    schema_ids: SchemaIdLookup | None = None
    # Dynamic broker configs (control/broker_configs.py); None: every broker config is static.
    broker_configs: BrokerConfigs | None = None

    def from_broker(self, client: ClientInfo) -> bool:
        """Whether `client` may act as a broker: a follower's Fetch with its replica_id, WriteTxnMarkers, ...

        Only a client that proved it is a broker: logged in (SASL or a client certificate) as a broker
        principal, on the inter-broker listener (CVE-2018-1288: a client on any other listener never
        is). A listener that authenticates no one proves nothing, so on it no client is a broker.
        """
        if client.listener != self.inter_broker_listener:
            return False
        return client.auth.principal in self.broker_principals


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
