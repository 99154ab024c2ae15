"""`tinystream schema-registry`: a Confluent-compatible schema registry on a TinyStream (or any Kafka) cluster."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click
from aiokafka.helpers import create_ssl_context

from tinystream.registry.app import RegistryOptions, run
from tinystream.registry.authz import RulesError, load_rules
from tinystream.registry.model import Compatibility
from tinystream.registry.state import Limits
from tinystream.tls_principal import PrincipalMapper, PrincipalMappingError

_LIMITS = Limits()  # the defaults
_URL = re.compile(r"^https?://[^\s/:]+(:\d{1,5})?/?$")


def check_instance_options(*, host: str, group_id: str | None, advertised_url: str | None,
                           forward_cafile: str | None = None) -> None:
    """The options of one of several instances: a URL the others can reach (forwarded writes go there)."""
    if forward_cafile is not None and group_id is None:
        raise click.UsageError("--forward-cafile needs --group-id (a single instance forwards nothing)")
    if advertised_url is not None and not _URL.match(advertised_url):
        raise click.UsageError(f"--advertised-url {advertised_url!r} is not http(s)://host[:port]")
    if group_id is not None and advertised_url is None and host in ("0.0.0.0", "::"):
        raise click.UsageError(f"--group-id with --host {host} needs --advertised-url (others cannot reach {host})")
    if group_id is not None and not group_id.strip():
        raise click.UsageError("--group-id must not be empty")


@click.command("schema-registry")
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers (host:port,...) holding the _schemas topic.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; loopback by default. Bind beyond it only with --users-file.")
@click.option("--port", type=click.IntRange(0, 65535), default=8081, show_default=True, help="HTTP port (0: any free).")
@click.option("--topic", default="_schemas", show_default=True, help="The compacted topic that stores the schemas.")
@click.option("--replication-factor", type=click.IntRange(1), default=1, show_default=True,
              help="Replication factor if the topic has to be created.")
@click.option("--users-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="SCRAM users file (sasl.users.file): every call then needs HTTP Basic credentials.")
@click.option("--max-body-bytes", type=click.IntRange(1024), default=1024 * 1024, show_default=True,
              help="Larger request bodies get 413.")
@click.option("--security-protocol", type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
              default="PLAINTEXT", show_default=True, help="How the registry reaches the cluster.")
@click.option("--sasl-mechanism", type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]), default="SCRAM-SHA-512",
              show_default=True)
@click.option("--sasl-username", default=None, help="The registry's own user on the cluster.")
@click.option("--sasl-password-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A file holding that user's password (never on the command line).")
@click.option("--ssl-cafile", type=click.Path(dir_okay=False, exists=True), default=None,
              help="CA bundle that signed the brokers' certificates (SSL, SASL_SSL).")
@click.option("--ssl-certfile", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The registry's client certificate (PEM) for mTLS to the brokers (listeners with tls authentication).")
@click.option("--ssl-keyfile", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Its private key (PEM).")
@click.option("--tls-certfile", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Serve HTTPS with this certificate chain (PEM); needs --tls-keyfile.")
@click.option("--tls-keyfile", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The private key (PEM) of --tls-certfile.")
@click.option("--tls-client-cafile", type=click.Path(dir_okay=False, exists=True), default=None,
              help="mTLS: a client certificate this CA bundle (PEM) signed is a login, named as the broker names "
                   "it (User:<DN>); needs --tls-certfile. Basic logins keep working.")
@click.option("--ssl-principal-mapping-rules", default="DEFAULT", show_default=True,
              help="The certificate's subject DN -> user name, with the broker's ssl.principal.mapping.rules syntax.")
@click.option("--compatibility", type=click.Choice([c.value for c in Compatibility]), default="BACKWARD",
              show_default=True, help="The global compatibility level until one is set through /config.")
@click.option("--rules-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Per-subject rules (JSON, see docs/schema-registry.md); needs --users-file or --tls-client-cafile.")
@click.option("--max-subjects", type=click.IntRange(1), default=_LIMITS.max_subjects, show_default=True)
@click.option("--max-subjects-per-user", type=click.IntRange(1), default=_LIMITS.max_subjects_per_user, show_default=True)
@click.option("--max-versions", type=click.IntRange(1), default=_LIMITS.max_versions, show_default=True)
@click.option("--max-versions-per-user", type=click.IntRange(1), default=_LIMITS.max_versions_per_user, show_default=True)
@click.option("--max-concurrent-requests", type=click.IntRange(1), default=64, show_default=True,
              help="Requests handled at once; more wait their turn.")
@click.option("--failed-login-delay", type=click.FloatRange(0), default=1.0, show_default=True,
              help="Seconds before a wrong password is answered 401 (other callers are not held).")
@click.option("--group-id", default=None,
              help="Run as one of several instances: join this consumer group, which elects the one that writes "
                   "(Confluent's default name: schema-registry). Unset: this instance writes itself.")
@click.option("--advertised-url", default=None,
              help="How the other instances reach this one (http://host:port); default: the address bound.")
@click.option("--forward-cafile", type=click.Path(dir_okay=False, exists=True), default=None,
              help="With --group-id: the CA bundle (PEM) that signed the other instances' HTTPS certificates, "
                   "to verify the leader a write is forwarded to; default: the system's CAs.")
@click.option("--leader-eligibility/--no-leader-eligibility", default=True, show_default=True,
              help="Whether this instance may be elected leader (with --group-id).")
@click.option("--session-timeout-ms", type=click.IntRange(1000, 300_000), default=10_000, show_default=True,
              help="With --group-id: an instance that stops heartbeating loses its place (and its leadership) after this.")
def schema_registry(bootstrap: str, host: str, port: int, topic: str, replication_factor: int, users_file: str | None,
                    max_body_bytes: int, security_protocol: str, sasl_mechanism: str, sasl_username: str | None,
                    sasl_password_file: str | None, ssl_cafile: str | None, ssl_certfile: str | None,
                    ssl_keyfile: str | None, tls_certfile: str | None, tls_keyfile: str | None,
                    tls_client_cafile: str | None, ssl_principal_mapping_rules: str, compatibility: str,
                    rules_file: str | None,
                    max_subjects: int, max_subjects_per_user: int, max_versions: int, max_versions_per_user: int,
                    max_concurrent_requests: int, failed_login_delay: float, group_id: str | None,
                    advertised_url: str | None, forward_cafile: str | None, leader_eligibility: bool,
                    session_timeout_ms: int) -> None:
    """Run a schema registry (Confluent REST API v1) backed by a compacted topic."""
    check_instance_options(host=host, group_id=group_id, advertised_url=advertised_url, forward_cafile=forward_cafile)
    logins = users_file is not None or tls_client_cafile is not None
    if rules_file is not None:
        if not logins:
            raise click.UsageError("--rules-file needs --users-file or --tls-client-cafile (no login, no principal)")
        try:
            load_rules(Path(rules_file))
        except RulesError as exc:
            raise click.UsageError(str(exc)) from None
    if (tls_certfile is None) != (tls_keyfile is None):
        raise click.UsageError("--tls-certfile and --tls-keyfile go together")
    if tls_client_cafile is not None and tls_certfile is None:
        raise click.UsageError("--tls-client-cafile needs --tls-certfile (client certificates need HTTPS)")
    try:
        PrincipalMapper.parse(ssl_principal_mapping_rules)
    except PrincipalMappingError as exc:
        raise click.UsageError(str(exc)) from None
    if not logins and host not in ("127.0.0.1", "localhost", "::1"):
        raise click.UsageError("binding beyond loopback needs --users-file or --tls-client-cafile "
                               "(no credentials, no exposure)")
    client: dict[str, Any] = {"security_protocol": security_protocol}
    if security_protocol.startswith("SASL"):
        if not sasl_username or not sasl_password_file:
            raise click.UsageError(f"{security_protocol} needs --sasl-username and --sasl-password-file")
        client.update(sasl_mechanism=sasl_mechanism, sasl_plain_username=sasl_username,
                      sasl_plain_password=Path(sasl_password_file).read_text().strip())
    if security_protocol.endswith("SSL"):
        client["ssl_context"] = create_ssl_context(cafile=ssl_cafile, certfile=ssl_certfile, keyfile=ssl_keyfile)
    options = RegistryOptions(bootstrap=bootstrap, host=host, port=port, topic=topic,
                              replication_factor=replication_factor,
                              users_file=Path(users_file) if users_file else None, max_body_bytes=max_body_bytes,
                              default_compatibility=Compatibility(compatibility), client_options=tuple(client.items()),
                              rules_file=Path(rules_file) if rules_file else None,
                              limits=Limits(max_subjects, max_subjects_per_user, max_versions, max_versions_per_user),
                              max_concurrent=max_concurrent_requests, failed_login_delay=failed_login_delay,
                              tls_certfile=Path(tls_certfile) if tls_certfile else None,
                              tls_keyfile=Path(tls_keyfile) if tls_keyfile else None,
                              tls_client_cafile=Path(tls_client_cafile) if tls_client_cafile else None,
                              ssl_principal_mapping_rules=ssl_principal_mapping_rules,
                              group_id=group_id, advertised_url=advertised_url.rstrip("/") if advertised_url else None,
                              forward_cafile=Path(forward_cafile) if forward_cafile else None,
                              leader_eligible=leader_eligibility, session_timeout_ms=session_timeout_ms)

    def announce(url: str) -> None:
        click.echo(f"schema-registry={url}")
        sys.stdout.flush()

    run(options, ready=announce)
