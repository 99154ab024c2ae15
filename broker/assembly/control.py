"""Stage 3: where cluster metadata comes from. One builder per mode, so nothing downstream asks which.

- Local (no controller.url): topics from this broker's own store; ACLs, SCRAM credentials and client
  quotas in files beside its metadata; producer-id blocks from a file.
- Controller (controller.url): the controller's image drives topics, roles, ACLs, credentials, client
  quotas and dynamic broker configs; topic admin, access, quota and broker config changes are forwarded
  to it; producer-id blocks come from it (KIP-730); followers fetch from leaders on the inter-broker
  listener.

Controller mode is built in two steps: the session needs the coordinators (it applies the image to them),
and the coordinators need the producer ids that the session hands out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinystream.broker.assembly.security import Security
from tinystream.broker.assembly.storage import Storage
from tinystream.broker.control.access import AccessAdmin, ForwardedAccessAdmin, LocalAccessAdmin
from tinystream.broker.control.broker_configs import BrokerConfigs
from tinystream.broker.control.forwarding import ForwardedTopicAdmin
from tinystream.broker.control.image import ImageApplier
from tinystream.broker.control.quotas import ClientQuotas
from tinystream.broker.control.session import ControllerSession
from tinystream.broker.coordinators.group_service import GroupService
from tinystream.broker.coordinators.producer_ids import ControllerBlockSource, FileBlockSource, ProducerIdManager
from tinystream.broker.coordinators.txn_service import TransactionService
from tinystream.broker.replication.hw_checkpoint import HighWatermarkCheckpoint
from tinystream.broker.replication.replica_fetcher import ReplicaFetcherManager
from tinystream.broker.security.listener import InterBrokerCredentials, inter_broker_credentials
from tinystream.config.settings import BrokerSettings
from tinystream.controller_auth import TokenFile
from tinystream.controller_client import ControllerClient, controller_ssl_context


@dataclass(frozen=True, slots=True)
class Control:
    """The mode's parts; the three optional ones exist in controller mode only."""

    access: AccessAdmin  # where CreateAcls / DeleteAcls / AlterUserScramCredentials take effect
    producer_ids: ProducerIdManager
    quotas: ClientQuotas  # the client quotas enforced: from quotas.json, or from the controller's image
    session: ControllerSession | None = None
    forwarding: ForwardedTopicAdmin | None = None  # topic admin goes to the controller
    credentials: InterBrokerCredentials | None = None  # how replica fetchers and markers reach other brokers
    fetchers: ReplicaFetcherManager | None = None  # followers fetching from their leaders


class LocalControl:
    """No controller: everything from files beside this broker's metadata."""

    def __init__(self, settings: BrokerSettings, storage: Storage, security: Security) -> None:
        self._storage, self._security = storage, security
        self.quotas = ClientQuotas(storage.logs.metadata_dir, **quota_windows(settings))
        self.producer_ids = ProducerIdManager(FileBlockSource(storage.logs.metadata_dir))

    def finish(self, groups: GroupService | None, transactions: TransactionService | None) -> Control:
        """The coordinators are the controller mode's business (its image drives them); here only files."""
        access = LocalAccessAdmin(self._storage.logs.metadata_dir, authorizer=self._security.authorizer,
                                  users=self._security.users)
        return Control(access=access, producer_ids=self.producer_ids, quotas=self.quotas)


class ControllerControl:
    """Replicated mode: a session with the controller, which hands out producer-id blocks (`finish` makes it)."""

    def __init__(self, settings: BrokerSettings, storage: Storage, security: Security,
                 clock: Callable[[], int], *, on_fatal: Callable[[str], None],
                 broker_configs: BrokerConfigs | None = None) -> None:
        assert settings.controller_url
        self.broker_configs = broker_configs  # the image's default and this broker's layer; alters are forwarded
        self._settings, self._storage, self._security, self._clock = settings, storage, security, clock
        self._on_fatal = on_fatal
        storage.replicas.use_hw_checkpoint(HighWatermarkCheckpoint(storage.logs.metadata_dir))
        self.credentials = inter_broker_credentials(security.plan.inter_broker)
        self.controller = ControllerClient(
            settings.controller_url, token=controller_token(settings),
            ssl_context=controller_ssl_context(settings.controller_url, settings.controller_ssl_truststore_location))
        self.fetchers = ReplicaFetcherManager(
            broker_id=settings.broker_id, replicas=storage.replicas, cluster=storage.cluster,
            max_bytes=settings.replica_fetch_max_bytes, credentials=self.credentials)
        self._session: ControllerSession | None = None
        self.quotas = ClientQuotas(None, **quota_windows(settings))  # the image's; AlterClientQuotas is forwarded
        # KIP-730: the controller hands out disjoint blocks; a file per broker would not be.
        self.producer_ids = ProducerIdManager(ControllerBlockSource(self._allocate_producer_ids))

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        assert self._session is not None, "producer ids asked for before the broker was assembled"
        return await self._session.allocate_producer_ids()

    def finish(self, groups: GroupService | None, transactions: TransactionService | None) -> Control:
        s, storage, clock = self._settings, self._storage, self._clock
        if transactions is not None:  # WriteTxnMarkers and KIP-890 verification go to the inter-broker listener
            transactions.markers.credentials = self.credentials
        applier = ImageApplier(broker_id=s.broker_id, cluster=storage.cluster, topics=storage.topics,
                               replicas=storage.replicas, fetchers=self.fetchers, groups=groups, clock=clock,
                               transactions=transactions, authorizer=self._security.authorizer,
                               users=self._security.users, quotas=self.quotas, broker_configs=self.broker_configs)
        session = ControllerSession(
            settings=s, controller=self.controller, cluster=storage.cluster, topics=storage.topics,
            replicas=storage.replicas, fetchers=self.fetchers, applier=applier, clock=clock,
            adopt_cluster_id=lambda cluster_id: storage.adopt_cluster_id(s.broker_id, cluster_id),
            on_fatal=self._on_fatal,
        )
        self._session = session
        forwarding = ForwardedTopicAdmin(settings=s, controller=self.controller, session=session,
                                         cluster=storage.cluster, topics=storage.topics)
        # ACLs and SCRAM credentials are cluster metadata: changed through the controller, applied from its image.
        access = ForwardedAccessAdmin(controller=self.controller, session=session)
        return Control(access=access, producer_ids=self.producer_ids, quotas=self.quotas, session=session,
                       forwarding=forwarding, credentials=self.credentials, fetchers=self.fetchers)


def quota_windows(settings: BrokerSettings) -> dict[str, int]:
    """quota.window.num samples of quota.window.size.seconds, as Kafka measures every quota."""
    return {"samples": settings.quota_window_num, "window_ms": settings.quota_window_size_seconds * 1000}


def controller_token(settings: BrokerSettings) -> TokenFile | None:
    """This broker's controller API token (controller.token.file, "{broker_id}" filled in), read again
    when the file changes (on Kubernetes the kubelet rotates the pod's own token in it)."""
    path = settings.controller_token_file
    if not path:
        return None
    token = TokenFile(path.replace("{broker_id}", str(settings.broker_id)))
    token()  # a missing or empty file stops the start here, with its name
    return token
