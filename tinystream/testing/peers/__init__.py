"""Brokers to run beside ours: for the compatibility suite and the benchmarks.

`start_peer("kafka" | "tansu" | "tinystream" | "<shell command>")` starts a
broker as a child process on a free loopback port, in a temporary folder,
and returns a `RunningBroker` (a context manager; `.bootstrap`, `.stop()`).
A peer that cannot run here raises `PeerUnavailable` whose message says what
to install; one that does not come up raises `PeerStartError` with its log.

Kafka-named `overrides` (`{"group.initial.rebalance.delay.ms": 0}`) go into
Kafka's server.properties, or our broker's TINYSTREAM_* environment; tansu
has no such settings and ignores them.

A registry peer, Karapace, runs on such a broker: `peers.karapace.start_karapace`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tinystream.testing.peers.apache_kafka import start_apache_kafka
from tinystream.testing.peers.command import start_command
from tinystream.testing.peers.errors import PeerError, PeerStartError, PeerUnavailable
from tinystream.testing.peers.process import RunningBroker
from tinystream.testing.peers.tansu import start_tansu
from tinystream.testing.peers.tinystream_broker import start_tinystream

KNOWN_PEERS = {
    "tinystream": start_tinystream,
    "kafka": start_apache_kafka,
    "tansu": start_tansu,
}


def start_peer(
    spec: str,
    *,
    overrides: Mapping[str, object] | None = None,
    workdir: str | Path | None = None,
    timeout: float | None = None,
) -> RunningBroker:
    """Start a known peer by name, or run `spec` as a shell command."""
    kwargs: dict[str, object] = {"workdir": workdir}
    if timeout is not None:
        kwargs["timeout"] = timeout
    launcher = KNOWN_PEERS.get(spec)
    if launcher is None:
        return start_command(spec, **kwargs)
    return launcher(overrides=overrides, **kwargs)


__all__ = [
    "KNOWN_PEERS",
    "PeerError",
    "PeerStartError",
    "PeerUnavailable",
    "RunningBroker",
    "start_peer",
]
