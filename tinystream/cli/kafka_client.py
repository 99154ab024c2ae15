"""Thin helpers over kafka-python for the CLI: one place that talks to brokers.

kafka-python is the client here because it is pure Python (nothing to build)
and has a complete admin client. Its errors are translated at this boundary
into `ClientError` with a message a person can act on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

CLIENT_ID = "tinystream-cli"
CONNECT_TIMEOUT_MS = 5000


class ClientError(RuntimeError):
    """A request the cluster refused or could not be reached for."""


@contextmanager
def translated(bootstrap: str) -> Iterator[None]:
    try:
        yield
    except KafkaTimeoutError as exc:
        if "bootstrap" in str(exc).lower():
            raise ClientError(f"no broker reachable at {bootstrap} (is `tinystream dev` running?)") from exc
        raise ClientError(f"timed out talking to {bootstrap}: {exc}") from exc
    except KafkaError as exc:
        raise ClientError(f"{type(exc).__name__}: {exc}") from exc


_JAAS = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


def security_options(path: str | Path | None) -> dict[str, object]:
    """kafka-python options from a Kafka client properties file (what `--command-config` gives the Java tools):
    security.protocol, sasl.mechanism, sasl.jaas.config (username and password), and a PEM CA in
    ssl.truststore.location (with ssl.truststore.type=PEM) or ssl.ca.location. Anything else is refused."""
    if path is None:
        return {}
    props: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    known = {"security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.location",
             "ssl.truststore.type", "ssl.ca.location"}
    unknown = sorted(set(props) - known)
    if unknown:
        raise ClientError(f"{path}: unsupported client properties {unknown} (known: {', '.join(sorted(known))})")
    options: dict[str, object] = {}
    if "security.protocol" in props:
        options["security_protocol"] = props["security.protocol"].upper()
    if "sasl.mechanism" in props:
        options["sasl_mechanism"] = props["sasl.mechanism"].upper()
    if "sasl.jaas.config" in props:
        found = dict(_JAAS.findall(props["sasl.jaas.config"]))
        if "username" not in found or "password" not in found:
            raise ClientError(f"{path}: sasl.jaas.config needs username=\"...\" and password=\"...\"")
        options["sasl_plain_username"], options["sasl_plain_password"] = found["username"], found["password"]
    ca = props.get("ssl.ca.location") or props.get("ssl.truststore.location")
    if ca:
        if props.get("ssl.truststore.location") and props.get("ssl.truststore.type", "PEM").upper() != "PEM":
            raise ClientError(f"{path}: only a PEM truststore can be read here (ssl.truststore.type=PEM)")
        options["ssl_cafile"] = ca
    return options


@contextmanager
def admin(bootstrap: str, **security: object) -> Iterator[KafkaAdminClient]:
    with translated(bootstrap):
        client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=CLIENT_ID,
                                  request_timeout_ms=15000, bootstrap_timeout_ms=CONNECT_TIMEOUT_MS, **security)
        try:
            yield client
        finally:
            client.close()


def producer(bootstrap: str, **options: object) -> KafkaProducer:
    with translated(bootstrap):
        return KafkaProducer(bootstrap_servers=bootstrap, client_id=CLIENT_ID,
                             bootstrap_timeout_ms=CONNECT_TIMEOUT_MS, **options)


def consumer(bootstrap: str, **options: object) -> KafkaConsumer:
    with translated(bootstrap):
        return KafkaConsumer(bootstrap_servers=bootstrap, client_id=CLIENT_ID,
                             bootstrap_timeout_ms=CONNECT_TIMEOUT_MS, **options)


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int  # -1: nothing committed
    end_offset: int

    @property
    def lag(self) -> int:
        return self.end_offset - self.committed if self.committed >= 0 else self.end_offset


def group_lag(bootstrap: str, group_id: str, *, isolation: str = "read_uncommitted") -> list[PartitionLag]:
    """Committed offset, end offset and lag for every partition the group committed.

    The end is the high watermark (read_uncommitted) or the last stable offset (read_committed, KIP-98):
    what a consumer of that isolation level can reach."""
    with admin(bootstrap) as client, translated(bootstrap):
        committed = client.list_group_offsets({group_id: None})[group_id]
    partitions = sorted(committed, key=lambda tp: (tp.topic, tp.partition))
    if not partitions:
        return []
    probe = consumer(bootstrap, enable_auto_commit=False, isolation_level=isolation)
    try:
        with translated(bootstrap):
            ends = probe.end_offsets(partitions)
    finally:
        probe.close()
    return [PartitionLag(tp.topic, tp.partition, committed[tp].offset, ends[tp]) for tp in partitions]


__all__ = ["ClientError", "PartitionLag", "TopicPartition", "admin", "consumer", "group_lag", "producer",
           "security_options"]
