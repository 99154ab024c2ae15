"""The client listener's security, from Kafka's settings: protocol, TLS contexts, SASL mechanisms.

    listeners=SASL_SSL://0.0.0.0:9093         one listener (several are not supported yet)
    listener.security.protocol.map            listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ssl.keystore.location                     PEM: the broker's certificate chain and key
    ssl.truststore.location                   PEM: CAs trusted for client certificates and other brokers
    ssl.client.auth                           none, requested or required (mTLS)
    sasl.enabled.mechanisms, sasl.users.file  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; salted credentials

Replication runs on the same listener, so a follower connects as the
inter-broker user (`InterBrokerCredentials`) and a Fetch's replica_id is
believed only from an authenticated broker principal (see handlers/fetch.py).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from tinystream.broker.security.sasl import SUPPORTED
from tinystream.config.settings import BrokerSettings
from tinystream.scram_users import UserStore

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ListenerConfigError(ValueError):
    """The listener settings cannot work (refused at start-up with this message)."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def client_listener(settings: BrokerSettings) -> Listener:
    """The one client listener: `listeners`, or PLAINTEXT on host:port."""
    if not settings.listeners:
        return Listener("PLAINTEXT", "PLAINTEXT", settings.host, settings.port)
    entries = [e.strip() for e in settings.listeners.split(",") if e.strip()]
    if len(entries) != 1:
        raise ListenerConfigError(f"listeners={settings.listeners!r}: one listener per broker is supported")
    name, sep, address = entries[0].partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise ListenerConfigError(f"listeners={settings.listeners!r}: expected NAME://host:port")
    mapping = dict(item.split(":", 1) for item in settings.listener_security_protocol_map.split(",") if ":" in item)
    protocol = mapping.get(name, name)
    if protocol not in PROTOCOLS:
        raise ListenerConfigError(f"listener {name}: security protocol {protocol!r} is not one of {PROTOCOLS}")
    listener = Listener(name, protocol, host.strip("[]") or "0.0.0.0", int(port))
    _check(listener, settings)
    return listener


def _check(listener: Listener, settings: BrokerSettings) -> None:
    if listener.tls and not settings.ssl_keystore_location:
        raise ListenerConfigError(f"listener {listener.name} ({listener.protocol}) needs ssl.keystore.location")
    if settings.ssl_client_auth != "none" and not settings.ssl_truststore_location:
        raise ListenerConfigError("ssl.client.auth needs ssl.truststore.location (the CAs of client certificates)")
    if listener.sasl:
        unknown = [m for m in mechanisms(settings) if m not in SUPPORTED]
        if unknown:
            raise ListenerConfigError(f"sasl.enabled.mechanisms: {unknown} not supported (supported: {SUPPORTED})")
        if not settings.sasl_users_file:
            raise ListenerConfigError(f"listener {listener.name} ({listener.protocol}) needs sasl.users.file")


def mechanisms(settings: BrokerSettings) -> tuple[str, ...]:
    return tuple(m.strip().upper() for m in settings.sasl_enabled_mechanisms.split(",") if m.strip())


def load_users(settings: BrokerSettings) -> UserStore:
    return UserStore.load(settings.sasl_users_file) if settings.sasl_users_file else UserStore()


def server_ssl_context(settings: BrokerSettings) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    assert settings.ssl_keystore_location is not None
    context.load_cert_chain(settings.ssl_keystore_location)
    if settings.ssl_truststore_location:
        context.load_verify_locations(settings.ssl_truststore_location)
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[settings.ssl_client_auth]
    return context


@dataclass(frozen=True, slots=True)
class InterBrokerCredentials:
    """How this broker connects to the others' listener (replica fetchers)."""

    ssl_context: ssl.SSLContext | None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None


def inter_broker_credentials(settings: BrokerSettings, listener: Listener) -> InterBrokerCredentials:
    context = None
    if listener.tls:
        context = ssl.create_default_context(cafile=settings.ssl_truststore_location)
        if settings.ssl_client_auth != "none":  # present our own certificate too
            assert settings.ssl_keystore_location is not None
            context.load_cert_chain(settings.ssl_keystore_location)
    if not listener.sasl:
        return InterBrokerCredentials(context)
    if not settings.inter_broker_sasl_username or not settings.inter_broker_sasl_password_file:
        raise ListenerConfigError(f"listener {listener.name} ({listener.protocol}): replication needs "
                                  "inter.broker.sasl.username and inter.broker.sasl.password.file")
    password = Path(settings.inter_broker_sasl_password_file).read_text().strip()
    return InterBrokerCredentials(context, settings.sasl_mechanism_inter_broker_protocol,
                                  settings.inter_broker_sasl_username, password)


def broker_principals(settings: BrokerSettings, listener: Listener) -> frozenset[str] | None:
    """Who may fetch as a follower: the inter-broker user and `super.users`; None where nobody is authenticated."""
    if not listener.sasl and settings.ssl_client_auth != "required":
        return None
    found = {p.strip() for p in settings.super_users.split(";") if p.strip()}
    if settings.inter_broker_sasl_username:
        found.add(f"User:{settings.inter_broker_sasl_username}")
    return frozenset(found)


def peer_certificate_principal(cert: dict | None) -> str | None:
    """Kafka's mTLS principal: User:CN=<common name> of the client certificate."""
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return f"User:CN={value}"
    return None
