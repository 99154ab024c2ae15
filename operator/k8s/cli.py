"""`tinystream operator`: run the Kubernetes operator (kopf) in the foreground.

Settings: the operator component's (tinystream.config: namespace,
controller.port, dashboard.port, ... from flags, TINYSTREAM_* env, --config)
plus a few facts about its deployment that the Helm chart passes as
environment variables:
    TINYSTREAM_OPERATOR_SERVICE   DNS name of the operator's Service (brokers' controller URL)
    TINYSTREAM_BROKER_IMAGE       image of brokers whose cluster names none
    TINYSTREAM_MANAGE_CRDS        "true": upgrade installed CRDs from TINYSTREAM_CRDS_DIR at start-up
    TINYSTREAM_CRDS_DIR           default: /opt/tinystream/crds (the image), else ./crds
    TINYSTREAM_OPERATOR_HEALTH_PORT  kopf's liveness endpoint (/healthz), default 8081
    TINYSTREAM_PEERING_NAME       the peering object (ClusterKopfPeering when watching all namespaces)
    TINYSTREAM_BROKER_METRICS_PUBLIC  "true": brokers' /metrics without their admin token (the chart's
                                  broker ServiceMonitor scrapes every cluster and holds no cluster's token)

To attach it to the CLI: ("tinystream.operator.k8s.cli", "operator", "operator")
in tinystream/cli/__init__.py; `python -m tinystream.operator.k8s` works already.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import socket
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import kopf

from tinystream.config import load_settings
from tinystream.config.settings import OperatorSettings
from tinystream.controller_auth import ensure_secret_file
from tinystream.log_format import configure, current_format
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.broker_identity import TokenReviewer
from tinystream.operator.k8s.controller_host import OperatorController
from tinystream.operator.k8s.controller_secret import derived_secrets
from tinystream.operator.k8s.controller_tls import ControllerTLS
from tinystream.operator.k8s.dashboard_host import OperatorDashboard
from tinystream.operator.k8s.handlers import Deps, default_connect, make_registry
from tinystream.operator.k8s.master_secret import ensure_dashboard_login, ensure_master_secret, parse_ref
from tinystream.operator.k8s.metrics import OperatorMetrics
from tinystream.operator.k8s.model import OperatorContext

DEFAULT_CRDS_DIRS = (Path("/opt/tinystream/crds"), Path.cwd() / "crds")
log = logging.getLogger(__name__)


def _flag_in(environ: Mapping[str, str], name: str, default: bool = False) -> bool:
    return environ.get(name, str(default)).strip().lower() in ("1", "true", "yes")


def _flag(name: str, default: bool) -> bool:
    return _flag_in(os.environ, name, default)


def _crds_dir() -> Path | None:
    if not _flag("TINYSTREAM_MANAGE_CRDS", True):
        return None
    configured = os.environ.get("TINYSTREAM_CRDS_DIR")
    candidates = [Path(configured)] if configured else list(DEFAULT_CRDS_DIRS)
    return next((p for p in candidates if p.is_dir()), None)


def peering_priority(environ: Mapping[str, str]) -> int:
    """This replica's kopf peering priority: TINYSTREAM_OPERATOR_PRIORITY, else one derived from the pod name.

    kopf pauses every operator that sees a peer of the same priority, so replicas all
    at the default priority were all paused, not one active and the others standing by.
    """
    given = environ.get("TINYSTREAM_OPERATOR_PRIORITY")
    if given:
        return int(given)
    name = environ.get("HOSTNAME") or socket.gethostname()
    return 1 + zlib.crc32(name.encode()) % 1_000_000  # distinct per pod name (collisions: about 1 in a million)


def service_names(operator_service: str) -> frozenset[str]:
    """The names a Service `name.ns.svc.<domain>` answers to in the cluster: the operator's certificate carries them."""
    short, _, _ = operator_service.partition(".svc")
    name, _, namespace = short.partition(".")
    names = {operator_service, name}
    if namespace:
        names |= {f"{name}.{namespace}", f"{name}.{namespace}.svc"}
    return frozenset(names)


def operator_context(environ: Mapping[str, str], settings: OperatorSettings) -> OperatorContext:
    """The deployment facts from the chart's environment and the operator settings; unset ones keep
    OperatorContext's defaults. (Its class attributes are slot descriptors, not the defaults: reading
    `OperatorContext.operator_service` handed kopf a member_descriptor to serialise when run outside a cluster.)"""
    given: dict[str, Any] = {}
    if "TINYSTREAM_BROKER_IMAGE" in environ:
        given["broker_image"] = environ["TINYSTREAM_BROKER_IMAGE"]
    if "TINYSTREAM_OPERATOR_SERVICE" in environ:
        given["operator_service"] = environ["TINYSTREAM_OPERATOR_SERVICE"]
    given["controller_port"] = settings.controller_port
    given["controller_tls"] = settings.controller_tls_enabled
    given["dashboard_port"] = settings.dashboard_port
    given["broker_metrics_public"] = _flag_in(environ, "TINYSTREAM_BROKER_METRICS_PUBLIC")
    if "TINYSTREAM_BROKER_RACK_ROLE" in environ:
        given["broker_rack_role"] = environ["TINYSTREAM_BROKER_RACK_ROLE"]
    return OperatorContext(**given)


async def _from_refs(master_ref: str, login_ref: str | None) -> tuple[str, str | None]:
    """The master secret and the dashboard's login token from their Secrets (master_secret.py), over the
    operator's own API login."""
    info = default_connect(settings=kopf.OperatorSettings())
    if info is None:
        raise click.ClickException("no Kubernetes login (service account or kubeconfig) to read controller.secret.ref")
    client = KubeClient.from_connection_info(info)
    try:
        master = await ensure_master_secret(client, *parse_ref(master_ref))
        login = await ensure_dashboard_login(client, *parse_ref(login_ref)) if login_ref else None
        return master, login
    finally:
        await client.close()


def operator_secrets(settings: OperatorSettings) -> tuple[str, str]:
    """(master secret, dashboard login token): from Secrets on Kubernetes, else from files made once."""
    if settings.secret_ref:
        master, login = asyncio.run(_from_refs(settings.secret_ref, settings.dashboard_login_ref))
        if login is not None:
            return master, login
        # A chart from before dashboard.login.ref: no file to write in a read-only pod, so a token nobody is
        # given (derived from the master secret): the dashboard stays closed until the ref is set.
        log.warning("dashboard.login.ref is not set: the dashboard lets nobody in (upgrade the chart)")
        return master, hmac.new(master.encode(), b"tinystream dashboard login", hashlib.sha256).hexdigest()
    secret_file = Path(settings.secret_file or Path.home() / ".tinystream" / "operator-controller.secret")
    return ensure_secret_file(secret_file), ensure_secret_file(secret_file.parent / "operator-dashboard.token")


@click.command()
@click.option("--log-level", default=None, help="Python logging level (overrides the CLI group's).")
@click.option("--peering/--standalone", default=True, show_default=True,
              help="kopf peering (one active operator) or run alone.")
def operator(log_level: str | None, peering: bool) -> None:
    """Run the TinyStream Kubernetes operator in the foreground."""

    if log_level:
        configure(log_level.upper(), current_format(), force=True)  # keeps the root's --log-format
    settings = load_settings("operator").settings
    assert isinstance(settings, OperatorSettings)
    namespace = settings.namespace
    ctx = operator_context(os.environ, settings)
    # The operator is the controller: brokers reach it at
    # https://<cluster>-controller.<ns>.svc:<controller port>/clusters/<namespace>/<name> (resources.controller_url),
    # an ExternalName Service onto the operator's; TLS with the cluster CA's certificate (controller_tls.py).
    # ... and serves GET /metrics there: reconcile series and each cluster's controller series (metrics.py).
    metrics = OperatorMetrics()
    master, dashboard_login = operator_secrets(settings)
    tls = (ControllerTLS(master, service_names=service_names(ctx.operator_service), cluster_domain=ctx.cluster_domain)
           if ctx.controller_tls else None)
    reviewer = TokenReviewer(lambda: controller.client)
    controller = OperatorController(port=ctx.controller_port, metrics=metrics.controller,
                                    secret_source=derived_secrets(master), tls=tls,
                                    brokers=reviewer, legacy_brokers=reviewer.legacy)
    # Every cluster's dashboard on dashboard.port (the chart's Service port "dashboard"); 0: none.
    dashboard = (OperatorDashboard(controller, port=ctx.dashboard_port, login_token=dashboard_login)
                 if ctx.dashboard_port else None)
    deps = Deps(connect=default_connect, ctx=ctx, crds_dir=_crds_dir(), controller=controller,
                health_interval_s=float(getattr(settings, "reconcile_interval_s", 10)), metrics=metrics,
                user_secret_interval_s=float(settings.user_secret_interval_s),
                dashboard=dashboard, master_secret=master, stop_flag=asyncio.Event())
    health_port = int(os.environ.get("TINYSTREAM_OPERATOR_HEALTH_PORT", "8081"))
    kopf.run(
        registry=make_registry(deps),
        clusterwide=namespace is None,
        namespaces=[namespace] if namespace else (),
        standalone=not peering,
        peering_name=os.environ.get("TINYSTREAM_PEERING_NAME") or None,
        priority=peering_priority(os.environ),
        liveness_endpoint=f"http://0.0.0.0:{health_port}/healthz",
        stop_flag=deps.stop_flag,  # set at SIGTERM once the controller API stood down (hand_over.py)
    )
