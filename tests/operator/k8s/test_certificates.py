"""The cluster CA and the broker certificate (operator/k8s/certificates.py): pure, checked with a real TLS handshake."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading

import pytest

from tinystream.operator.k8s.certificates import (
    CertFacts,
    IssuedRecord,
    broker_dns_names,
    derived_ca,
    fingerprint,
    issue,
    renewal_reason,
    signed_by,
)

NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC)
CREATED = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
DNS = broker_dns_names("demo", "apps", "cluster.local")


def ca(seed: bytes = b"seed-one"):
    return derived_ca(seed, "demo", "apps", created=CREATED, days=3650)


def test_the_ca_follows_from_its_seed_so_the_operator_never_reads_it_back() -> None:
    again, other = ca(), ca(b"seed-two")
    assert fingerprint(again.cert_pem) == fingerprint(ca().cert_pem) and again.key_pem == ca().key_pem
    assert fingerprint(other.cert_pem) != fingerprint(again.cert_pem)
    issued = issue(ca(), "demo-broker", DNS, now=NOW, days=30)
    assert signed_by(issued.cert_pem, again.cert_pem)  # any re-signed copy of the CA verifies it
    assert not signed_by(issued.cert_pem, other.cert_pem)


def test_the_broker_certificate_names_every_broker_and_the_bootstrap_service() -> None:
    facts = CertFacts.of(issue(ca(), "demo-broker", DNS, now=NOW, days=30).cert_pem)
    assert {"*.demo-brokers.apps.svc", "*.demo-brokers.apps.svc.cluster.local", "demo-kafka",
            "demo-kafka.apps.svc"} <= facts.dns_names
    assert facts.not_after == NOW + datetime.timedelta(days=30)


def handshake(server_pem: str, ca_pem: str, tmp_path, hostname: str) -> None:
    """A real TLS handshake: a server with the broker's certificate, a client that trusts only the CA."""
    (tmp_path / "server.pem").write_text(server_pem)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "server.pem")
    client_ctx = ssl.create_default_context(cadata=ca_pem)
    left, right = socket.socketpair()

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(left, server_side=True) as s:
                s.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(right, server_hostname=hostname) as c:
            c.sendall(b"x")
    finally:
        thread.join(5)


def test_a_client_trusting_the_ca_accepts_a_broker_and_refuses_a_wrong_name(tmp_path) -> None:
    authority = ca()
    broker = issue(authority, "demo-broker", DNS, now=datetime.datetime.now(datetime.UTC), days=30)
    handshake(broker.cert_pem + broker.key_pem, authority.cert_pem, tmp_path, "demo-broker-2.demo-brokers.apps.svc")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(broker.cert_pem + broker.key_pem, authority.cert_pem, tmp_path, "demo-broker-0.elsewhere.svc")


def test_renewal_reasons() -> None:
    authority = ca()
    record = IssuedRecord.of(issue(authority, "demo-broker", DNS, now=NOW, days=30), authority, DNS, "")
    assert IssuedRecord.from_status(record.to_status()) == record
    due = dict(ca=authority, dns_names=DNS, renew_token="", renewal_days=5)
    assert renewal_reason(record, now=NOW, **due) is None
    assert "expires" in renewal_reason(record, now=NOW + datetime.timedelta(days=26), **due)
    assert renewal_reason(None, now=NOW, **due) == "no certificate recorded yet"
    assert "current CA" in renewal_reason(record, now=NOW, **{**due, "ca": ca(b"seed-two")})
    assert "other hosts" in renewal_reason(record, now=NOW, **{**due, "dns_names": DNS | {"extra.example"}})
    assert "renewal asked for" in renewal_reason(record, now=NOW, **{**due, "renew_token": "2026-11-25"})
    assert IssuedRecord.from_status({"serial": "1"}) is None  # a partial status: issue again
