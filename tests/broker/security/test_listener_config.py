"""Listener settings as Kafka reads them (issue 12): several listeners, advertised ones, the inter-broker
listener, listener.name.<name>.* overrides, and clear errors for what cannot work. Pure: no sockets."""

from __future__ import annotations

import pytest

from tinystream.broker.metadata.cluster import BrokerEndpoint, ClusterView, ListenerAddress
from tinystream.broker.security.listener import broker_principals, super_users
from tinystream.broker.security.listener_config import ListenerConfigError, plan_listeners
from tinystream.config.layers import ConfigError, load_settings
from tinystream.config.settings import BrokerSettings

TWO = {"listeners": "CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9094",
       "listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SSL",
       "inter.broker.listener.name": "REPLICATION",
       "ssl.keystore.location": "/tls/broker.pem", "ssl.truststore.location": "/tls/ca.pem",
       "sasl.users.file": "/users.json"}


def test_no_listeners_is_plaintext_on_host_and_port():
    plan = plan_listeners(BrokerSettings(**{"host": "127.0.0.1", "port": 9999, "advertised.host": "kafka.example"}))
    (only,) = plan.listeners
    assert (only.name, only.protocol, only.host, only.port, only.advertised_host) == (
        "PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9999, "kafka.example")
    assert plan.inter_broker is only and plan.client_facing is only


def test_one_named_listener_replicates_on_itself():
    plan = plan_listeners(BrokerSettings(**{"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.location": "/k",
                                            "sasl.users.file": "/u"}))
    assert plan.inter_broker.name == "SASL_SSL" and plan.inter_broker.sasl and plan.inter_broker.tls


def test_two_listeners_with_their_own_settings_and_advertised_addresses():
    plan = plan_listeners(BrokerSettings(**TWO, **{
        "advertised.listeners": "CLIENT://broker-0.example.com:19092,REPLICATION://broker-0.headless:9094",
        "listener.name.replication.ssl.client.auth": "required",
        "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.client.max.connections": 500}))
    client, replication = plan.listeners
    assert plan.inter_broker is replication and plan.client_facing is client
    assert (client.protocol, client.advertised_host, client.advertised_port) == ("SASL_SSL", "broker-0.example.com", 19092)
    assert (replication.protocol, replication.advertised_host) == ("SSL", "broker-0.headless")
    assert replication.settings.ssl_client_auth == "required" and client.settings.ssl_client_auth == "none"
    assert client.settings.sasl_enabled_mechanisms == "SCRAM-SHA-512"
    assert client.settings.max_connections == 500 and replication.settings.max_connections == 1000
    assert replication.authenticates and client.authenticates


def test_an_empty_advertised_host_is_this_machines_name_and_a_port_may_differ():
    plan = plan_listeners(BrokerSettings(**TWO, **{"advertised.listeners": "CLIENT://:19092"}))
    client = plan.get("CLIENT")
    assert (client.advertised_host, client.advertised_port, client.port) == (None, 19092, 9092)


def test_security_inter_broker_protocol_picks_the_listener_of_that_name():
    plan = plan_listeners(BrokerSettings(**{"listeners": "PLAINTEXT://:9092,SSL://:9093", "ssl.keystore.location": "/k",
                                            "security.inter.broker.protocol": "SSL"}))
    assert plan.inter_broker.name == "SSL"
    default = plan_listeners(BrokerSettings(**{"listeners": "SSL://:9093,PLAINTEXT://:9092", "ssl.keystore.location": "/k"}))
    assert default.inter_broker.name == "PLAINTEXT"  # Kafka's default security.inter.broker.protocol


@pytest.mark.parametrize(("overrides", "says"), [
    ({"inter.broker.listener.name": None}, "no listener named PLAINTEXT"),
    ({"inter.broker.listener.name": "INTERNAL"}, "no listener named INTERNAL"),
    ({"security.inter.broker.protocol": "SSL"}, "not both"),
    ({"listeners": "CLIENT://:9092,CLIENT://:9093"}, "named twice"),
    ({"listeners": "CLIENT://:9092,REPLICATION://:9092"}, "two listeners on one port"),
    ({"listeners": "CLIENT:9092"}, "is not NAME://host:port"),
    ({"listener.security.protocol.map": "CLIENT:SASL_SSL"}, "REPLICATION has no security protocol"),
    ({"listener.security.protocol.map": "CLIENT:TLS,REPLICATION:SSL"}, "is not NAME:PROTOCOL"),
    ({"advertised.listeners": "OTHER://x:1"}, "not in listeners"),
    ({"advertised.listeners": "CLIENT://0.0.0.0:9092"}, "wildcard"),
    ({"advertised.port": 9092}, "advertised.listeners"),
    ({"ssl.keystore.location": None}, "needs ssl.keystore.location"),
    ({"sasl.users.file": None}, "needs sasl.users.file"),
    ({"listener.name.replication.ssl.client.auth": "required", "ssl.truststore.location": None}, "needs ssl.truststore"),
    ({"listener.name.client.sasl.enabled.mechanisms": "GSSAPI"}, "not supported"),
    ({"listener.name.internal.max.connections": 5}, "not in listeners"),
])
def test_settings_that_cannot_work_are_refused_with_the_reason(overrides, says):
    with pytest.raises(ListenerConfigError, match=says):
        plan_listeners(BrokerSettings(**{**TWO, **overrides}))


def test_per_listener_keys_are_checked_like_the_global_ones():
    with pytest.raises(ValueError, match="ssl.client.auth"):
        BrokerSettings(**{"listener.name.replication.ssl.client.auth": "sometimes"})
    with pytest.raises(ValueError, match="unknown setting"):
        BrokerSettings(**{"listener.name.replication.log.dirs": "/elsewhere"})  # not a per-listener key


def test_per_listener_keys_come_from_every_layer(tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("listeners=CLIENT://:9092,REPLICATION://:9094\ninter.broker.listener.name=REPLICATION\n"
                      "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT\n"
                      "listener.name.client.max.connections=7\n")
    loaded = load_settings("broker", config_file=config, environ={
        "TINYSTREAM_LISTENER_NAME_REPLICATION_MAX_CONNECTIONS_PER_IP": "3"}).settings
    plan = plan_listeners(loaded)
    assert plan.get("client").settings.max_connections == 7
    assert plan.get("replication").settings.max_connections_per_ip == 3
    with pytest.raises(ConfigError, match="listener.name.client.bogus"):
        load_settings("broker", flags={"listener.name.client.bogus": "1"}, environ={})


def test_the_broker_principals_are_super_users_and_the_inter_broker_user():
    # The one rule, for the authorizer's super users and the inter-broker listener's broker principals.
    settings = BrokerSettings(**TWO, **{"super.users": " User:admin ; User:CN=broker-1;",
                                        "inter.broker.sasl.username": "broker"})
    assert super_users(settings) == {"User:admin", "User:CN=broker-1", "User:broker"}
    assert super_users(BrokerSettings(**TWO)) == frozenset()


def test_only_a_listener_that_authenticates_has_broker_principals():
    settings = BrokerSettings(**TWO, **{"super.users": "User:broker-1;User:broker-2",
                                        "listener.name.replication.ssl.client.auth": "required"})
    plan = plan_listeners(settings)
    assert broker_principals(plan.get("REPLICATION")) == super_users(settings) == {"User:broker-1", "User:broker-2"}
    open_replication = plan_listeners(BrokerSettings(**TWO))  # SSL without client certificates: nobody proven
    assert broker_principals(open_replication.get("REPLICATION")) == frozenset()  # so no client is a broker


def test_a_client_is_told_the_endpoints_of_the_listener_it_came_in_on():
    def broker(broker_id: int, *names: str) -> BrokerEndpoint:
        addresses = tuple(ListenerAddress(n, f"{n.lower()}-{broker_id}", 9000 + broker_id) for n in names)
        return BrokerEndpoint(broker_id, f"replication-{broker_id}", 9100 + broker_id, None, addresses)

    view = ClusterView(cluster_id="c", local=broker(1, "CLIENT", "REPLICATION"), inter_broker_listener="REPLICATION")
    legacy = BrokerEndpoint(3, "old-3", 9092)  # registered without listeners: host:port on every listener
    view.update_brokers([broker(2, "REPLICATION"), legacy])
    assert [(b.broker_id, b.host) for b in view.brokers("CLIENT")] == [(1, "client-1"), (3, "old-3")]
    assert [b.host for b in view.brokers("REPLICATION")] == ["replication-1", "replication-2", "old-3"]
    assert view.broker(2, "CLIENT") is None  # Kafka leaves a broker without that listener out
    assert view.peer_endpoint(2).host == "replication-2"
