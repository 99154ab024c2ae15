"""What a listener needs at run time: its TLS context, its SASL users, who counts as a broker on it.

The listeners themselves (names, addresses, per-listener settings) come from `listener_config.py`:

    listeners                                  CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9094
    listener.security.protocol.map             CLIENT:SASL_SSL,REPLICATION:SSL
    ssl.keystore.location                      PEM: the broker's certificate chain and key
    ssl.truststore.location                    PEM: CAs trusted for client certificates and other brokers
    ssl.client.auth                            none, requested or required (mTLS)
    ssl.principal.mapping.rules                DEFAULT, RULE:^CN=(.*?),.*$/$1/L, ... (principal.py)
    sasl.enabled.mechanisms, sasl.users.file   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; salted credentials
    listener.name.<listener>.<one of those>    that listener's own value

Replication and the transaction-marker channel connect to the inter-broker listener of the other
brokers (`InterBrokerCredentials`: its truststore, our certificate when it asks for one, and the
inter-broker SASL user). A Fetch's replica_id is believed only on that listener, and there only from a
broker principal (`broker_principals`; handlers/fetch.py): a listener that authenticates no one has
no broker principals, so nothing on it acts as a broker. The broker
principals are also the authorizer's super users: `super_users` is the one rule for both.

TLS contexts reload when their files change (`tls_reload.py`).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from tinystream.broker.security.authorizer import parse_super_users
from tinystream.broker.security.listener_config import Listener, ListenerConfigError, mechanisms
from tinystream.broker.security.tls_reload import ReloadingContext
from tinystream.config.settings import BrokerSettings
from tinystream.scram_users import UserStore
from tinystream.tls_principal import PrincipalMapper, PrincipalMappingError

_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def load_users(settings: BrokerSettings) -> UserStore:
    """The SCRAM users of sasl.users.file; the inter-broker user's credential is the file's alone."""
    store = UserStore.load(settings.sasl_users_file) if settings.sasl_users_file else UserStore()
    store.file_only = protected_users(settings)
    return store


def protected_users(settings: BrokerSettings) -> frozenset[str]:
    """User names no client may create, change or delete credentials for: the brokers' own."""
    return frozenset({settings.inter_broker_sasl_username} if settings.inter_broker_sasl_username else ())


def server_ssl_context(settings: BrokerSettings) -> ssl.SSLContext:
    """A listener's server context from its keystore, truststore and ssl.client.auth."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    assert settings.ssl_keystore_location is not None
    context.load_cert_chain(settings.ssl_keystore_location)
    if settings.ssl_truststore_location:
        context.load_verify_locations(settings.ssl_truststore_location)
    context.verify_mode = _VERIFY[settings.ssl_client_auth]
    return context


def reloading_server_context(listener: Listener) -> ReloadingContext:
    s = listener.settings
    return ReloadingContext(lambda: server_ssl_context(s), (s.ssl_keystore_location or "", s.ssl_truststore_location or ""),
                            name=f"listener {listener.name}", server=True)


def principal_mapper(listener: Listener) -> PrincipalMapper:
    try:
        return PrincipalMapper.parse(listener.settings.ssl_principal_mapping_rules)
    except PrincipalMappingError as exc:
        raise ListenerConfigError(f"listener {listener.name}: {exc}") from None


def client_ssl_context(settings: BrokerSettings, *, present_certificate: bool) -> ssl.SSLContext:
    """How this broker connects to another's TLS listener: trust its CAs, show our certificate if asked."""
    context = ssl.create_default_context(cafile=settings.ssl_truststore_location)
    if present_certificate:
        assert settings.ssl_keystore_location is not None
        context.load_cert_chain(settings.ssl_keystore_location)
    return context


@dataclass(frozen=True, slots=True)
class InterBrokerCredentials:
    """How this broker connects to the others' inter-broker listener (replica fetchers, transaction markers)."""

    tls: ReloadingContext | None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The context for a new connection (the newest certificates)."""
        return self.tls.current if self.tls is not None else None


def inter_broker_credentials(listener: Listener) -> InterBrokerCredentials:
    s = listener.settings
    tls = None
    if listener.tls:
        present = s.ssl_client_auth != "none"
        tls = ReloadingContext(lambda: client_ssl_context(s, present_certificate=present),
                               (s.ssl_truststore_location or "", s.ssl_keystore_location if present else ""),
                               name=f"inter-broker client of {listener.name}")
    if not listener.sasl:
        return InterBrokerCredentials(tls)
    if not s.inter_broker_sasl_username or not s.inter_broker_sasl_password_file:
        raise ListenerConfigError(f"listener {listener.name} ({listener.protocol}): replication needs "
                                  "inter.broker.sasl.username and inter.broker.sasl.password.file")
    if s.sasl_mechanism_inter_broker_protocol not in mechanisms(s):
        raise ListenerConfigError(f"sasl.mechanism.inter.broker.protocol={s.sasl_mechanism_inter_broker_protocol} "
                                  f"is not enabled on listener {listener.name}")
    password = Path(s.inter_broker_sasl_password_file).read_text().strip()
    return InterBrokerCredentials(tls, s.sasl_mechanism_inter_broker_protocol, s.inter_broker_sasl_username, password)


def super_users(settings: BrokerSettings) -> frozenset[str]:
    """The broker principals: `super.users` and the inter-broker SASL user (the brokers' own name).

    The one rule for both places that ask: the authorizer lets them do anything (Kafka's super users,
    authorizer.py), and on an authenticating inter-broker listener only they may act as a broker
    (`broker_principals`)."""
    found = parse_super_users(settings.super_users)
    if settings.inter_broker_sasl_username:
        found |= {f"User:{settings.inter_broker_sasl_username}"}
    return found


def broker_principals(listener: Listener) -> frozenset[str]:
    """Who may act as a broker on the inter-broker listener: its `super_users`; no one where the listener
    authenticates no one (an unproven claim to be a broker is never believed)."""
    return super_users(listener.settings) if listener.authenticates else frozenset()
