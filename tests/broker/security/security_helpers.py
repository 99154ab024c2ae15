"""Shared by the SASL/TLS and ACL tests: client settings for a broker made by `sasl_ssl_settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def confluent_sasl_ssl(bootstrap: str, truststore: Path, user: str, password: str, **extra: Any) -> dict[str, Any]:
    """confluent-kafka settings: SASL_SSL, SCRAM-SHA-512, the test CA."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(truststore),
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password, "log_level": 0,
            **extra}


def java_sasl_ssl_properties(path: Path, truststore: Path, user: str, password: str) -> str:
    """A Java client properties file (the tools' --command-config): SASL_SSL, SCRAM-SHA-512, a PEM truststore."""
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={truststore}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";\n')
    return str(path)
