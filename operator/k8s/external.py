"""External listeners (spec.listeners.external): which Services, and which address each broker advertises.

Pure decisions, as Strimzi's nodeport and loadbalancer listeners. For a cluster `demo` and a listener
`ext` (the broker's listener EXT) on port 9094:

    Service demo-ext-bootstrap   NodePort | LoadBalancer, every broker: a client's first address
    Service demo-ext-<N>         NodePort | LoadBalancer, broker N's pod only (by its pod-name label)

A Kafka client asks the bootstrap address for metadata and then connects to each broker at the address
that broker advertises on the listener the request came in on (KIP-103), so every broker needs its own
reachable address:

    advertisedHost / advertisedPort given      that (a DNS name or address the user routes)
    nodeport                                   its node's address (the pod's status.hostIP, from the
                                               Downward API at start) : its Service's node port
    loadbalancer                               its Service's status.loadBalancer.ingress address : port

The node port is allocated by the API server when the Service is made, so it is read back from the
observed Service. The brokers' advertised external addresses are one file in the brokers' ConfigMap,
`external-listeners`, one line per broker and listener (`<broker> <LISTENER> <host or -> <port>`, `-`:
the node's address); the broker's start script turns its own lines into advertised.listeners. The file
is in the ConfigMap's hash, so a new listener or a changed address rolls the brokers the usual way; while
an address is not known yet (a new Service, a load balancer not provisioned) the brokers' config is not
changed and the status says what it waits for.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.operator.k8s.model import LOADBALANCER, NODEPORT, ClusterSpec, ExternalListener

ADDRESSES_FILE = "external-listeners"  # in the brokers' ConfigMap
NODE_HOST = "-"  # in ADDRESSES_FILE: the node's address, known only in the pod
LISTENER_LABEL = "tinystream.io/listener"  # on every external Service: which listener it serves
BROKER_LABEL = "tinystream.io/broker"  # on a per-broker external Service: its broker id
SERVICE_TYPES = {NODEPORT: "NodePort", LOADBALANCER: "LoadBalancer"}


@dataclass(frozen=True, slots=True)
class ExternalService:
    """One Service an external listener needs; broker None: the bootstrap Service (every broker)."""

    name: str
    listener: ExternalListener
    broker: int | None
    node_port: int | None  # asked for by the spec; None: the API server picks (nodeport) or none (loadbalancer)
    pod: str = ""  # the pod a per-broker Service selects: a pool broker's; "": the cluster's <name>-broker-<id>

    @property
    def service_type(self) -> str:
        return SERVICE_TYPES[self.listener.type]


@dataclass(frozen=True, slots=True)
class Advertised:
    """What one broker advertises on one external listener; host None: its node's address."""

    broker: int
    listener: str  # the Kafka listener name (upper case)
    host: str | None
    port: int


@dataclass(frozen=True, slots=True)
class ExternalAddresses:
    """Every broker's external addresses, and what is not known yet (then the config waits)."""

    advertised: tuple[Advertised, ...] = ()
    waiting: tuple[str, ...] = ()

    def render(self) -> str:
        """The ADDRESSES_FILE text: one `<broker> <LISTENER> <host or -> <port>` line each, sorted."""
        return "".join(f"{a.broker} {a.listener} {a.host or NODE_HOST} {a.port}\n"
                       for a in sorted(self.advertised, key=lambda a: (a.broker, a.listener)))


def bootstrap_name(cluster: ClusterSpec, listener: ExternalListener) -> str:
    return f"{cluster.name}-{listener.name}-bootstrap"


def broker_service_name(cluster: ClusterSpec, listener: ExternalListener, broker: int) -> str:
    return f"{cluster.name}-{listener.name}-{broker}"


def brokers_of(cluster: ClusterSpec, *, replicas: int) -> tuple[tuple[int, str], ...]:
    """(broker id, pod name) of every broker: brokers 0..replicas-1 of the cluster's StatefulSet (pod name
    "": resources.Names), or with node pools each pool broker by its id (cluster.pool_brokers)."""
    if cluster.node_pools:
        return tuple(sorted(cluster.pool_brokers))
    return tuple((broker, "") for broker in range(replicas))


def external_services(cluster: ClusterSpec, *, replicas: int) -> list[ExternalService]:
    """The Services every external listener needs for `replicas` brokers (brokers_of): a bootstrap, then one
    per broker."""
    services = []
    for listener in cluster.external:
        services.append(ExternalService(bootstrap_name(cluster, listener), listener, None,
                                        listener.bootstrap_node_port if listener.type == NODEPORT else None))
        for broker, pod in brokers_of(cluster, replicas=replicas):
            node_port = listener.overrides(broker).node_port if listener.type == NODEPORT else None
            services.append(ExternalService(broker_service_name(cluster, listener, broker), listener, broker,
                                            node_port, pod))
    return services


def stale_services(cluster: ClusterSpec, observed: Iterable[Mapping[str, Any]], *, replicas: int) -> list[str]:
    """Names of observed external Services (by LISTENER_LABEL) that no listener needs any more: a listener
    removed or renamed, or a broker scaled away."""
    wanted = {s.name for s in external_services(cluster, replicas=replicas)}
    return sorted(name for obj in observed
                  if LISTENER_LABEL in ((meta := obj.get("metadata") or {}).get("labels") or {})
                  and (name := meta.get("name")) not in wanted)


def _node_port(service: Mapping[str, Any] | None) -> int | None:
    ports = ((service or {}).get("spec") or {}).get("ports") or []
    return int(ports[0]["nodePort"]) if ports and ports[0].get("nodePort") else None


def _ingress(service: Mapping[str, Any] | None) -> str | None:
    for entry in (((service or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
        if entry.get("ip") or entry.get("hostname"):
            return str(entry.get("ip") or entry.get("hostname"))
    return None


def advertised_addresses(cluster: ClusterSpec, services: Mapping[str, Mapping[str, Any]], *,
                         replicas: int) -> ExternalAddresses:
    """Each broker's address on each external listener, from the spec's overrides and the observed Services
    (by name): the node port the API server allocated, the load balancer's address."""
    found: list[Advertised] = []
    waiting: list[str] = []
    for service in external_services(cluster, replicas=replicas):
        if service.broker is None:
            continue
        listener, given = service.listener, service.listener.overrides(service.broker)
        observed = services.get(service.name)
        host: str | None = given.advertised_host
        port = given.advertised_port
        if listener.type == NODEPORT:
            port = port or _node_port(observed)
            if port is None:
                waiting.append(f"the node port of Service {service.name}")
                continue
        else:
            host = host or _ingress(observed)
            if host is None:
                waiting.append(f"the load balancer address of Service {service.name}")
                continue
            port = port or listener.port
        found.append(Advertised(service.broker, listener.listener, host, port))
    return ExternalAddresses(tuple(found), tuple(waiting))


def certificate_hosts(cluster: ClusterSpec, *, node_addresses: Iterable[str],
                      services: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """The external names the broker certificate must carry for the TLS external listeners: every
    advertisedHost, the nodes' addresses that brokers run on (nodeport), the load balancers' addresses."""
    hosts: set[str] = set()
    for listener in cluster.external:
        if not listener.tls:
            continue
        hosts.update(b.advertised_host for b in listener.brokers if b.advertised_host)
        if listener.type == NODEPORT:
            hosts.update(a for a in node_addresses if a)
        else:
            hosts.update(h for name, s in services.items()
                         if name.startswith(f"{cluster.name}-{listener.name}-") and (h := _ingress(s)))
    return frozenset(hosts)


def node_addresses(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The InternalIP and ExternalIP addresses of `nodes` (a node port answers on each of them)."""
    return sorted({a["address"] for node in nodes for a in (node.get("status") or {}).get("addresses") or ()
                   if a.get("type") in ("InternalIP", "ExternalIP") and a.get("address")})


def split_hosts(hosts: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(DNS names, IP addresses): a certificate names them in different SAN kinds."""
    dns, ips = set(), set()
    for host in hosts:
        try:
            ips.add(str(ipaddress.ip_address(host)))
        except ValueError:
            dns.add(host)
    return frozenset(dns), frozenset(ips)


def listener_config(cluster: ClusterSpec) -> tuple[list[str], list[str], dict[str, str]]:
    """(listeners entries, protocol map entries, per-listener settings) for the external listeners, bound
    on every interface; each listener's own client authentication, whatever the cluster's is."""
    bound, protocols, settings = [], [], {}
    for listener in cluster.external:
        bound.append(f"{listener.listener}://0.0.0.0:{listener.port}")
        protocols.append(f"{listener.listener}:{listener.security_protocol}")
        if listener.tls:
            prefix = f"listener.name.{listener.name}"
            settings[f"{prefix}.ssl.client.auth"] = "required" if listener.authentication == "tls" else "none"
    return bound, protocols, settings


#: The broker container's start when the cluster has external listeners (as Strimzi's kafka_run.sh reads
#: its per-broker listener file): this broker's lines of ADDRESSES_FILE become advertised.listeners; a
#: listener it has no line for yet is advertised with the pod's DNS name (advertised.host).
START_SCRIPT = """\
advertised=""
while read -r broker listener host port; do
  if [ "$broker" = "$TINYSTREAM_BROKER_ID" ]; then
    if [ "$host" = "{node}" ]; then host="$HOST_IP"; fi
    advertised="$advertised${{advertised:+,}}$listener://$host:$port"
  fi
done < "{file}"
export TINYSTREAM_ADVERTISED_LISTENERS="$advertised"
exec tinystream broker --config "{config}"
"""


def start_command(*, addresses_file: str, config_file: str) -> list[str]:
    return ["/bin/sh", "-c", START_SCRIPT.format(node=NODE_HOST, file=addresses_file, config=config_file)]
