"""Typed settings per component, named with Kafka's dotted keys.

Each model is a pydantic model whose field aliases are the Kafka names
(`log.segment.bytes`), so values from any layer validate by their public
name and code reads them as attributes (`settings.log_segment_bytes`).
Ranges follow Kafka's own validators (KafkaConfig / TopicConfig) where one
exists; defaults follow Kafka's, except where a laptop needs a smaller one,
which the field's comment says.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

WEEK_MS = 7 * 24 * 3600 * 1000


def kafka_field(default: Any, alias: str, **constraints: Any) -> Any:
    """A field whose public (layer) name is the Kafka key `alias`."""
    return Field(default, alias=alias, **constraints)


class ComponentSettings(BaseModel):
    """Base: frozen, unknown keys refused, populated by Kafka names."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @classmethod
    def keys(cls) -> dict[str, str]:
        """Public key -> attribute name."""
        return {(f.alias or name): name for name, f in cls.model_fields.items()}

    def as_public(self) -> dict[str, object]:
        return self.model_dump(by_alias=True)


class BrokerSettings(ComponentSettings):
    """A broker's settings (Kafka's server.properties names)."""

    broker_id: int = kafka_field(0, "broker.id", ge=0)
    broker_rack: str | None = kafka_field(None, "broker.rack")
    host: str = kafka_field("127.0.0.1", "host")
    port: int = kafka_field(9092, "port", ge=0, le=65535)
    advertised_host: str | None = kafka_field(None, "advertised.host")
    advertised_port: int | None = kafka_field(None, "advertised.port", ge=1, le=65535)
    admin_port: int = kafka_field(0, "admin.port", ge=0, le=65535)  # 0: pick a free port
    admin_token_file: str | None = kafka_field(None, "admin.token.file")  # set: admin HTTP needs this bearer token
    log_dirs: str = kafka_field("./data", "log.dirs", min_length=1)
    controller_url: str | None = kafka_field(None, "controller.url")
    # The bearer token this broker shows the controller API (tinystream/controller_auth.py);
    # "{broker_id}" in the path is replaced, so one mounted folder can hold every broker's token.
    controller_token_file: str | None = kafka_field(None, "controller.token.file")

    # Security (broker/security): one client listener, e.g. listeners=SASL_SSL://0.0.0.0:9093 (it then
    # replaces host and port); replication runs on it too, as the inter-broker user.
    listeners: str | None = kafka_field(None, "listeners")
    listener_security_protocol_map: str = kafka_field(
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "listener.security.protocol.map")
    ssl_keystore_location: str | None = kafka_field(None, "ssl.keystore.location")  # PEM: certificate chain + key
    ssl_truststore_location: str | None = kafka_field(None, "ssl.truststore.location")  # PEM: trusted CAs
    ssl_client_auth: str = kafka_field("none", "ssl.client.auth", pattern="^(none|requested|required)$")
    sasl_enabled_mechanisms: str = kafka_field("SCRAM-SHA-256,SCRAM-SHA-512", "sasl.enabled.mechanisms")
    sasl_users_file: str | None = kafka_field(None, "sasl.users.file")  # salted SCRAM credentials (users add)
    sasl_mechanism_inter_broker_protocol: str = kafka_field("SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol")
    inter_broker_sasl_username: str | None = kafka_field(None, "inter.broker.sasl.username")
    inter_broker_sasl_password_file: str | None = kafka_field(None, "inter.broker.sasl.password.file")
    super_users: str = kafka_field("", "super.users")  # "User:CN=broker;User:admin": brokers (mTLS) and admins

    # Log defaults for topics (Kafka: log.* broker keys feed the topic configs).
    log_segment_bytes: int = kafka_field(1024**3, "log.segment.bytes", ge=14)
    log_roll_ms: int = kafka_field(WEEK_MS, "log.roll.ms", ge=1)
    log_retention_ms: int = kafka_field(WEEK_MS, "log.retention.ms", ge=-1)
    log_retention_bytes: int = kafka_field(-1, "log.retention.bytes", ge=-1)
    log_retention_check_interval_ms: int = kafka_field(300_000, "log.retention.check.interval.ms", ge=1)
    log_cleanup_policy: Literal["delete", "compact", "compact,delete", "delete,compact"] = kafka_field(
        "delete", "log.cleanup.policy"
    )
    log_cleaner_delete_retention_ms: int = kafka_field(86_400_000, "log.cleaner.delete.retention.ms", ge=0)
    log_cleaner_backoff_ms: int = kafka_field(15_000, "log.cleaner.backoff.ms", ge=0)
    log_index_interval_bytes: int = kafka_field(4096, "log.index.interval.bytes", ge=0)
    log_flush_interval_messages: int | None = kafka_field(None, "log.flush.interval.messages", ge=1)
    log_flush_interval_ms: int | None = kafka_field(None, "log.flush.interval.ms", ge=0)
    log_message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = kafka_field(
        "CreateTime", "log.message.timestamp.type"
    )
    message_max_bytes: int = kafka_field(1_048_588, "message.max.bytes", ge=0)
    min_insync_replicas: int = kafka_field(1, "min.insync.replicas", ge=1)

    # Topics.
    auto_create_topics_enable: bool = kafka_field(True, "auto.create.topics.enable")
    num_partitions: int = kafka_field(1, "num.partitions", ge=1, le=10_000)
    default_replication_factor: int = kafka_field(1, "default.replication.factor", ge=1)
    delete_topic_enable: bool = kafka_field(True, "delete.topic.enable")

    # Network.
    socket_request_max_bytes: int = kafka_field(104_857_600, "socket.request.max.bytes", ge=1)
    max_connections: int = kafka_field(1000, "max.connections", ge=1)
    # The most a Fetch answer may hold, whatever the client asks (Kafka's broker fetch.max.bytes, 55 MiB).
    fetch_max_bytes: int = kafka_field(57_671_680, "fetch.max.bytes", ge=1024)
    # Incremental fetch sessions kept (KIP-227; Kafka's default 1000). 0: none, every fetch is a full fetch.
    max_incremental_fetch_session_cache_slots: int = kafka_field(
        1000, "max.incremental.fetch.session.cache.slots", ge=0)
    # One host may not take every connection (parked sockets would lock followers and clients out).
    max_connections_per_ip: int = kafka_field(250, "max.connections.per.ip", ge=1)
    # Request bytes the broker holds unanswered, all connections together; reading pauses beyond it (-1: no limit).
    queued_max_request_bytes: int = kafka_field(134_217_728, "queued.max.request.bytes", ge=-1)
    connections_max_idle_ms: int = kafka_field(600_000, "connections.max.idle.ms", ge=1)

    # Groups and the offsets topic.
    offsets_topic_num_partitions: int = kafka_field(50, "offsets.topic.num.partitions", ge=1)
    # Kafka: 3; 1 fits one laptop broker
    offsets_topic_replication_factor: int = kafka_field(1, "offsets.topic.replication.factor", ge=1)
    offsets_retention_minutes: int = kafka_field(10080, "offsets.retention.minutes", ge=1)
    group_initial_rebalance_delay_ms: int = kafka_field(3000, "group.initial.rebalance.delay.ms", ge=0)
    group_min_session_timeout_ms: int = kafka_field(6000, "group.min.session.timeout.ms", ge=0)
    group_max_session_timeout_ms: int = kafka_field(1_800_000, "group.max.session.timeout.ms", ge=0)

    # Transactions and the transaction state topic (KIP-98).
    transaction_state_log_num_partitions: int = kafka_field(50, "transaction.state.log.num.partitions", ge=1)
    # Kafka: 3; 1 fits one laptop broker (as offsets.topic.replication.factor here)
    transaction_state_log_replication_factor: int = kafka_field(1, "transaction.state.log.replication.factor", ge=1)
    transaction_max_timeout_ms: int = kafka_field(900_000, "transaction.max.timeout.ms", ge=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = kafka_field(
        10_000, "transaction.abort.timed.out.transaction.cleanup.interval.ms", ge=1
    )
    transactional_id_expiration_ms: int = kafka_field(604_800_000, "transactional.id.expiration.ms", ge=1)

    # Replication (used from the replication issue on).
    replica_lag_time_max_ms: int = kafka_field(30_000, "replica.lag.time.max.ms", ge=1)
    replica_fetch_max_bytes: int = kafka_field(1_048_576, "replica.fetch.max.bytes", ge=1)
    broker_heartbeat_interval_ms: int = kafka_field(2000, "broker.heartbeat.interval.ms", ge=1)


class ControllerSettings(ComponentSettings):
    """The local controller driver (`tinystream controller`)."""

    host: str = kafka_field("127.0.0.1", "host")
    port: int = kafka_field(9091, "port", ge=0, le=65535)
    dashboard_enabled: bool = kafka_field(True, "dashboard.enabled")
    dashboard_port: int = kafka_field(3200, "dashboard.port", ge=0, le=65535)
    state_file: str = kafka_field("./data/controller/state.json", "state.file", min_length=1)
    # The secret that signs API tokens; made (0600) beside the state file when missing.
    secret_file: str | None = kafka_field(None, "controller.secret.file")
    broker_session_timeout_ms: int = kafka_field(9000, "broker.session.timeout.ms", ge=1)
    default_replication_factor: int = kafka_field(1, "default.replication.factor", ge=1)
    num_partitions: int = kafka_field(1, "num.partitions", ge=1, le=10_000)
    max_partitions: int = kafka_field(20_000, "max.partitions", ge=1)  # in the whole cluster (KIP-578)


class OperatorSettings(ComponentSettings):
    """The kopf operator driver."""

    namespace: str | None = kafka_field(None, "namespace")  # None: all namespaces
    controller_port: int = kafka_field(9091, "controller.port", ge=1, le=65535)
    dashboard_port: int = kafka_field(3200, "dashboard.port", ge=0, le=65535)
    broker_session_timeout_ms: int = kafka_field(9000, "broker.session.timeout.ms", ge=1)
    reconcile_interval_s: int = kafka_field(30, "reconcile.interval.s", ge=1)
    # The master secret each cluster's controller API secret is derived from (controller_secret.py);
    # the chart mounts its Secret here. Unset: ~/.tinystream/operator-controller.secret, made when missing.
    secret_file: str | None = kafka_field(None, "controller.secret.file")


COMPONENTS: dict[str, type[ComponentSettings]] = {
    "broker": BrokerSettings,
    "controller": ControllerSettings,
    "operator": OperatorSettings,
}
