"""HTTPS for `tinystream controller`: its API on controller.ssl.keystore.location (PEM chain + key).

Brokers verify it with controller.ssl.truststore.location (the CA that signed
it). The controller's own dashboard calls the API on 127.0.0.1, a name the
certificate need not carry: it trusts exactly the certificates in the
keystore (a pin: only the holder of that key answers), not a name.
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path

_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def new_server_context() -> ssl.SSLContext:
    """The controller API's TLS server side (here and in the operator's controller_tls.py): TLS 1.2 or later."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def server_context(keystore: str) -> ssl.SSLContext:
    """A server context from a PEM file holding the certificate chain and its key."""
    context = new_server_context()
    try:
        context.load_cert_chain(keystore)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"controller.ssl.keystore.location {keystore}: not a PEM certificate chain with its key "
                         f"({exc})") from exc
    return context


def pinned_client_context(keystore: str) -> ssl.SSLContext:
    """Trusts the keystore's own certificates and nothing else, whatever name was dialled."""
    pem = "\n".join(_CERTIFICATE.findall(Path(keystore).read_text()))
    context = ssl.create_default_context(cadata=pem)
    context.check_hostname = False  # the pin stands in for the name: no other key can answer
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the leaf itself is a trust anchor
    return context
