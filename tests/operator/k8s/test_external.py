"""External listeners: the Services, each broker's advertised address, the broker config, the start script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tinystream.broker.security.listener_config import plan_listeners
from tinystream.config.settings import BrokerSettings
from tinystream.operator.k8s.external import (
    ExternalAddresses,
    advertised_addresses,
    certificate_hosts,
    external_services,
    node_addresses,
    split_hosts,
    stale_services,
    start_command,
)
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.reconcile import Apply, Delete, Observed, plan_owned_objects
from tinystream.operator.k8s.resources import broker_config, config_map, owned_objects, statefulset


def cluster(*external: dict[str, Any], brokers: int = 2) -> ClusterSpec:
    return ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "ns", "uid": "u1"},
                                      "spec": {"brokers": brokers, "listeners": {"external": list(external)}}})


NODEPORT = {"name": "ext", "port": 9094, "type": "nodeport"}


def service(name: str, *, node_port: int | None = None, ingress: dict[str, str] | None = None,
            listener: str = "ext") -> dict[str, Any]:
    port: dict[str, Any] = {"port": 9094}
    if node_port:
        port["nodePort"] = node_port
    return {"metadata": {"name": name, "labels": {"tinystream.io/listener": listener}},
            "spec": {"ports": [port]},
            "status": {"loadBalancer": {"ingress": [ingress]} if ingress else {}}}


def test_a_bootstrap_service_and_one_per_broker_selecting_its_pod() -> None:
    spec = cluster({**NODEPORT, "bootstrap": {"nodePort": 30900}, "brokers": [{"broker": 1, "nodePort": 30901}]})
    services = [o for o in owned_objects(spec, OperatorContext(), replicas=2)
                if o["kind"] == "Service" and "tinystream.io/listener" in o["metadata"]["labels"]]
    assert [s["metadata"]["name"] for s in services] == ["demo-ext-bootstrap", "demo-ext-0", "demo-ext-1"]
    assert {s["spec"]["type"] for s in services} == {"NodePort"}
    assert "statefulset.kubernetes.io/pod-name" not in services[0]["spec"]["selector"]
    assert services[2]["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == "demo-broker-1"
    assert services[0]["spec"]["ports"][0]["nodePort"] == 30900
    assert "nodePort" not in services[1]["spec"]["ports"][0]  # the API server picks it
    assert services[2]["spec"]["ports"][0] == {"name": "ext", "port": 9094, "targetPort": 9094,
                                               "protocol": "TCP", "nodePort": 30901}


def test_loadbalancer_services_take_no_node_port() -> None:
    spec = cluster({"name": "lb", "port": 9095, "type": "loadbalancer"})
    assert [(s.name, s.service_type, s.node_port) for s in external_services(spec, replicas=1)] == [
        ("demo-lb-bootstrap", "LoadBalancer", None), ("demo-lb-0", "LoadBalancer", None)]


def test_nodeport_advertises_the_node_address_and_the_allocated_port() -> None:
    spec = cluster(NODEPORT)
    found = advertised_addresses(spec, {"demo-ext-0": service("demo-ext-0", node_port=31000),
                                        "demo-ext-1": service("demo-ext-1", node_port=31001)}, replicas=2)
    assert found.waiting == ()
    assert found.render() == "0 EXT - 31000\n1 EXT - 31001\n"


def test_a_service_not_made_yet_is_waited_for() -> None:
    found = advertised_addresses(cluster(NODEPORT), {"demo-ext-0": service("demo-ext-0", node_port=31000)},
                                 replicas=2)
    assert found.waiting == ("the node port of Service demo-ext-1",)


def test_loadbalancer_advertises_its_ingress_or_waits() -> None:
    spec = cluster({"name": "lb", "port": 9095, "type": "loadbalancer"})
    found = advertised_addresses(spec, {"demo-lb-0": service("demo-lb-0", ingress={"ip": "203.0.113.7"}),
                                        "demo-lb-1": service("demo-lb-1")}, replicas=2)
    assert found.render() == "0 LB 203.0.113.7 9095\n"
    assert found.waiting == ("the load balancer address of Service demo-lb-1",)
    found = advertised_addresses(spec, {"demo-lb-0": service("demo-lb-0", ingress={"hostname": "lb.example"})},
                                 replicas=1)
    assert found.render() == "0 LB lb.example 9095\n"


def test_the_user_given_address_wins() -> None:
    spec = cluster({**NODEPORT, "brokers": [{"broker": 0, "advertisedHost": "kafka-0.example.com",
                                             "advertisedPort": 443}]},
                   {"name": "lb", "port": 9095, "type": "loadbalancer",
                    "brokers": [{"broker": 0, "advertisedHost": "lb-0.example.com"}]})
    found = advertised_addresses(spec, {}, replicas=1)  # nothing observed: nothing to wait for
    assert found.waiting == ()
    assert found.render() == "0 EXT kafka-0.example.com 443\n0 LB lb-0.example.com 9095\n"


def test_services_of_a_removed_listener_or_a_removed_broker_are_stale() -> None:
    observed = [service("demo-ext-bootstrap"), service("demo-ext-0"), service("demo-ext-1"),
                service("demo-old-0", listener="old"), {"metadata": {"name": "demo-kafka", "labels": {}}}]
    assert stale_services(cluster(NODEPORT), observed, replicas=1) == ["demo-ext-1", "demo-old-0"]


def test_broker_config_binds_each_listener_with_its_own_security() -> None:
    spec = cluster(NODEPORT, {"name": "mtls", "port": 9095, "type": "nodeport", "authentication": {"type": "tls"}},
                   {"name": "open", "port": 9096, "type": "nodeport", "tls": False,
                    "authentication": {"type": "none"}})
    config = broker_config(spec, OperatorContext())
    assert config["listeners"] == ("CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9093,EXT://0.0.0.0:9094,"
                                   "MTLS://0.0.0.0:9095,OPEN://0.0.0.0:9096")
    assert config["listener.security.protocol.map"] == ("CLIENT:SASL_SSL,REPLICATION:SSL,EXT:SASL_SSL,MTLS:SSL,"
                                                        "OPEN:PLAINTEXT")
    assert config["listener.name.ext.ssl.client.auth"] == "none"
    assert config["listener.name.mtls.ssl.client.auth"] == "required"
    assert any("open has no tls" in line for line in spec.insecure)


def test_the_config_map_carries_the_addresses_so_a_change_rolls() -> None:
    spec = cluster(NODEPORT)
    before = config_map(spec, OperatorContext(), ExternalAddresses())
    after = config_map(spec, OperatorContext(), advertised_addresses(
        spec, {"demo-ext-0": service("demo-ext-0", node_port=31000),
               "demo-ext-1": service("demo-ext-1", node_port=31001)}, replicas=2))
    assert before["data"]["external-listeners"] == ""
    assert after["data"]["external-listeners"] == "0 EXT - 31000\n1 EXT - 31001\n"
    assert "external-listeners" not in config_map(cluster(), OperatorContext())["data"]


def test_the_pod_gets_its_node_address_and_starts_through_the_script() -> None:
    sts = statefulset(cluster(NODEPORT), OperatorContext(), replicas=2, cfg_hash="h")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in container["env"]
    assert container["command"][:2] == ["/bin/sh", "-c"] and "args" not in container
    assert {"name": "x-ext", "containerPort": 9094, "protocol": "TCP"} in container["ports"]
    plain = statefulset(cluster(), OperatorContext(), replicas=2, cfg_hash="h")["spec"]["template"]["spec"]
    assert "command" not in plain["containers"][0]  # a cluster without external listeners does not roll


def _objects(spec: ClusterSpec, **services: dict[str, Any]) -> Observed:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in owned_objects(spec, OperatorContext(), replicas=2)
               if o["kind"] != "Service"}
    objects.update({("Service", name): s for name, s in services.items()})
    return Observed(objects=objects, pods=())


def test_config_and_statefulset_wait_until_every_node_port_is_known() -> None:
    spec = cluster(NODEPORT)
    actions = plan_owned_objects(spec, _objects(spec), OperatorContext(), replicas=2)
    applied = [a.key for a in actions if isinstance(a, Apply)]
    assert ("Service", "demo-ext-0") in applied
    assert not any(kind in ("ConfigMap", "StatefulSet") for kind, _ in applied)
    ready = _objects(spec, **{"demo-ext-0": service("demo-ext-0", node_port=31000),
                              "demo-ext-1": service("demo-ext-1", node_port=31001)})
    applied = [a.key for a in plan_owned_objects(spec, ready, OperatorContext(), replicas=2) if isinstance(a, Apply)]
    assert ("ConfigMap", "demo-config") in applied and ("StatefulSet", "demo-broker") in applied


def test_a_removed_listener_deletes_its_services() -> None:
    spec = cluster()
    actions = plan_owned_objects(spec, _objects(spec, **{"demo-ext-0": service("demo-ext-0")}), OperatorContext(),
                                 replicas=2)
    assert Delete("v1", "Service", "demo-ext-0") in actions


def test_the_certificate_names_node_addresses_lb_addresses_and_given_hosts() -> None:
    spec = cluster({**NODEPORT, "brokers": [{"broker": 0, "advertisedHost": "kafka-0.example.com"}]},
                   {"name": "lb", "port": 9095, "type": "loadbalancer"},
                   {"name": "open", "port": 9096, "type": "nodeport", "tls": False,
                    "brokers": [{"broker": 0, "advertisedHost": "plain.example.com"}]})
    hosts = certificate_hosts(spec, node_addresses=["10.89.0.2", "10.89.0.3", ""],
                              services={"demo-lb-0": service("demo-lb-0", ingress={"ip": "203.0.113.7"})})
    assert hosts == {"kafka-0.example.com", "10.89.0.2", "10.89.0.3", "203.0.113.7"}
    assert split_hosts(hosts) == ({"kafka-0.example.com"}, {"10.89.0.2", "10.89.0.3", "203.0.113.7"})


@pytest.mark.parametrize(("broker_id", "expected"), [
    ("0", "EXT://10.89.0.5:31000,LB://lb-0.example.com:9095"),
    ("1", "EXT://10.89.0.5:31001"),
    ("2", ""),
])
def test_the_start_script_advertises_this_brokers_lines(tmp_path: Path, broker_id: str, expected: str) -> None:
    (tmp_path / "external-listeners").write_text("0 EXT - 31000\n0 LB lb-0.example.com 9095\n1 EXT - 31001\n")
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "tinystream"
    fake.write_text('#!/bin/sh\necho "$TINYSTREAM_ADVERTISED_LISTENERS|$*"\n')
    fake.chmod(0o755)
    command = start_command(addresses_file=str(tmp_path / "external-listeners"), config_file="/etc/b.toml")
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "TINYSTREAM_BROKER_ID": broker_id,
           "HOST_IP": "10.89.0.5"}
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    assert out == f"{expected}|broker --config /etc/b.toml\n"


def test_the_broker_accepts_the_rendered_listeners() -> None:
    spec = cluster(NODEPORT, {"name": "mtls", "port": 9095, "type": "nodeport", "authentication": {"type": "tls"}})
    config = {**broker_config(spec, OperatorContext()), "advertised.host": "demo-broker-0.demo-brokers.ns.svc",
              "advertised.listeners": "EXT://10.89.0.5:31000"}
    plan = plan_listeners(BrokerSettings.model_validate(config))
    by_name = {listener.name: listener for listener in plan.listeners}
    assert (by_name["EXT"].advertised_host, by_name["EXT"].advertised_port) == ("10.89.0.5", 31000)
    assert by_name["CLIENT"].advertised_host == "demo-broker-0.demo-brokers.ns.svc"
    assert by_name["MTLS"].protocol == "SSL"


def test_node_addresses_are_the_internal_and_external_ones() -> None:
    nodes = [{"status": {"addresses": [{"type": "InternalIP", "address": "10.89.0.2"},
                                       {"type": "Hostname", "address": "worker"}]}},
             {"status": {"addresses": [{"type": "ExternalIP", "address": "198.51.100.4"},
                                       {"type": "InternalIP", "address": "10.89.0.3"}]}}, {}]
    assert node_addresses(nodes) == ["10.89.0.2", "10.89.0.3", "198.51.100.4"]
