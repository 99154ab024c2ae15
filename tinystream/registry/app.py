"""One registry process: read `_schemas`, then serve the REST API until stopped.

`RegistryServer` is what the CLI, `tinystream dev` and tests run: `start()`
returns once the state is rebuilt and the port is bound; `url` says where.
Without a users file it binds loopback only by default (no credentials: no
exposure); with one, every call needs HTTP Basic credentials. With
`tls_client_cafile` (HTTPS only) a client certificate that CA signed is a
login too (mTLS, auth.CertificateAuth): the certificate is asked for, not
required, so Basic callers need none.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from tinystream.registry.auth import BasicAuth, CertificateAuth
from tinystream.registry.authz import RulesFile
from tinystream.registry.forward import Forwarder
from tinystream.registry.leadership import GroupLeadership, Standalone
from tinystream.registry.model import Compatibility
from tinystream.registry.server import (
    DEFAULT_FAILED_LOGIN_DELAY,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONCURRENT,
    RegistryApi,
    build_app,
)
from tinystream.registry.state import Limits, RegistryState
from tinystream.registry.store import TOPIC, SchemaLog
from tinystream.tls_principal import PrincipalMapper


@dataclass(frozen=True, slots=True)
class RegistryOptions:
    bootstrap: str
    host: str = "127.0.0.1"
    port: int = 8081  # Confluent's default
    topic: str = TOPIC
    replication_factor: int = 1
    users_file: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    default_compatibility: Compatibility = Compatibility.BACKWARD
    client_options: tuple[tuple[str, Any], ...] = ()
    rules_file: Path | None = None  # per-subject rules (tinystream/registry/authz.py); needs a login
    limits: Limits = Limits()
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    failed_login_delay: float = DEFAULT_FAILED_LOGIN_DELAY
    tls_certfile: Path | None = None  # serve HTTPS with this certificate chain (PEM) and tls_keyfile
    tls_keyfile: Path | None = None
    tls_client_cafile: Path | None = None  # mTLS: client certificates this CA bundle signed are logins
    ssl_principal_mapping_rules: str = "DEFAULT"  # the certificate's DN -> user name, as the broker's key

    # Several instances (leadership.py): with a group id they elect one writer; the others forward writes to it.
    group_id: str | None = None  # None: this instance writes itself, as a single instance does
    advertised_url: str | None = None  # how the other instances reach this one; None: the URL bound
    forward_cafile: Path | None = None  # the CA bundle that signed the other instances' HTTPS certificates
    leader_eligible: bool = True  # False: never leads (Confluent's leader.eligibility)
    session_timeout_ms: int = 10_000  # a member that stops heartbeating is out after this
    leader_wait_s: float = 10.0  # a write waits this long for a leader during an election, then 50004


def forward_trust(options: RegistryOptions) -> ssl.SSLContext | None:
    """How a follower verifies the leader's HTTPS certificate: the given bundle only (on Kubernetes the cluster
    CA, which signs every instance's certificate); None: the system's CAs, as any HTTPS client."""
    if options.forward_cafile is None:
        return None
    return ssl.create_default_context(cafile=str(options.forward_cafile))


def server_tls(options: RegistryOptions) -> ssl.SSLContext | None:
    """HTTPS when a certificate is given (on Kubernetes: one from the cluster CA, operator/k8s/registry_tls.py)."""
    if options.tls_certfile is None:
        return None
    # Not create_default_context(CLIENT_AUTH): it trusts the system's CAs for client certificates, and any
    # public CA's certificate would then be a login. Only the given bundle signs logins.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(options.tls_certfile, options.tls_keyfile)
    if options.tls_client_cafile is not None:
        context.load_verify_locations(options.tls_client_cafile)
        context.verify_mode = ssl.CERT_OPTIONAL  # asked for, verified when sent; Basic callers send none
    return context


class RegistryServer:
    def __init__(self, options: RegistryOptions) -> None:
        self.options = options
        if options.tls_client_cafile is not None and options.tls_certfile is None:
            raise ValueError("client certificates need HTTPS (tls_certfile)")
        if options.rules_file is not None and options.users_file is None and options.tls_client_cafile is None:
            raise ValueError("a rules file needs a login: a users file or client certificates (no principal)")
        self.certificates = (CertificateAuth(PrincipalMapper.parse(options.ssl_principal_mapping_rules))
                             if options.tls_client_cafile is not None else None)
        self.rules = RulesFile(options.rules_file) if options.rules_file else None  # a bad file fails here
        self.state = RegistryState(default_compatibility=options.default_compatibility, limits=options.limits)
        self.store = SchemaLog(self.state, bootstrap=options.bootstrap, topic=options.topic,
                               replication_factor=options.replication_factor,
                               client_options=dict(options.client_options))
        self.leadership: GroupLeadership | Standalone = Standalone()
        if options.group_id is not None:
            self.leadership = GroupLeadership(
                bootstrap=options.bootstrap, group_id=options.group_id, topic=options.topic,
                eligible=options.leader_eligible, catch_up=self.store.read_to_end,
                client_options=dict(options.client_options), session_timeout_ms=options.session_timeout_ms)
        self.forwarder: Forwarder | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        await self.store.start()
        auth = BasicAuth(self.options.users_file) if self.options.users_file else None
        if self.options.group_id is not None:
            store = self.store
            self.forwarder = Forwarder(self.leadership, applied=lambda: store.applied,
                                       wait_applied=lambda offset: store.wait_applied(offset, timeout_s=store.write_timeout_s),
                                       leader_wait_s=self.options.leader_wait_s, trust=forward_trust(self.options))
        app = build_app(RegistryApi(self.state, self.store), auth=auth, rules=self.rules, certificates=self.certificates,
                        max_body_bytes=self.options.max_body_bytes, max_concurrent=self.options.max_concurrent,
                        failed_login_delay=self.options.failed_login_delay, forwarder=self.forwarder)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        tls = server_tls(self.options)
        site = web.TCPSite(self._runner, self.options.host, self.options.port, ssl_context=tls)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # port 0: the one bound
        self.url = f"{'https' if tls else 'http'}://{self.options.host}:{port}"
        await self.leadership.start(self.options.advertised_url or self.url)
        return self.url

    async def stop(self) -> None:
        await self.leadership.stop()  # first: the group elects another writer while this one shuts down
        if self._runner is not None:
            await self._runner.cleanup()
        if self.forwarder is not None:
            await self.forwarder.close()
        await self.store.stop()


def run(options: RegistryOptions, *, ready: Any = None) -> None:
    """Run in the foreground until interrupted."""
    async def main() -> None:
        server = RegistryServer(options)
        url = await server.start()
        if ready is not None:
            ready(url)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
