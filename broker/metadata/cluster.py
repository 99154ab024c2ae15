"""Who is in the cluster, as this broker sees it: brokers, controller, cluster id.

Metadata and DescribeCluster answer from here, FindCoordinator uses it to
name a coordinator's address, and the Fetch path asks it whether a
`replica_id` belongs to a real peer broker (CVE-2018-1288: only brokers may
fetch as replicas). A single broker is its own cluster; with a controller the
view is refreshed from its metadata image (`update_brokers`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


class ClusterView:
    def __init__(self, *, cluster_id: str, local: BrokerEndpoint, controller_id: int | None = None) -> None:
        self.cluster_id = cluster_id
        self.local = local
        self._brokers: dict[int, BrokerEndpoint] = {local.broker_id: local}
        self._controller_id = controller_id

    @property
    def broker_id(self) -> int:
        return self.local.broker_id

    @property
    def controller_id(self) -> int:
        """The controller's id; a lone broker names itself (clients need a live id here)."""
        return self._controller_id if self._controller_id is not None else self.local.broker_id

    def brokers(self) -> list[BrokerEndpoint]:
        return sorted(self._brokers.values(), key=lambda b: b.broker_id)

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        return self._brokers.get(broker_id)

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
