"""A broker's listeners from Kafka's settings: names, protocols, addresses, per-listener settings (pure).

    listeners=CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9094
    advertised.listeners=CLIENT://broker-0.example.com:9092,REPLICATION://broker-0.headless:9094
    listener.security.protocol.map=CLIENT:SASL_SSL,REPLICATION:SSL
    inter.broker.listener.name=REPLICATION        (or security.inter.broker.protocol=SSL: the listener named SSL)
    listener.name.replication.ssl.client.auth=required
    listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-512
    listener.name.client.max.connections=500

    plan = plan_listeners(settings)   -> ListenerPlan: every Listener, and which one replication uses

Rules, as Kafka's KafkaConfig checks them:
- no `listeners`: PLAINTEXT on host:port (the single-listener default; `advertised.host` / `advertised.port`
  then name the advertised address);
- listener names are unique and each has a protocol in the map (a listener named like a protocol, as
  `SSL://...`, needs no map entry: the default map holds the four protocols);
- `advertised.listeners` names a subset of `listeners` and no wildcard host; a listener it leaves out is
  advertised with its own host (or `advertised.host`, or this machine's name for 0.0.0.0);
- the inter-broker listener: `inter.broker.listener.name`, else the listener named as
  `security.inter.broker.protocol` (never both), else the only listener; with several listeners and
  neither set, Kafka's default (security.inter.broker.protocol=PLAINTEXT) needs a listener named PLAINTEXT;
- per-listener settings (`listener.name.<name>.<setting>`, config/settings.py PER_LISTENER_KEYS) override
  the global ones for that listener only; `Listener.settings` holds the result.

Each listener is checked against what its protocol needs (a keystore for TLS, a users file for SASL).
Errors are ListenerConfigError, raised at start-up with a message naming the setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinystream.broker.security.sasl import SUPPORTED
from tinystream.config.settings import BrokerSettings

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_WILDCARDS = ("0.0.0.0", "::", "")


class ListenerConfigError(ValueError):
    """The listener settings cannot work (refused at start-up with this message)."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener: where it binds, what it advertises, its protocol and its own settings."""

    name: str  # upper-case, as in `listeners`
    protocol: str
    host: str  # bind address
    port: int  # bind port (0: any free one)
    settings: BrokerSettings  # the broker's settings with this listener's listener.name.* values applied
    advertised_host: str | None = None  # None: from the bound address
    advertised_port: int | None = None  # None: the bound port

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def authenticates(self) -> bool:
        """Whether every client on it proves who it is (SASL, or a required client certificate)."""
        return self.sasl or (self.tls and self.settings.ssl_client_auth == "required")


@dataclass(frozen=True, slots=True)
class ListenerPlan:
    listeners: tuple[Listener, ...]
    inter_broker: Listener

    @property
    def client_facing(self) -> Listener:
        """The listener a bootstrap address names: the first that is not the inter-broker one, if any."""
        others = [lst for lst in self.listeners if lst is not self.inter_broker]
        return others[0] if others else self.inter_broker

    def get(self, name: str) -> Listener | None:
        return next((lst for lst in self.listeners if lst.name == name.upper()), None)


def plan_listeners(settings: BrokerSettings) -> ListenerPlan:
    protocols = _protocol_map(settings.listener_security_protocol_map)
    if not settings.listeners:
        only = Listener("PLAINTEXT", protocols.get("PLAINTEXT", "PLAINTEXT"), settings.host, settings.port,
                        settings.for_listener("PLAINTEXT"), settings.advertised_host, settings.advertised_port)
        _check(only)
        return ListenerPlan((only,), _inter_broker(settings, (only,)))
    bound = _parse_addresses(settings.listeners, "listeners")
    advertised = _parse_addresses(settings.advertised_listeners or "", "advertised.listeners")
    unknown = [name for name in advertised if name not in bound]
    if unknown:
        raise ListenerConfigError(f"advertised.listeners names {unknown}, which are not in listeners={settings.listeners!r}")
    if settings.advertised_port is not None and len(bound) > 1:
        raise ListenerConfigError("advertised.port names one port; with several listeners use advertised.listeners")
    listeners = []
    for name, (host, port) in bound.items():
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerConfigError(f"listener {name} has no security protocol in listener.security.protocol.map="
                                      f"{settings.listener_security_protocol_map!r}")
        ad_host, ad_port = advertised.get(name, (None, None))
        if name in advertised and ad_host in ("0.0.0.0", "::"):  # empty: this machine's name, as Kafka does
            raise ListenerConfigError(f"advertised.listeners: {name} advertises the wildcard {ad_host!r}; name a host")
        try:
            own = settings.for_listener(name)
        except ValueError as exc:
            raise ListenerConfigError(str(exc)) from None
        listeners.append(Listener(
            name, protocol, host or "0.0.0.0", port, own,
            advertised_host=ad_host or settings.advertised_host,
            advertised_port=ad_port if ad_port is not None else settings.advertised_port))
    for listener in listeners:
        _check(listener)
    prefixed = {key.split(".")[2].upper() for key in (settings.model_extra or {})}
    stray = sorted(prefixed - set(bound))
    if stray:
        raise ListenerConfigError(f"listener.name.* settings for {stray}, which are not in listeners")
    return ListenerPlan(tuple(listeners), _inter_broker(settings, tuple(listeners)))


def _protocol_map(text: str) -> dict[str, str]:
    mapping = {}
    for item in (i.strip() for i in text.split(",") if i.strip()):
        name, colon, protocol = item.partition(":")
        if not colon or protocol.strip().upper() not in PROTOCOLS:
            raise ListenerConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                                      f"with a protocol of {PROTOCOLS}")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def _parse_addresses(text: str, key: str) -> dict[str, tuple[str, int]]:
    """NAME://host:port,... -> {NAME: (host, port)}; `[::1]` brackets dropped, an empty host kept empty."""
    out: dict[str, tuple[str, int]] = {}
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        name, sep, address = entry.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit() or int(port) > 65535 or not name.replace("_", "").isalnum():
            raise ListenerConfigError(f"{key}={text!r}: {entry!r} is not NAME://host:port")
        name = name.upper()
        if name in out:
            raise ListenerConfigError(f"{key}={text!r}: listener {name} is named twice")
        out[name] = (host.strip("[]"), int(port))
    ports = [port for _, port in out.values() if port]
    if len(ports) != len(set(ports)) and key == "listeners":
        raise ListenerConfigError(f"listeners={text!r}: two listeners on one port")
    return out


def _inter_broker(settings: BrokerSettings, listeners: tuple[Listener, ...]) -> Listener:
    by_name = {lst.name: lst for lst in listeners}
    if settings.inter_broker_listener_name and settings.security_inter_broker_protocol:
        raise ListenerConfigError("set inter.broker.listener.name or security.inter.broker.protocol, not both")
    if settings.inter_broker_listener_name:
        name, key = settings.inter_broker_listener_name.upper(), "inter.broker.listener.name"
    elif settings.security_inter_broker_protocol:
        name, key = settings.security_inter_broker_protocol, "security.inter.broker.protocol"
    elif len(listeners) == 1:
        return listeners[0]
    else:
        name, key = "PLAINTEXT", "security.inter.broker.protocol (default PLAINTEXT)"
    if name not in by_name:
        raise ListenerConfigError(f"{key}: no listener named {name} in {sorted(by_name)}; "
                                  "set inter.broker.listener.name to the replication listener")
    return by_name[name]


def _check(listener: Listener) -> None:
    s = listener.settings
    where = f"listener {listener.name} ({listener.protocol})"
    if listener.tls and not s.ssl_keystore_location:
        raise ListenerConfigError(f"{where} needs ssl.keystore.location")
    if listener.tls and s.ssl_client_auth != "none" and not s.ssl_truststore_location:
        raise ListenerConfigError(f"{where}: ssl.client.auth={s.ssl_client_auth} needs ssl.truststore.location "
                                  "(the CAs of client certificates)")
    if listener.sasl:
        unknown = [m for m in mechanisms(s) if m not in SUPPORTED]
        if unknown:
            raise ListenerConfigError(f"{where}: sasl.enabled.mechanisms: {unknown} not supported "
                                      f"(supported: {SUPPORTED})")
        if not mechanisms(s):
            raise ListenerConfigError(f"{where}: sasl.enabled.mechanisms is empty")
        if not s.sasl_users_file:
            raise ListenerConfigError(f"{where} needs sasl.users.file")


def mechanisms(settings: BrokerSettings) -> tuple[str, ...]:
    return tuple(m.strip().upper() for m in settings.sasl_enabled_mechanisms.split(",") if m.strip())
