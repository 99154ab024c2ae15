"""Typed settings per component, named with Kafka's dotted keys.

Each model is a pydantic model whose field aliases are the Kafka names
(`log.segment.bytes`), so values from any layer validate by their public
name and code reads them as attributes (`settings.log_segment_bytes`).
Ranges follow Kafka's own validators (KafkaConfig / TopicConfig) where one
exists; defaults follow Kafka's, except where a laptop needs a smaller one,
which the field's comment says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

WEEK_MS = 7 * 24 * 3600 * 1000

#: Kafka's per-listener prefix: `listener.name.<listener>.<setting>` overrides `<setting>` on that listener.
LISTENER_PREFIX = "listener.name."
#: The settings a listener may set for itself (Kafka allows its ssl.*, sasl.* and connection limits so).
PER_LISTENER_KEYS = (
    "ssl.keystore.location", "ssl.truststore.location", "ssl.client.auth", "ssl.principal.mapping.rules",
    "sasl.enabled.mechanisms", "sasl.users.file", "max.connections", "max.connections.per.ip",
    "connections.max.idle.ms", "connections.max.reauth.ms",
)


def listener_key(key: str) -> tuple[str, str] | None:
    """`listener.name.replication.ssl.client.auth` -> ("REPLICATION", "ssl.client.auth"); None for other keys.

    Listener names hold no dots (Kafka: letters, digits, `_`), so the split is unambiguous; Kafka
    writes the name lower-case in the prefix and upper-case in `listeners`: names compare upper-cased.
    """
    if not key.startswith(LISTENER_PREFIX):
        return None
    name, dot, setting = key[len(LISTENER_PREFIX):].partition(".")
    if not name or not dot or setting not in PER_LISTENER_KEYS:
        return None
    return name.upper(), setting


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

    @classmethod
    def accepts(cls, key: str) -> bool:
        """Whether `key` is one of this component's settings (the layers refuse the others)."""
        return key in cls.keys()

    @classmethod
    def env_keys(cls, environ: Mapping[str, str]) -> dict[str, str]:
        """Settings named in the environment beyond the fixed `keys()`: key -> variable (none by default)."""
        return {}

    def as_public(self) -> dict[str, object]:
        return self.model_dump(by_alias=True)


class BrokerSettings(ComponentSettings):
    """A broker's settings (Kafka's server.properties names).

    Besides its fields it takes Kafka's per-listener keys, `listener.name.<listener>.<setting>` for the
    settings in PER_LISTENER_KEYS (kept as pydantic extras; `for_listener` resolves them).
    """

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    broker_id: int = kafka_field(0, "broker.id", ge=0)
    broker_rack: str | None = kafka_field(None, "broker.rack")
    # A file whose first line is broker.rack, read at start-up when broker.rack is unset (Kubernetes: the
    # node's zone label, written by the pod's `rack` init container; empty: no rack).
    broker_rack_file: str | None = kafka_field(None, "broker.rack.file")
    host: str = kafka_field("127.0.0.1", "host")
    port: int = kafka_field(9092, "port", ge=0, le=65535)
    advertised_host: str | None = kafka_field(None, "advertised.host")
    advertised_port: int | None = kafka_field(None, "advertised.port", ge=1, le=65535)
    admin_port: int = kafka_field(0, "admin.port", ge=0, le=65535)  # 0: pick a free port
    admin_token_file: str | None = kafka_field(None, "admin.token.file")  # set: admin HTTP needs this bearer token
    # With admin.token.file: /metrics open too (a Prometheus that scrapes without the token; the network decides).
    admin_metrics_public: bool = kafka_field(False, "admin.metrics.public")
    log_dirs: str = kafka_field("./data", "log.dirs", min_length=1)
    controller_url: str | None = kafka_field(None, "controller.url")
    # The bearer token this broker shows the controller API (tinystream/controller_auth.py);
    # "{broker_id}" in the path is replaced, so one mounted folder can hold every broker's token.
    controller_token_file: str | None = kafka_field(None, "controller.token.file")
    # An https controller.url is verified against these CAs (PEM); unset: the system's CAs.
    controller_ssl_truststore_location: str | None = kafka_field(None, "controller.ssl.truststore.location")

    # Security (broker/security/listener_config.py): listeners=CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9094
    # (unset: PLAINTEXT on host:port); replication runs on inter.broker.listener.name, or on the listener named
    # as security.inter.broker.protocol, or on the only listener there is.
    listeners: str | None = kafka_field(None, "listeners")
    advertised_listeners: str | None = kafka_field(None, "advertised.listeners")
    inter_broker_listener_name: str | None = kafka_field(None, "inter.broker.listener.name")
    security_inter_broker_protocol: str | None = kafka_field(
        None, "security.inter.broker.protocol", pattern="^(PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL)$")
    listener_security_protocol_map: str = kafka_field(
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "listener.security.protocol.map")
    ssl_keystore_location: str | None = kafka_field(None, "ssl.keystore.location")  # PEM: certificate chain + key
    ssl_truststore_location: str | None = kafka_field(None, "ssl.truststore.location")  # PEM: trusted CAs
    ssl_client_auth: str = kafka_field("none", "ssl.client.auth", pattern="^(none|requested|required)$")
    # mTLS principal from the certificate's subject DN (Kafka's syntax: DEFAULT, RULE:^CN=(.*?),.*$/$1/L, ...).
    ssl_principal_mapping_rules: str = kafka_field("DEFAULT", "ssl.principal.mapping.rules")
    # How often the keystore and truststore files are checked for a new certificate (0: never). Not a Kafka key:
    # Kafka reloads on a dynamic config change; a mounted Kubernetes Secret changes on disk instead.
    ssl_reload_interval_ms: int = kafka_field(5000, "ssl.reload.interval.ms", ge=0)
    sasl_enabled_mechanisms: str = kafka_field("SCRAM-SHA-256,SCRAM-SHA-512", "sasl.enabled.mechanisms")
    sasl_users_file: str | None = kafka_field(None, "sasl.users.file")  # salted SCRAM credentials (users add)
    sasl_mechanism_inter_broker_protocol: str = kafka_field("SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol")
    inter_broker_sasl_username: str | None = kafka_field(None, "inter.broker.sasl.username")
    inter_broker_sasl_password_file: str | None = kafka_field(None, "inter.broker.sasl.password.file")
    # A refused login is answered, then the connection closes this much later (Kafka's default 100 ms).
    connection_failed_authentication_delay_ms: int = kafka_field(100, "connection.failed.authentication.delay.ms", ge=0)
    # The largest frame a connection may send before it has logged in (Kafka's default, 512 KiB): an
    # unauthenticated peer cannot make the broker buffer a socket.request.max.bytes request.
    sasl_server_max_receive_size: int = kafka_field(524_288, "sasl.server.max.receive.size", ge=8)
    # KIP-368: a SASL login lasts this long; the client must log in again on the connection before it ends
    # or the connection is closed at its next request (0, Kafka's default: a login lasts the connection).
    connections_max_reauth_ms: int = kafka_field(0, "connections.max.reauth.ms", ge=0)
    super_users: str = kafka_field("", "super.users")  # "User:CN=broker;User:admin": brokers (mTLS) and admins
    # ACLs (broker/security/authorizer.py): Kafka's org.apache.kafka.metadata.authorizer.StandardAuthorizer (or
    # "acl") turns them on; empty (the default, as Kafka's) allows everything. Once on, a resource no ACL names
    # is refused unless allow.everyone.if.no.acl.found (Kafka's default false).
    authorizer_class_name: str = kafka_field("", "authorizer.class.name")
    allow_everyone_if_no_acl_found: bool = kafka_field(False, "allow.everyone.if.no.acl.found")

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
    # Partitions one broker may host (KIP-578's name; the controller's cluster-wide max.partitions is 20,000):
    # each holds a file descriptor (and one more per sealed segment), and a broker must be able to open them
    # all again when it restarts.
    max_broker_partitions: int = kafka_field(10_000, "max.broker.partitions", ge=1)
    default_replication_factor: int = kafka_field(1, "default.replication.factor", ge=1)
    delete_topic_enable: bool = kafka_field(True, "delete.topic.enable")
    # The schema registry (Confluent's REST API) that topics with confluent.value/key.schema.validation
    # check record schema ids against (Confluent Server's name); unset: such topics refuse produce.
    confluent_schema_registry_url: str | None = kafka_field(
        None, "confluent.schema.registry.url", pattern=r"^https?://[^\s/]+(/\S*)?$")
    # A file holding `user:password` for that registry's HTTP Basic login (Confluent's
    # confluent.basic.auth.user.info, kept in a file as inter.broker.sasl.password.file is); read again when it changes.
    confluent_basic_auth_user_info_file: str | None = kafka_field(None, "confluent.basic.auth.user.info.file", min_length=1)

    # Network.
    socket_request_max_bytes: int = kafka_field(104_857_600, "socket.request.max.bytes", ge=1)
    max_connections: int = kafka_field(1000, "max.connections", ge=1)
    # The most a Fetch answer may hold, whatever the client asks (Kafka's broker fetch.max.bytes, 55 MiB).
    fetch_max_bytes: int = kafka_field(57_671_680, "fetch.max.bytes", ge=1024)
    # Incremental fetch sessions kept (KIP-227; Kafka's default 1000). 0: none, every fetch is a full fetch.
    max_incremental_fetch_session_cache_slots: int = kafka_field(
        1000, "max.incremental.fetch.session.cache.slots", ge=0)
    # Client quotas' sampled rate (Kafka's ClientQuotaManager): this many samples...
    quota_window_num: int = kafka_field(11, "quota.window.num", ge=2)
    # ... of this many seconds each (a fresh client may burst quota x (samples - 1) x this).
    quota_window_size_seconds: int = kafka_field(1, "quota.window.size.seconds", ge=1)
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
    # KIP-848 consumer groups: the server owns the session and tells members how often to heartbeat.
    group_consumer_session_timeout_ms: int = kafka_field(45_000, "group.consumer.session.timeout.ms", ge=1)
    group_consumer_heartbeat_interval_ms: int = kafka_field(5_000, "group.consumer.heartbeat.interval.ms", ge=1)
    # The server-side assignors members may ask for; the first is the default (Kafka: uniform, range).
    group_consumer_assignors: str = kafka_field(
        "uniform,range", "group.consumer.assignors", pattern=r"^\s*(uniform|range)\s*(,\s*(uniform|range)\s*)*$"
    )

    # Transactions and the transaction state topic (KIP-98).
    transaction_state_log_num_partitions: int = kafka_field(50, "transaction.state.log.num.partitions", ge=1)
    # Kafka: 3; 1 fits one laptop broker (as offsets.topic.replication.factor here)
    transaction_state_log_replication_factor: int = kafka_field(1, "transaction.state.log.replication.factor", ge=1)
    transaction_max_timeout_ms: int = kafka_field(900_000, "transaction.max.timeout.ms", ge=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = kafka_field(
        10_000, "transaction.abort.timed.out.transaction.cleanup.interval.ms", ge=1
    )
    transactional_id_expiration_ms: int = kafka_field(604_800_000, "transactional.id.expiration.ms", ge=1)

    # Replication: followers, the ISR and the heartbeat to the controller.
    replica_lag_time_max_ms: int = kafka_field(30_000, "replica.lag.time.max.ms", ge=1)
    replica_fetch_max_bytes: int = kafka_field(1_048_576, "replica.fetch.max.bytes", ge=1)
    # KIP-392: where a consumer (Fetch v11+, client.rack) reads. Unset (Kafka's default) or LeaderSelector: the
    # leader. RackAwareReplicaSelector: an in-sync replica in the client's rack (docs/operations.md).
    replica_selector_class: Literal["org.apache.kafka.common.replica.RackAwareReplicaSelector",
                                    "org.apache.kafka.common.replica.LeaderSelector"] | None = kafka_field(
        None, "replica.selector.class")
    # Replication throttle (KIP-73, dynamic), bytes/s: as leader, serve the replicas a topic's
    # leader.replication.throttled.replicas lists, while out of the ISR, within this rate (default: none).
    leader_replication_throttled_rate: int = kafka_field(2**63 - 1, "leader.replication.throttled.rate", ge=0)
    # As follower, fetch the replicas follower.replication.throttled.replicas lists, while behind the
    # leader's high watermark, within this rate (dynamic, bytes/s; default: none).
    follower_replication_throttled_rate: int = kafka_field(2**63 - 1, "follower.replication.throttled.rate", ge=0)
    # The throttles' sampled rate: this many samples...
    replication_quota_window_num: int = kafka_field(11, "replication.quota.window.num", ge=2)
    # ... of this many seconds each (Kafka's defaults).
    replication_quota_window_size_seconds: int = kafka_field(1, "replication.quota.window.size.seconds", ge=1)
    broker_heartbeat_interval_ms: int = kafka_field(2000, "broker.heartbeat.interval.ms", ge=1)

    @model_validator(mode="after")
    def _only_listener_keys_extra(self) -> BrokerSettings:
        unknown = [key for key in self.model_extra or {} if listener_key(key) is None]
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown} (per-listener keys are listener.name.<listener>."
                             f"<setting> for {', '.join(PER_LISTENER_KEYS)})")
        for name in {listener_key(key)[0] for key in self.model_extra or {}}:  # type: ignore[index]
            self.for_listener(name)  # a bad per-listener value is refused now, naming its key
        return self

    @classmethod
    def accepts(cls, key: str) -> bool:
        return key in cls.keys() or listener_key(key) is not None

    @classmethod
    def env_keys(cls, environ: Mapping[str, str]) -> dict[str, str]:
        """TINYSTREAM_LISTENER_NAME_<LISTENER>_<SETTING>, e.g. ..._REPLICATION_SSL_CLIENT_AUTH."""
        prefix = "TINYSTREAM_LISTENER_NAME_"
        found: dict[str, str] = {}
        for variable in environ:
            if not variable.startswith(prefix):
                continue
            for setting in PER_LISTENER_KEYS:
                suffix = "_" + setting.upper().replace(".", "_")
                name = variable[len(prefix):-len(suffix)] if variable.endswith(suffix) else ""
                if name:
                    found[f"{LISTENER_PREFIX}{name.lower()}.{setting}"] = variable
        return found

    def listener_overrides(self, listener: str) -> dict[str, Any]:
        """The `listener.name.<listener>.*` values, keyed by the setting they override."""
        out = {}
        for key, value in (self.model_extra or {}).items():
            parsed = listener_key(key)
            if parsed is not None and parsed[0] == listener.upper():
                out[parsed[1]] = value
        return out

    def for_listener(self, listener: str) -> BrokerSettings:
        """These settings as `listener` sees them: its listener.name.* values over the global ones."""
        overrides = self.listener_overrides(listener)
        if not overrides:
            return self
        values = {key: value for key, value in self.model_dump(by_alias=True).items() if listener_key(key) is None}
        try:
            return type(self).model_validate({**values, **overrides})
        except ValueError as exc:
            raise ValueError(f"listener.name.{listener.lower()}.*: {exc}") from None


class ControllerSettings(ComponentSettings):
    """The local controller driver (`tinystream controller`)."""

    host: str = kafka_field("127.0.0.1", "host")
    port: int = kafka_field(9091, "port", ge=0, le=65535)
    dashboard_enabled: bool = kafka_field(True, "dashboard.enabled")
    dashboard_port: int = kafka_field(3200, "dashboard.port", ge=0, le=65535)
    state_file: str = kafka_field("./data/controller/state.json", "state.file", min_length=1)
    # The secret that signs API tokens; made (0600) beside the state file when missing.
    secret_file: str | None = kafka_field(None, "controller.secret.file")
    # Set: the API is HTTPS with this certificate chain and key (PEM); brokers name its CA in
    # controller.ssl.truststore.location.
    ssl_keystore_location: str | None = kafka_field(None, "controller.ssl.keystore.location")
    broker_session_timeout_ms: int = kafka_field(9000, "broker.session.timeout.ms", ge=1)
    default_replication_factor: int = kafka_field(1, "default.replication.factor", ge=1)
    num_partitions: int = kafka_field(1, "num.partitions", ge=1, le=10_000)
    # Partitions one broker may host (KIP-578's name; the controller's cluster-wide max.partitions is 20,000):
    # each holds a file descriptor (and one more per sealed segment), and a broker must be able to open them
    # all again when it restarts.
    max_broker_partitions: int = kafka_field(10_000, "max.broker.partitions", ge=1)
    max_partitions: int = kafka_field(20_000, "max.partitions", ge=1)  # in the whole cluster (KIP-578)


class OperatorSettings(ComponentSettings):
    """The kopf operator driver."""

    namespace: str | None = kafka_field(None, "namespace")  # None: all namespaces
    controller_port: int = kafka_field(9091, "controller.port", ge=1, le=65535)
    # HTTPS on the controller port, each cluster's certificate from its own CA (operator/k8s/controller_tls.py).
    controller_tls_enabled: bool = kafka_field(True, "controller.tls.enabled")
    dashboard_port: int = kafka_field(3200, "dashboard.port", ge=0, le=65535)
    broker_session_timeout_ms: int = kafka_field(9000, "broker.session.timeout.ms", ge=1)
    reconcile_interval_s: int = kafka_field(30, "reconcile.interval.s", ge=1)
    # How often a TinyStreamUser's Secret is made again when deleted, and its certificate renewed when due
    # (also on every change of the user and at operator start-up).
    user_secret_interval_s: int = kafka_field(60, "user.secret.check.interval.s", ge=1)
    # The master secret each cluster's controller API secret is derived from (controller_secret.py), in a
    # file (local runs). Unset, and no controller.secret.ref: ~/.tinystream/operator-controller.secret, made
    # when missing.
    secret_file: str | None = kafka_field(None, "controller.secret.file")
    # Or a Secret "<namespace>/<name>" (key `secret`) the operator reads, and makes once when missing
    # (operator/k8s/master_secret.py); the chart sets this, so no render of it ever holds a new secret.
    secret_ref: str | None = kafka_field(None, "controller.secret.ref")
    # The dashboard's login token: a Secret "<namespace>/<name>" (key `token`) made once like the master
    # secret (the chart sets it). Unset: the file operator-dashboard.token (0600, made once) beside the
    # master secret's file.
    dashboard_login_ref: str | None = kafka_field(None, "dashboard.login.ref")


COMPONENTS: dict[str, type[ComponentSettings]] = {
    "broker": BrokerSettings,
    "controller": ControllerSettings,
    "operator": OperatorSettings,
}
