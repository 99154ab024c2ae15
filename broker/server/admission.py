"""Who may open a connection: a listener's limits and the broker's, as Kafka's ConnectionQuotas (pure).

Three counts decide, each a plain number here (no sockets): the listener's
max.connections, max.connections.per.ip so that one host cannot take them all,
and the broker-wide max.connections over every listener (`BrokerConnections`),
which, as KIP-402 has it, does not refuse connections on the inter-broker
listener (`protected`): that one stops only at its own
listener.name.<name>.max.connections. A connection over any limit is closed
at once by the server.
"""

from __future__ import annotations

import collections
from collections.abc import Callable


class BrokerConnections:
    """The broker-wide max.connections, shared by every listener's quotas."""

    def __init__(self, max_connections: int, on_change: Callable[[int], None] | None = None) -> None:
        self.max_connections = max_connections
        self.count = 0
        self._on_change = on_change

    def full(self) -> bool:
        return self.count >= self.max_connections

    def add(self, delta: int) -> None:
        self.count += delta
        if self._on_change is not None:
            self._on_change(self.count)


class ConnectionQuotas:
    """One listener's connection counts: `admit(host)` takes a place or refuses, `release(host)` gives it back."""

    def __init__(self, max_connections: int, *, max_connections_per_ip: int | None = None,
                 broker_connections: BrokerConnections | None = None, protected: bool = False) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip or max_connections
        self.broker_connections = broker_connections
        self.protected = protected  # the inter-broker listener among several: the broker-wide count never refuses it
        self.count = 0
        self._per_ip: collections.Counter[str] = collections.Counter()

    def of(self, host: str) -> int:
        return self._per_ip[host]

    def admit(self, host: str) -> bool:
        if self.count >= self.max_connections or self._per_ip[host] >= self.max_connections_per_ip:
            return False
        shared = self.broker_connections
        if shared is not None and shared.full() and not self.protected:
            return False
        self.count += 1
        self._per_ip[host] += 1
        if shared is not None:
            shared.add(1)
        return True

    def release(self, host: str) -> None:
        """Give back a place `admit(host)` took (call once per admitted connection)."""
        self.count -= 1
        self._per_ip[host] -= 1
        if self._per_ip[host] <= 0:
            del self._per_ip[host]
        if self.broker_connections is not None:
            self.broker_connections.add(-1)
