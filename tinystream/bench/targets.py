"""The brokers a benchmark runs against: ours, and optional peers, one at a time.

`--bootstrap HOST:PORT` uses a running broker; without it our broker is
started as a subprocess in a temporary folder (the same way a user runs it).
Each `--peer` (`kafka`, `tansu`, or a shell command that prints
`bootstrap=HOST:PORT`) is started after ours has been measured and stopped,
so the two never share the machine's two cores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from tinystream.testing.peers import KNOWN_PEERS, RunningBroker, start_peer


@dataclass(frozen=True)
class Target:
    name: str
    bootstrap: str
    version: str = ""
    process: RunningBroker | None = None
    # A listener with a security protocol (security_bench.py): what librdkafka needs to reach `bootstrap`
    # (security.protocol, ssl.ca.location, sasl.*), and a PLAINTEXT address of the same broker for the
    # unmeasured set-up (topic creation, filling), which the raw wire client does.
    client_config: Mapping[str, str] = field(default_factory=dict)
    setup_bootstrap: str | None = None

    @property
    def host_port(self) -> tuple[str, int]:
        host, port = self.bootstrap.rsplit(":", 1)
        return host, int(port)

    @property
    def pgid(self) -> int | None:
        """The process group of a broker started here (its CPU time is the workload's cost); None for
        one given by --bootstrap."""
        return None if self.process is None else self.process.process.pid

    def for_setup(self) -> Target:
        """This target as the raw (plaintext) wire client reaches it for set-up."""
        if self.setup_bootstrap is None:
            return self
        return dataclasses.replace(self, bootstrap=self.setup_bootstrap, client_config={}, setup_bootstrap=None)


def describe_spec(spec: str) -> str:
    return spec if spec in KNOWN_PEERS else f"peer({spec.split()[0]})"


@contextlib.contextmanager
def open_target(spec: str, *, bootstrap: str | None = None, quiet: bool = False) -> Iterator[Target]:
    """A running target: external when `bootstrap` is given, else started (and stopped) here."""
    if bootstrap:
        yield Target(name=spec if spec in KNOWN_PEERS else "external", bootstrap=bootstrap)
        return
    if not quiet:
        print(f"starting {describe_spec(spec)} ...", file=sys.stderr, flush=True)
    running = start_peer(spec)
    try:
        if not quiet:
            print(f"  {running.name} {running.version} ready at {running.bootstrap} (log {running.log_path})",
                  file=sys.stderr, flush=True)
        yield Target(name=describe_spec(spec), bootstrap=running.bootstrap, version=running.version,
                     process=running)
    finally:
        running.stop()
