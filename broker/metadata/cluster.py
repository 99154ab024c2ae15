"""Who is in the cluster, as this broker sees it: brokers, controller, cluster id.

Metadata and DescribeCluster answer from here, FindCoordinator uses it to
name a coordinator's address, and the Fetch path asks it whether a
`replica_id` belongs to a real peer broker (CVE-2018-1288: only brokers may
fetch as replicas). A single broker is its own cluster; with a controller the
view is refreshed from its metadata image (`update_brokers`).

Each broker advertises one endpoint per listener (KIP-631 BrokerEndpoint). Clients are told the
endpoints of the listener they came in on, and brokers without that listener are left out
(Kafka's MetadataCache.getAliveBrokerNodes(listenerName)); brokers reach each other on the
inter-broker listener (`peer_endpoint`). A registration without listeners (an older broker) has only
host:port, which then serves every listener.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ListenerAddress:
    name: str  # upper-case listener name, as in `listeners`
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    broker_id: int
    host: str  # the inter-broker listener's address (the only one of a registration without listeners)
    port: int
    rack: str | None = None
    listeners: tuple[ListenerAddress, ...] = ()

    def on(self, listener: str | None) -> BrokerEndpoint | None:
        """This broker as seen from `listener` (host and port of that listener); None without it."""
        if listener is None or not self.listeners:
            return self
        for address in self.listeners:
            if address.name == listener:
                return dataclasses.replace(self, host=address.host, port=address.port)
        return None


class ClusterView:
    def __init__(self, *, cluster_id: str, local: BrokerEndpoint, controller_id: int | None = None,
                 inter_broker_listener: str | None = None) -> None:
        self.cluster_id = cluster_id
        self.local = local
        self.inter_broker_listener = inter_broker_listener
        self._brokers: dict[int, BrokerEndpoint] = {local.broker_id: local}
        self._controller_id = controller_id

    @property
    def broker_id(self) -> int:
        return self.local.broker_id

    @property
    def controller_id(self) -> int:
        """The controller's id; a lone broker names itself (clients need a live id here)."""
        return self._controller_id if self._controller_id is not None else self.local.broker_id

    def brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        """Live brokers, with the endpoints of `listener` (None: as registered); those without it left out."""
        seen = (b.on(listener) for b in sorted(self._brokers.values(), key=lambda b: b.broker_id))
        return [b for b in seen if b is not None]

    def broker(self, broker_id: int, listener: str | None = None) -> BrokerEndpoint | None:
        found = self._brokers.get(broker_id)
        return found.on(listener) if found is not None else None

    def peer_endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        """Where this broker reaches `broker_id`: its inter-broker listener."""
        return self.broker(broker_id, self.inter_broker_listener)

    def is_peer(self, broker_id: int) -> bool:
        """True for another live broker of this cluster (never for ourselves)."""
        return broker_id != self.local.broker_id and broker_id in self._brokers

    def set_local(self, local: BrokerEndpoint) -> None:
        """Our advertised endpoint, once the listener knows its port."""
        self._brokers.pop(self.local.broker_id, None)
        self.local = local
        self._brokers[local.broker_id] = local

    def update_brokers(self, brokers: list[BrokerEndpoint], controller_id: int | None = None) -> None:
        self._brokers = {b.broker_id: b for b in brokers}
        self._brokers[self.local.broker_id] = self.local
        self._controller_id = controller_id
