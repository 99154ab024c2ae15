"""The schema registry's HTTPS certificate, from the cluster CA (a cluster with listeners.tls).

    Secret demo-schema-registry-tls   registry.crt, registry.key, ca.crt (the cluster CA's bundle)

One certificate for every pod: it names the Service and *.demo-schema-registry-headless.<ns>.svc, each pod's
own name (the instances forward writes to each other by it, trusting the cluster CA).

Issued like the broker certificate (cluster_tls.ensure_security, the same
certificates.renewal_reason rule): when none is recorded, when the CA that
signs changed (a rotation), when its names changed, on the cluster's
renew-certificates annotation, or in the renewal window.
status.schemaRegistry.certificate remembers what was issued (the Secret is
never read back); its serial is an annotation of the registry's pod
template, so a renewal restarts the registry (it reads its certificate once).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.certificates import IssuedRecord, issue, renewal_reason
from tinystream.operator.k8s.cluster_tls import (
    _bundle,
    _ca_pair,
    cluster_ca_plan,
    create_secret,
    replace_secret_data,
)
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.schema_registry import RegistryNames, _metadata


def registry_dns_names(cluster: ClusterSpec, ctx: OperatorContext) -> frozenset[str]:
    """The Service clients call, and every pod by its own name (a wildcard, as the brokers' certificate: a
    scale-up needs no new certificate), where a follower forwards writes (schema_registry.advertised_url)."""
    names, ns = RegistryNames.of(cluster), cluster.namespace
    service, pods = names.service, f"*.{names.headless}.{ns}"
    return frozenset({service, f"{service}.{ns}", f"{service}.{ns}.svc", f"{service}.{ns}.svc.{ctx.cluster_domain}",
                      f"{pods}.svc", f"{pods}.svc.{ctx.cluster_domain}"})


def tls_secret(cluster: ClusterSpec, files: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _metadata(cluster, RegistryNames.of(cluster).tls_secret),
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


@dataclass(frozen=True, slots=True)
class RegistryCertificate:
    record: IssuedRecord | None  # in force after the pass (None: none could be issued yet)
    issued_because: str | None = None


async def trust_bundle(client: KubeClient, master: str, cluster: ClusterSpec, *,
                       now: datetime.datetime) -> str | None:
    """The cluster CA's trust bundle (PEM), to verify the registry with; None while the CA is unusable."""
    plan, _ = await cluster_ca_plan(client, cluster, {"clusterCa": cluster.ca_status}, now=now, rolled=None)
    return None if plan.problem else _bundle(master, cluster, plan)


async def ensure_registry_certificate(client: KubeClient, cluster: ClusterSpec, *, master: str,
                                      current: IssuedRecord | None, ctx: OperatorContext,
                                      now: datetime.datetime) -> RegistryCertificate:
    """Issue (or renew) the registry's certificate when due; `current`: status.schemaRegistry.certificate."""
    plan, provided = await cluster_ca_plan(client, cluster, {"clusterCa": cluster.ca_status}, now=now, rolled=None)
    if plan.problem:
        return RegistryCertificate(current)
    signer = plan.signer or (plan.trusted[-1] if current is None else None)
    ca = _ca_pair(master, cluster, signer, provided) if signer is not None else None
    if ca is None:
        return RegistryCertificate(current)
    dns = registry_dns_names(cluster, ctx)
    reason = renewal_reason(current, ca=ca, dns_names=dns, renew_token=cluster.renew_token, now=now,
                            renewal_days=cluster.cert_renewal_days)
    if reason is None:
        return RegistryCertificate(current)
    cert = issue(ca, RegistryNames.of(cluster).user, dns, now=now, days=cluster.cert_validity_days)
    secret = tls_secret(cluster, {"registry.crt": cert.cert_pem, "registry.key": cert.key_pem,
                                  "ca.crt": _bundle(master, cluster, plan)})
    if not await create_secret(client, secret):
        await replace_secret_data(client, secret)
    return RegistryCertificate(IssuedRecord.of(cert, ca, dns, cluster.renew_token), reason)
