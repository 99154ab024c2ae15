"""The local cluster's replication listener: brokers prove to each other that they are brokers.

A broker believes a follower's Fetch (its replica_id), WriteTxnMarkers and the other broker-only
requests only from a client that logged in as a broker on the inter-broker listener
(BrokerContext.from_broker). So a local cluster, whose clients use PLAINTEXT on 127.0.0.1, gives every
broker a second listener, as a Kafka cluster would:

    listeners                          PLAINTEXT://127.0.0.1:<port>,REPLICATION://127.0.0.1:0
    listener.security.protocol.map     PLAINTEXT:PLAINTEXT,REPLICATION:SASL_PLAINTEXT
    inter.broker.listener.name         REPLICATION
    SCRAM-SHA-512 user `broker`        its salted credential in users.json, its password in broker-password

The password is made once per cluster, beside the controller's secret (mode 0600), and kept across
restarts. A user who sets the listeners or the SASL users herself (`--set listeners=...`) owns
replication's security, and gets none of this.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from tinystream.scram_users import UserStore

BROKER_USER = "broker"
LISTENER = "REPLICATION"
MECHANISM = "SCRAM-SHA-512"

# Settings that, when a user gives one, mean she configures listeners and their security herself.
USER_OWNED = frozenset({"listeners", "advertised.listeners", "advertised.port", "listener.security.protocol.map",
                        "inter.broker.listener.name",
                        "security.inter.broker.protocol", "sasl.users.file", "inter.broker.sasl.username",
                        "inter.broker.sasl.password.file"})


def owned_by_user(items: list[str] | tuple[str, ...]) -> bool:
    """Whether `--set KEY=VALUE` items configure listeners themselves."""
    return any(item.partition("=")[0].strip() in USER_OWNED for item in items)


def ensure_credentials(folder: Path) -> tuple[Path, Path]:
    """(users.json, broker-password) in `folder`, made on first use and kept after."""
    folder.mkdir(parents=True, exist_ok=True)
    password_file, users_file = folder / "broker-password", folder / "users.json"
    if not password_file.exists() or not users_file.exists():
        password = secrets.token_urlsafe(24)
        users = UserStore()
        users.set_password(BROKER_USER, password, mechanisms=(MECHANISM,))
        users.save(users_file)  # mode 0600
        with os.fdopen(os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(password)
    return users_file, password_file


def replication_settings(folder: Path, *, host: str, port: int) -> dict[str, str]:
    """A broker's listener settings: clients on PLAINTEXT host:port, brokers on an authenticated
    REPLICATION listener (any free port)."""
    users_file, password_file = ensure_credentials(folder)
    return {
        "listeners": f"PLAINTEXT://{host}:{port},{LISTENER}://{host}:0",
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{LISTENER}:SASL_PLAINTEXT",
        "inter.broker.listener.name": LISTENER,
        f"listener.name.{LISTENER.lower()}.sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "sasl.users.file": str(users_file),
        "inter.broker.sasl.username": BROKER_USER,
        "inter.broker.sasl.password.file": str(password_file),
    }
