"""The TLS cells of `bench compare` (produce-tls, consume-tls): both brokers get an SSL listener.

A throwaway CA (trustme, in the [test] extra) issues one certificate for 127.0.0.1, and both brokers
present it beside their PLAINTEXT listener: ours reads the PEM keystore as it reads any, Kafka reads the
same file with `ssl.keystore.type=PEM`. The load generator reaches the SSL listener (librdkafka with
ssl.ca.location, Kafka's perf tools with a PEM truststore); topic creation and filling go over
PLAINTEXT and are not measured. So a TLS cell compares Python's ssl (OpenSSL) in our broker against the
JDK's TLS in Kafka's, with the same client on both sides.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tinystream.bench.targets import Target
from tinystream.testing.peers import PeerUnavailable, RunningBroker
from tinystream.testing.peers.apache_kafka import start_apache_kafka
from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.tinystream_broker import start_tinystream

TLS_CELLS = ("produce-tls", "consume-tls")
TLS_PEERS = ("tinystream", "kafka")  # the brokers started here with an SSL listener


@dataclass(frozen=True)
class TlsFiles:
    keystore: Path  # PKCS#8 key + certificate chain, PEM
    ca: Path


def make_tls_files(folder: Path) -> TlsFiles:
    """A CA and a 127.0.0.1 certificate for this run."""
    from tinystream.testing.broker import ThrowawayPki

    try:
        pki = ThrowawayPki(folder)
    except ImportError as exc:  # trustme is in the [test] extra
        raise PeerUnavailable("the TLS cells make throwaway certificates with trustme: pip install trustme") from exc
    return TlsFiles(keystore=pki.issue("broker"), ca=pki.ca_pem)


def start_with_ssl(spec: str, files: TlsFiles, ssl_port: int) -> RunningBroker:
    """`spec` (tinystream or kafka) with PLAINTEXT (its bootstrap) and SSL on `ssl_port`."""
    if spec == "tinystream":
        port = free_port()
        return start_tinystream(port=port, overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
            "ssl.keystore.location": str(files.keystore), "ssl.truststore.location": str(files.ca)})
    if spec == "kafka":
        return start_apache_kafka(extra_listeners={"SSL": ssl_port}, overrides={
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(files.keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca)})
    raise PeerUnavailable(f"the TLS cells start {' or '.join(TLS_PEERS)} with an SSL listener, not {spec!r}")


def ssl_twin(target: Target, files: TlsFiles, ssl_port: int) -> Target:
    """The same broker reached through its SSL listener; set-up stays on PLAINTEXT."""
    return dataclasses.replace(target, bootstrap=f"127.0.0.1:{ssl_port}",
                               client_config={"security.protocol": "SSL", "ssl.ca.location": str(files.ca)},
                               setup_bootstrap=target.bootstrap)


@contextlib.contextmanager
def open_with_ssl(spec: str, files: TlsFiles, *, quiet: bool = False) -> Iterator[tuple[Target, Target]]:
    """(PLAINTEXT target, SSL target) of one started broker, stopped on exit."""
    if not quiet:
        print(f"starting {spec} with an SSL listener ...", file=sys.stderr, flush=True)
    ssl_port = free_port()
    running = start_with_ssl(spec, files, ssl_port)
    try:
        plain = Target(name=spec, bootstrap=running.bootstrap, version=running.version, process=running)
        yield plain, ssl_twin(plain, files, ssl_port)
    finally:
        running.stop()


def java_client_props(client_config: Mapping[str, str]) -> list[str]:
    """librdkafka's names for a TLS client (client_config) as Kafka's Java client takes them."""
    props = []
    for key, value in client_config.items():
        if key == "security.protocol":
            props.append(f"security.protocol={value}")
        elif key == "ssl.ca.location":
            props += ["ssl.truststore.type=PEM", f"ssl.truststore.location={value}"]
        else:
            raise ValueError(f"no Java client setting for {key!r} here")
    return props


@contextlib.contextmanager
def java_client_config(client_config: Mapping[str, str]) -> Iterator[str]:
    """A --consumer.config file for Kafka's tools (/dev/null when there is nothing to say)."""
    if not client_config:
        yield "/dev/null"
        return
    with tempfile.NamedTemporaryFile("w", prefix="tinystream-bench-", suffix=".properties") as handle:
        handle.write("".join(f"{line}\n" for line in java_client_props(client_config)))
        handle.flush()
        yield handle.name
