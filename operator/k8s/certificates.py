"""A cluster's certificate authority and its brokers' certificate: pure functions over PEM text.

The operator keeps one CA per TinyStreamCluster (as Strimzi's cluster CA) and
issues from it one broker certificate whose names cover every broker pod and
the bootstrap Service:

    *.<cluster>-brokers.<ns>.svc[.<domain>]     each broker (followers verify it too)
    <cluster>-kafka, <cluster>-kafka.<ns>.svc[.<domain>]   the bootstrap Service

A certificate is renewed (`renewal_reason`) when it is missing, expires within
the renewal window, names other hosts, was not signed by the current CA, or a
renewal was asked for (the cluster's `tinystream.io/renew-certificates`
annotation changed); what is in force is remembered in the cluster's status
(`IssuedRecord`), since the operator cannot read Secrets;
brokers pick the new files up without a restart (the listener reloads its
TLS context when the mounted Secret changes). No I/O here: cluster_tls.py
reads and writes the Secrets.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Certificates are back-dated this much: clocks of nodes and pods differ.
CLOCK_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, PEM."""

    cert_pem: str
    key_pem: str

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem.encode())


@dataclass(frozen=True, slots=True)
class CertFacts:
    """What the operator checks and reports about a certificate."""

    serial: int
    not_after: datetime.datetime
    dns_names: frozenset[str]
    issuer: str

    @classmethod
    def of(cls, cert_pem: str) -> CertFacts:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        try:
            names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            dns = frozenset(names.get_values_for_type(x509.DNSName))
        except x509.ExtensionNotFound:
            dns = frozenset()
        return cls(cert.serial_number, cert.not_valid_after_utc, dns, cert.issuer.rfc4514_string())


def _new_key() -> tuple[ec.EllipticCurvePrivateKey, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    return key, _key_pem(key)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def derived_ca(seed: bytes, cluster: str, namespace: str, *, created: datetime.datetime, days: int,
               title: str = "cluster CA") -> KeyPair:
    """The cluster's CA, the same every time from the same seed (a secret the operator derives).

    So the operator never reads the CA key back from a Secret (its RBAC has no
    `get` on Secrets): key, serial and validity follow from the seed and the
    cluster's creation time; only the signature bytes differ between runs,
    and any copy verifies the same certificates.
    """
    digest = int.from_bytes(hashlib.sha512(seed).digest(), "big")
    key = ec.derive_private_key(digest % (_P256_ORDER - 1) + 1, ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "tinystream.io"),
                      x509.NameAttribute(NameOID.COMMON_NAME, f"{namespace}/{cluster} {title}")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(digest >> (512 - 150) | 1)
        .not_valid_before(created - CLOCK_SKEW).not_valid_after(created + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256(), ecdsa_deterministic=True)
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def fingerprint(cert_pem: str) -> str:
    """A CA's identity across re-signings: the SHA-256 of its public key (first 16 hex digits)."""
    public = x509.load_pem_x509_certificate(cert_pem.encode()).public_key()
    raw = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(raw).hexdigest()[:16]


def broker_dns_names(cluster: str, namespace: str, cluster_domain: str) -> frozenset[str]:
    names = set()
    for suffix in (f"{namespace}.svc", f"{namespace}.svc.{cluster_domain}"):
        names.add(f"*.{cluster}-brokers.{suffix}")
        names.add(f"{cluster}-kafka.{suffix}")
    names.add(f"{cluster}-kafka")
    return frozenset(names)


def controller_dns_names(cluster: str, namespace: str, cluster_domain: str) -> frozenset[str]:
    """The names a cluster's brokers call the controller by: its ExternalName Service onto the operator."""
    return frozenset({f"{cluster}-controller.{namespace}.svc", f"{cluster}-controller.{namespace}.svc.{cluster_domain}"})


def issue(ca: KeyPair, common_name: str, dns_names: frozenset[str], *, now: datetime.datetime,
          days: int, ip_addresses: frozenset[str] = frozenset()) -> KeyPair:
    """A server-and-client certificate signed by `ca` (brokers present it to clients and to each other;
    a TinyStreamUser with tls authentication presents one with no host names)."""
    key, key_pem = _new_key()
    ca_cert = ca.certificate
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    assert isinstance(ca_key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey))  # a provided CA may be RSA
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if dns_names or ip_addresses:  # a user's client certificate names no host
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in sorted(dns_names)]
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in sorted(ip_addresses)]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem)


def cross_certificate(ca: KeyPair, signer: KeyPair) -> str:
    """`ca`'s certificate (name and key) signed by `signer`: sent after a leaf of `ca`, it lets a client that
    trusts only `signer` verify that leaf (leaf -> this -> signer), as a CA moving to a new key is
    cross-signed by its old one. Both are the same cluster's CAs with one name, so it is self-issued and
    does not count against `signer`'s path length (RFC 5280 4.2.1.9)."""
    cert, signer_cert = ca.certificate, signer.certificate
    signer_key = serialization.load_pem_private_key(signer.key_pem.encode(), password=None)
    assert isinstance(signer_key, ec.EllipticCurvePrivateKey)  # the operator's derived CAs only
    cross = (
        x509.CertificateBuilder()
        .subject_name(cert.subject).issuer_name(signer_cert.subject).public_key(cert.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(max(cert.not_valid_before_utc, signer_cert.not_valid_before_utc))
        .not_valid_after(min(cert.not_valid_after_utc, signer_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(cert.extensions.get_extension_for_class(x509.KeyUsage).value, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(cert.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()), critical=False)
        .sign(signer_key, hashes.SHA256(), ecdsa_deterministic=True)
    )
    return cross.public_bytes(serialization.Encoding.PEM).decode()


def signed_by(cert_pem: str, ca_cert_pem: str) -> bool:
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (InvalidSignature, ValueError, TypeError):  # a wrong signature, another issuer name or key type
        return False
    return True


@dataclass(frozen=True, slots=True)
class IssuedRecord:
    """What status.certificates remembers of the broker certificate in force (the Secret is never read)."""

    serial: str
    not_after: datetime.datetime
    hosts: str  # hosts_digest of its DNS names
    ca: str  # fingerprint of the CA that signed it
    renew_token: str = ""  # the tinystream.io/renew-certificates annotation it was issued for

    def to_status(self) -> dict[str, str]:
        return {"serial": self.serial, "notAfter": self.not_after.isoformat(), "hosts": self.hosts,
                "ca": self.ca, "renewToken": self.renew_token}

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> IssuedRecord | None:
        try:
            assert status is not None
            return cls(str(status["serial"]), datetime.datetime.fromisoformat(status["notAfter"]),
                       str(status["hosts"]), str(status["ca"]), str(status.get("renewToken") or ""))
        except (AssertionError, TypeError, KeyError, ValueError):
            return None

    @classmethod
    def of(cls, issued: KeyPair, ca: KeyPair, dns_names: frozenset[str], renew_token: str) -> IssuedRecord:
        facts = CertFacts.of(issued.cert_pem)
        return cls(f"{facts.serial:x}", facts.not_after, hosts_digest(dns_names), fingerprint(ca.cert_pem),
                   renew_token)


def hosts_digest(dns_names: frozenset[str]) -> str:
    return hashlib.sha256("\n".join(sorted(dns_names)).encode()).hexdigest()[:16]


def renewal_reason(current: IssuedRecord | None, *, ca: KeyPair, dns_names: frozenset[str], renew_token: str,
                   now: datetime.datetime, renewal_days: int) -> str | None:
    """Why a certificate must be issued again, or None while the one in force is good.

    The broker certificate's rule, and a tls TinyStreamUser's (users.plan_user_secret: no DNS names,
    no renew token). Expiry renews only when a new certificate would live longer: one that ends with its
    CA (issue() clips it there) waits for the CA's rotation (ca_lifecycle.py), which re-issues it."""
    if current is None:
        return "no certificate recorded yet"
    if current.ca != fingerprint(ca.cert_pem):
        return "the certificate was not signed by the cluster's current CA"
    if current.hosts != hosts_digest(dns_names):
        return "the certificate names other hosts"
    if current.renew_token != renew_token:
        return f"renewal asked for (tinystream.io/renew-certificates: {renew_token!r})"
    ends_with_ca = current.not_after >= ca.certificate.not_valid_after_utc - datetime.timedelta(seconds=1)
    if current.not_after - now <= datetime.timedelta(days=renewal_days) and not ends_with_ca:
        return f"the certificate expires {current.not_after.isoformat()} (renewal window {renewal_days} days)"
    return None
