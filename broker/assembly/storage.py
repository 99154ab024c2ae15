"""Stage 1: the broker's data: log dirs, the cluster view, replicas, topics and metrics."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tinystream.broker.metadata.cluster import BrokerEndpoint, ClusterView
from tinystream.broker.metadata.topics import TopicStore
from tinystream.broker.metrics.broker_metrics import BrokerMetrics
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.replication.throttle import ReplicationThrottles
from tinystream.broker.security.listener_config import ListenerPlan
from tinystream.broker.storage import meta_properties
from tinystream.broker.storage.log_manager import LogManager
from tinystream.broker.topics.manager import TopicManager
from tinystream.config.settings import BrokerSettings


@dataclass(frozen=True, slots=True)
class Storage:
    logs: LogManager
    cluster: ClusterView
    metrics: BrokerMetrics
    replicas: ReplicaManager
    topics: TopicManager

    def adopt_cluster_id(self, broker_id: int, cluster_id: str) -> None:
        """Under a controller the cluster id is the controller's, learnt at registration."""
        meta_properties.adopt(self.logs.log_dirs, broker_id, cluster_id)
        self.cluster.cluster_id = cluster_id


def log_dirs(settings: BrokerSettings) -> list[Path]:
    return [Path(d.strip()).expanduser() for d in settings.log_dirs.split(",") if d.strip()]


def build_storage(settings: BrokerSettings, plan: ListenerPlan, *, in_memory: bool,
                  clock: Callable[[], int]) -> Storage:
    """Refuses a log dir of another node (meta.properties); without a controller the cluster id is made here."""
    logs = LogManager(log_dirs(settings), in_memory=in_memory)
    if settings.controller_url:  # the controller's id, once registered (Storage.adopt_cluster_id)
        cluster_id = meta_properties.read(logs.log_dirs, settings.broker_id) or ""
    else:
        cluster_id = meta_properties.ensure(logs.log_dirs, settings.broker_id)
    local = BrokerEndpoint(settings.broker_id, settings.advertised_host or settings.host, settings.port,
                           settings.broker_rack)
    cluster = ClusterView(cluster_id=cluster_id, local=local, inter_broker_listener=plan.inter_broker.name)
    metrics = BrokerMetrics(settings.broker_id)
    replicas = ReplicaManager(broker_id=settings.broker_id, log_manager=logs, clock=clock)
    topics = TopicManager(settings=settings, store=TopicStore(logs.metadata_dir), replicas=replicas, cluster=cluster)
    topics.on_topic_deleted.append(lambda spec: metrics.forget_topic(spec.name))
    metrics.watch_partitions(replicas.partitions)
    replicas.throttles = ReplicationThrottles.for_broker(settings, lambda name: _configs(topics, name))
    return Storage(logs=logs, cluster=cluster, metrics=metrics, replicas=replicas, topics=topics)


def _configs(topics: TopicManager, name: str) -> Mapping[str, str] | None:
    """A topic's config overrides, as the replication throttles read them at each fetch."""
    spec = topics.store.get(name)
    return spec.configs if spec is not None else None
