"""TLS on the operator's controller API: each cluster's brokers see a certificate of their own cluster.

Brokers of cluster `demo` in namespace `apps` call

    https://demo-controller.apps.svc:9091/clusters/apps/demo

(an ExternalName Service onto the operator's, resources.controller_url). The
operator answers that name (TLS SNI) with a certificate for it signed by the
cluster's CA (cluster_tls.controller_ca), so a broker trusts the controller of
its own cluster and nothing else; that CA's bundle reaches the brokers
as `controller-ca.crt` in the cluster's broker tokens Secret
(controller_secret.py). The controller follows the cluster CA's rotation
(`follow_ca`, each pass): the bundle gains the new CA before the brokers' first
roll, the certificate is re-issued from the new CA once every broker trusts
both, and the old CA leaves the bundle with the last roll, so no broker ever
meets a controller certificate it cannot verify. A caller that names no cluster (the operator's own
dashboard on 127.0.0.1, a Prometheus scrape) gets the operator's certificate,
signed by an operator CA derived from the master secret the same way.

Certificates live in memory only: issued when a cluster's controller opens
and on every operator start, re-issued `renewal_days` before they expire
(`renew_due`, on a timer of the controller host); a renewed certificate is
served to new connections at once, with no restart. Keys never leave the
process (a temporary file, 0600, exists only while OpenSSL reads it).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from tinystream.operator.k8s.certificates import (
    KeyPair,
    controller_dns_names,
    cross_certificate,
    derived_ca,
    fingerprint,
    issue,
)
from tinystream.operator.k8s.cluster_tls import cluster_ca, controller_ca
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.model import ClusterSpec
from tinystream.operator.service.tls import new_server_context

#: The operator CA: derived from the master secret, so the same after a restart (no Secret to read).
OPERATOR_CA_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
OPERATOR_CA_DAYS = 7300
CERT_VALIDITY_DAYS = 90
RENEWAL_DAYS = 30
LOCAL_NAMES = frozenset({"localhost"})
LOCAL_ADDRESSES = frozenset({"127.0.0.1", "::1"})


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def operator_ca(master: str) -> KeyPair:
    seed = hmac.new(master.encode(), b"operator/controller-ca", hashlib.sha256).digest()
    return derived_ca(seed, "tinystream-operator", "controller", created=OPERATOR_CA_EPOCH, days=OPERATOR_CA_DAYS)


def server_context(pair: KeyPair, context: ssl.SSLContext | None = None) -> ssl.SSLContext:
    """A server context presenting `pair` (its private key is read from a short-lived 0600 file);
    given `context`, `pair` replaces its certificate (new handshakes present it)."""
    if context is None:
        context = new_server_context()
    with tempfile.TemporaryDirectory(prefix="tinystream-tls-") as directory:
        path = os.path.join(directory, "pair.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(pair.cert_pem + pair.key_pem)
        context.load_cert_chain(path)
    return context


@dataclass(slots=True)
class _Served:
    """One certificate the API serves, and how to issue its successor."""

    pair: KeyPair
    context: ssl.SSLContext
    names: frozenset[str]
    reissue: Callable[[datetime.datetime], KeyPair]
    issuer_pem: str = ""  # the CA certificate `reissue` signs with (a cluster's: follow_ca compares it)

    @property
    def not_after(self) -> datetime.datetime:
        return self.pair.certificate.not_valid_after_utc


class ControllerTLS:
    """The controller API's certificates: the operator's by default, a cluster's by the name asked for."""

    def __init__(self, master: str, *, service_names: frozenset[str], cluster_domain: str = "cluster.local",
                 now: Callable[[], datetime.datetime] = utc_now, validity_days: int = CERT_VALIDITY_DAYS,
                 renewal_days: int = RENEWAL_DAYS) -> None:
        if renewal_days >= validity_days:
            raise ValueError(f"renewal_days ({renewal_days}) must be below validity_days ({validity_days})")
        self._master = master
        self.cluster_domain = cluster_domain
        self.ca = operator_ca(master)
        self.now = now
        self.validity_days = validity_days
        self.renewal_days = renewal_days
        names = frozenset(service_names) | LOCAL_NAMES

        def operator_pair(at: datetime.datetime) -> KeyPair:
            return issue(self.ca, "tinystream-operator", names, now=at, days=validity_days,
                         ip_addresses=LOCAL_ADDRESSES)

        # What the listening socket holds: the operator's certificate, and SNI picks a cluster's instead.
        self._default = self._serve(names, operator_pair)
        self.server = self._default.context
        self.server.sni_callback = self._choose
        self._clusters: dict[ClusterKey, _Served] = {}
        self._by_name: dict[str, ssl.SSLContext] = {}

    def _serve(self, names: frozenset[str], reissue: Callable[[datetime.datetime], KeyPair],
               into: ssl.SSLContext | None = None, issuer_pem: str = "") -> _Served:
        pair = reissue(self.now())
        return _Served(pair, server_context(pair, into), names, reissue, issuer_pem)

    def _choose(self, sslobj: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext) -> None:
        """SNI: a cluster's context for its controller name; any other name keeps the operator's."""
        chosen = self._by_name.get((server_name or "").lower())
        if chosen is not None:
            sslobj.context = chosen

    def client_context(self) -> ssl.SSLContext:
        """For the operator's own calls to its API (its dashboard): trusts the operator CA only."""
        return ssl.create_default_context(cadata=self.ca.cert_pem)

    def add_cluster(self, spec: ClusterSpec) -> None:
        """Serve the cluster's controller names with a certificate from its CA (again: a fresh one)."""
        cluster = ClusterKey(spec.namespace, spec.name)
        ca, _ = controller_ca(self._master, spec)
        first = cluster_ca(self._master, spec)
        # Brokers started by an operator before this one trust the first CA alone (whatever the cluster CA's
        # generation): the new CA, cross-signed by it, is sent along so that they still verify the controller.
        chain = cross_certificate(ca, first) if fingerprint(ca.cert_pem) != fingerprint(first.cert_pem) else ""
        names = controller_dns_names(spec.name, spec.namespace, self.cluster_domain)
        self.remove_cluster(cluster)

        def cluster_pair(at: datetime.datetime) -> KeyPair:
            leaf = issue(ca, f"{cluster.namespace}/{cluster.name} controller", names, now=at, days=self.validity_days)
            return KeyPair(leaf.cert_pem + chain, leaf.key_pem)

        served = self._serve(names, cluster_pair, issuer_pem=ca.cert_pem)
        self._clusters[cluster] = served
        self._index(served)

    def follow_ca(self, spec: ClusterSpec) -> bool:
        """Re-issue a served cluster's certificate when its CA's signer changed (`spec` carries the
        status.clusterCa just recorded); True when it did. A cluster not served yet is left to add_cluster."""
        served = self._clusters.get(ClusterKey(spec.namespace, spec.name))
        if served is None or controller_ca(self._master, spec)[0].cert_pem == served.issuer_pem:
            return False
        self.add_cluster(spec)
        return True

    def remove_cluster(self, cluster: ClusterKey) -> None:
        served = self._clusters.pop(cluster, None)
        if served is not None:
            for name in served.names:
                self._by_name.pop(name.lower(), None)

    def _index(self, served: _Served) -> None:
        for name in served.names:
            self._by_name[name.lower()] = served.context

    def certificate(self, cluster: ClusterKey | None = None) -> KeyPair | None:
        """What is served for `cluster` (None: the operator's own)."""
        served = self._default if cluster is None else self._clusters.get(cluster)
        return None if served is None else served.pair

    def renew_due(self) -> list[str]:
        """Re-issue every certificate within `renewal_days` of expiry; what was renewed."""
        now = self.now()
        window = datetime.timedelta(days=self.renewal_days)
        renewed: list[str] = []
        if self._default.not_after - now <= window:
            self._default = self._serve(self._default.names, self._default.reissue, into=self.server)
            renewed.append("operator")
        for cluster, served in list(self._clusters.items()):
            if served.not_after - now <= window:
                fresh = self._serve(served.names, served.reissue, issuer_pem=served.issuer_pem)
                self._clusters[cluster] = fresh
                self._index(fresh)
                renewed.append(str(cluster))
        return renewed
