"""The Secrets a secured cluster's brokers mount: its CA's certificate, the broker certificate, SCRAM users.

For a cluster `demo`:

    Secret demo-cluster-ca-cert   ca.crt (the trust bundle)   clients trust the brokers with it
    Secret demo-broker-tls        broker.pem (chain + key), ca.crt (the bundle)   (tls) renewed in place
    Secret demo-broker-tls        clients-ca.crt (the clients CA bundle: listeners with tls authentication)
    Secret demo-clients-ca-cert   ca.crt (the clients CA bundle, public)
    Secret demo-cluster-ca        ca.crt, ca.key     the user's own CA (generateCertificateAuthority false): read only
    Secret demo-clients-ca        ca.crt, ca.key     the same for the clients CA
    Secret demo-broker-users      users.json, broker-password         (scram-sha-512, or no tls) made once

Without TLS brokers replicate as the inter-broker SCRAM user, so that Secret is made for a cluster with
neither TLS nor authentication too.

The operator may create and patch Secrets but not read them, so everything it
needs again is derived from its master secret (controller_secret.py) and the
cluster's uid: the CA (certificates.derived_ca) and the inter-broker password;
what it issued is remembered in status.certificates, the CA's generation and rotation phase in
status.clusterCa (ca_lifecycle.py: a rotation rolls the brokers three times). A renewal patches the
Secret's data; the kubelet updates the mounted files and the brokers reload
them for new connections, with no restart (certificates.py says when).

The operator never writes into a Secret it does not own: a create that meets a Secret of the same name,
and every patch, first test (RFC 6902 `test`, atomic in the API server) that the Secret's owner is the
resource it is for; another's Secret raises ForeignSecret and is left as it is.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.ca_lifecycle import (
    CLIENTS,
    CLUSTER,
    CaKind,
    CaPhase,
    CaPlan,
    CaReason,
    CaSpec,
    CaState,
    Generation,
    ProvidedCa,
    check_provided,
    plan_ca,
)
from tinystream.operator.k8s.certificates import (
    IssuedRecord,
    KeyPair,
    broker_dns_names,
    derived_ca,
    fingerprint,
    hosts_digest,
    issue,
    renewal_reason,
)
from tinystream.operator.k8s.errors import Conflict, Forbidden, KubeApiError, NotFound
from tinystream.operator.k8s.external import split_hosts
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.resources import (
    CLIENTS_CA_FILE,
    CONTROLLER_CA_FILE,
    Names,
    broker_user,
    labels,
    owner_reference,
    tokens_name,
)
from tinystream.scram_users import UserStore

CA_VALIDITY_DAYS = 3650


@dataclass(frozen=True, slots=True)
class SecurityOutcome:
    """What a pass did: the status to record, and a renewal to announce (an Event)."""

    certificates: dict[str, str] | None = None
    issued_because: str | None = None
    ca: CaPlan | None = None  # the CA step (TLS only): its condition, marker and whether it stops the pass
    ca_status: dict[str, Any] | None = None  # status.clusterCa to record
    clients: CaPlan | None = None  # the clients CA step (a listener authenticates by certificate)
    clients_status: dict[str, Any] | None = None  # status.clientsCa to record


def derived_secret(master: str, cluster: ClusterSpec, purpose: str) -> bytes:
    """A per-cluster secret for one purpose, the same after an operator restart (a new uid: a new one)."""
    return hmac.new(master.encode(), f"{cluster.namespace}/{cluster.name}/{cluster.uid}/{purpose}".encode(),
                    hashlib.sha256).digest()


def cluster_ca(master: str, cluster: ClusterSpec) -> KeyPair:
    """The first generation's key with CA_VALIDITY_DAYS: a cluster's CA before its CA step first ran, and the
    controller API's stand-in for a CA the user provided (controller_ca)."""
    return derived_ca(derived_secret(master, cluster, "cluster-ca"), cluster.name, cluster.namespace,
                      created=cluster_created(cluster), days=CA_VALIDITY_DAYS)


def controller_ca(master: str, cluster: ClusterSpec) -> tuple[KeyPair, str]:
    """Who signs the cluster's controller API certificate (controller_tls.py) and the bundle its brokers
    verify it with (controller-ca.crt, controller_secret.py), from status.clusterCa alone, so an operator
    restart serves the same: the controller follows the cluster CA's rotation phase by phase.

    A generated generation is itself; a generation the user provided is stood in for by `cluster_ca` (its
    key is in a Secret the operator reads only in a pass, and the controller must answer before one). The
    signer moves to the new CA in RenewingCertificates, once every broker was rolled trusting both."""
    state = CaState.from_status(cluster.ca_status) if cluster.tls else None
    if state is None:  # no TLS listener, or the CA step has not run yet: the first generation's key
        fixed = cluster_ca(master, cluster)
        return fixed, fixed.cert_pem

    def pair(generation: Generation) -> KeyPair:
        return cluster_ca(master, cluster) if generation.provided else generation_ca(master, cluster, generation)

    rotating = state.phase in (CaPhase.TRUST_NEW, CaPhase.SIGN_NEW) and state.next is not None
    trusted = (state.current, state.next) if rotating and state.next is not None else (state.current,)
    signer = state.next if state.phase is CaPhase.SIGN_NEW and state.next is not None else state.current
    bundle = "".join(dict.fromkeys(pair(g).cert_pem for g in trusted))
    return pair(signer), bundle


def broker_password(master: str, cluster: ClusterSpec) -> str:
    return base64.urlsafe_b64encode(derived_secret(master, cluster, "broker-password")).rstrip(b"=").decode()


def _secret(cluster: ClusterSpec, name: str, files: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": cluster.namespace, "labels": labels(cluster, "security"),
                         "ownerReferences": [owner_reference(cluster)]},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


class ForeignSecret(Exception):
    """A Secret of the name the operator would write is there, and not owned by the resource it is for:
    the operator never writes into it (it may be anyone's: another app's credentials, the chart's)."""

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(f"Secret {namespace}/{name} exists and is not owned by this resource: "
                         "the operator leaves it alone (rename or delete it)")
        self.name = name


def _owner_test(secret: Mapping[str, Any]) -> dict[str, Any]:
    """An RFC 6902 `test`: the Secret's first ownerReference is the one the operator made it with."""
    return {"op": "test", "path": "/metadata/ownerReferences/0/uid",
            "value": secret["metadata"]["ownerReferences"][0]["uid"]}


async def patch_owned_secret(client: KubeClient, secret: Mapping[str, Any], operations: list[dict[str, Any]]) -> None:
    """Apply `operations` only if the Secret there is ours (all or none, in the API server); else ForeignSecret."""
    meta = secret["metadata"]
    try:
        await client.patch("v1", "Secret", meta["name"], meta["namespace"], [_owner_test(secret), *operations],
                           json_patch=True)
    except NotFound:
        return  # gone meanwhile: the next pass makes it again
    except KubeApiError as exc:
        if exc.status in (400, 422):  # the test failed: another owner, or no owner at all
            raise ForeignSecret(meta["name"], meta["namespace"]) from exc
        raise


async def create_secret(client: KubeClient, secret: dict[str, Any]) -> bool:
    """Create `secret`: True when made, False when ours is there (a Conflict, and the Secret there names the
    same owner: it cannot be read to compare, but its owner can be tested). ForeignSecret when another's is."""
    try:
        await client.create(secret)
    except Conflict:
        await patch_owned_secret(client, secret, [])
        return False
    return True


async def replace_secret_data(client: KubeClient, secret: dict[str, Any]) -> None:
    """Patch the data of our Secret that is there (a renewal): the kubelet updates the mounted files."""
    await patch_owned_secret(client, secret, [{"op": "add", "path": "/data", "value": secret["data"]}])


async def _create_once(client: KubeClient, secret: dict[str, Any]) -> None:
    await create_secret(client, secret)  # when there, made before from the same derived secrets


async def _create_or_replace_data(client: KubeClient, secret: dict[str, Any]) -> None:
    if not await create_secret(client, secret):
        await replace_secret_data(client, secret)


def generation_ca(master: str, cluster: ClusterSpec, generation: Generation, kind: CaKind = CLUSTER) -> KeyPair:
    """A generated CA of the cluster: the cluster CA's generation 0 is `cluster_ca`'s key, each later one
    (and every clients CA) a key of its own."""
    if kind is CLUSTER:
        purpose = "cluster-ca" if generation.number == 0 else f"cluster-ca-{generation.number}"
    else:
        purpose = f"clients-ca-{generation.number}"
    return derived_ca(derived_secret(master, cluster, purpose), cluster.name, cluster.namespace,
                      created=generation.created, days=generation.validity_days, title=kind.title)


def cluster_created(cluster: ClusterSpec) -> datetime.datetime:
    return (datetime.datetime.fromisoformat(cluster.created.replace("Z", "+00:00")) if cluster.created
            else datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))


async def read_provided_ca(client: KubeClient, cluster: ClusterSpec, *, now: datetime.datetime,
                           spec: CaSpec | None = None) -> tuple[ProvidedCa, KeyPair | None]:
    """The user's CA Secret (generateCertificateAuthority false), checked; read only, never written.

    The operator has no `get` on Secrets by default: the user grants it on this one Secret (a Role with
    resourceNames, docs/security.md); until then the condition says so."""
    name = (spec or cluster.cluster_ca).secret_name
    try:
        secret = await client.get("v1", "Secret", name, cluster.namespace)
    except Forbidden:
        return ProvidedCa(problem=CaReason.SECRET_FORBIDDEN,
                          detail="the operator may not read it; grant its service account get on this one "
                                 "Secret (a Role with resourceNames, see docs/security.md)"), None
    if secret is None:
        return ProvidedCa(problem=CaReason.SECRET_MISSING, detail="not found"), None
    data = secret.get("data") or {}

    def text(key: str) -> str | None:
        try:
            return base64.b64decode(data[key]).decode() if data.get(key) else None
        except (ValueError, UnicodeDecodeError):
            return None

    cert_pem, key_pem = text("ca.crt"), text("ca.key")
    provided = check_provided(cert_pem, key_pem, now=now)
    return provided, (KeyPair(provided.cert_pem, key_pem or "") if provided.cert_pem else None)


def _ca_pair(master: str, cluster: ClusterSpec, generation: Generation, provided: KeyPair | None,
             kind: CaKind = CLUSTER) -> KeyPair | None:
    if not generation.provided:
        return generation_ca(master, cluster, generation, kind)
    if provided is not None and generation.same_ca(provided.cert_pem):
        return provided
    return None


def _bundle(master: str, cluster: ClusterSpec, plan: CaPlan, kind: CaKind = CLUSTER) -> str:
    return "".join(g.provided or generation_ca(master, cluster, g, kind).cert_pem for g in plan.trusted)


async def cluster_ca_plan(client: KubeClient, cluster: ClusterSpec, status: Mapping[str, Any] | None, *,
                          now: datetime.datetime, rolled: str | None) -> tuple[CaPlan, KeyPair | None]:
    """The CA step's plan (ca_lifecycle.plan_ca) from status.clusterCa, with the user's Secret read if asked."""
    provided, pair = (await read_provided_ca(client, cluster, now=now) if not cluster.cluster_ca.generate
                      else (None, None))
    status = status or {}
    plan = plan_ca(cluster.cluster_ca, CaState.from_status(status.get("clusterCa")), now=now,
                   created=cluster_created(cluster), legacy=bool(status.get("certificates")), provided=provided,
                   rolled=rolled, generation=cluster.generation)
    return plan, pair


async def signing_ca(client: KubeClient, master: str, cluster: ClusterSpec, *,
                     now: datetime.datetime) -> tuple[KeyPair, str] | None:
    """The clients CA that signs a tls user's certificate now, and the cluster CA's trust bundle (PEM: the
    user's ca.crt, to verify the brokers with); None while none may sign (a provided CA's Secret is
    unusable, the cluster has not recorded its clients CA yet, or a cluster from before the clients CA is in
    its first rotation step: the user waits for the next)."""
    if not cluster.clients_ca_status:
        return None  # the cluster's pass records status.clientsCa first
    plan, pair = await cluster_ca_plan(client, cluster, {"clusterCa": cluster.ca_status}, now=now, rolled=None)
    if plan.problem:
        return None
    bundle = _bundle(master, cluster, plan)
    clients, clients_pair = await clients_ca_plan(client, cluster, {"clientsCa": cluster.clients_ca_status},
                                                  now=now, rolled=None)
    signer = clients.signer
    ca = _ca_pair(master, cluster, signer, clients_pair, CLIENTS) if signer is not None else None
    return (ca, bundle) if ca is not None else None


def users_holding(users: list[Mapping[str, Any]], cluster: ClusterSpec, new_ca_pem: str) -> str:
    """The tls TinyStreamUsers of the cluster whose recorded certificate is not of the new clients CA yet
    (RenewingCertificates waits for them: the old CA is dropped only once none needs it); "" for none."""
    want = fingerprint(new_ca_pem)
    behind = sorted(
        (u.get("metadata") or {}).get("name", "") for u in users
        if (u.get("spec") or {}).get("cluster") == cluster.name
        and ((u.get("spec") or {}).get("authentication") or {}).get("type") == "tls"
        and not (u.get("metadata") or {}).get("deletionTimestamp")
        and ((u.get("status") or {}).get("certificate") or {}).get("ca") != want)
    if not behind:
        return ""
    shown = ", ".join(behind[:5]) + (f" and {len(behind) - 5} more" if len(behind) > 5 else "")
    return f"users whose certificate is not of the new CA yet: {shown}"


def next_clients_ca(master: str, cluster: ClusterSpec) -> str:
    """The certificate of the clients CA coming in while status.clientsCa is RenewingCertificates, else ""."""
    state = CaState.from_status(cluster.clients_ca_status)
    if state is None or state.phase is not CaPhase.SIGN_NEW or state.next is None:
        return ""
    return state.next.provided or generation_ca(master, cluster, state.next, CLIENTS).cert_pem


LEGACY_REASON = "the cluster was made before the clients CA: its users' certificates are of the cluster CA"


def legacy_clients_state(spec: CaSpec, cluster_ca_pem: str, provided: ProvidedCa | None, *,
                         now: datetime.datetime) -> CaState:
    """The clients CA of a cluster made before it, whose users were signed by the cluster CA: a rotation
    from the cluster CA's certificate (generation 0, trusted for client certificates until step 3, signing
    nothing) to the first clients CA, so every user is re-issued and none is refused meanwhile."""
    nxt = (Generation(1, now, 0, provided.cert_pem) if not spec.generate and provided is not None
           else Generation(1, now, spec.validity_days))
    return CaState(Generation(0, now, 0, cluster_ca_pem), CaPhase.TRUST_NEW, nxt, spec.force_token, LEGACY_REASON)


async def clients_ca_plan(client: KubeClient, cluster: ClusterSpec, status: Mapping[str, Any] | None, *,
                          now: datetime.datetime, rolled: str | None, holding: str = "",
                          cluster_ca_pem: str = "") -> tuple[CaPlan, KeyPair | None]:
    """The clients CA step's plan from status.clientsCa; `cluster_ca_pem`: the cluster CA bundle in force
    when the cluster had TLS before it had a clients CA (legacy_clients_state), else ""."""
    spec = cluster.clients_ca
    provided, pair = (await read_provided_ca(client, cluster, now=now, spec=spec) if not spec.generate
                      else (None, None))
    state = CaState.from_status((status or {}).get("clientsCa"))
    first = (legacy_clients_state(spec, cluster_ca_pem, provided, now=now)
             if state is None and cluster_ca_pem and (spec.generate or (provided and provided.cert_pem)) else None)
    plan = plan_ca(spec, state, now=now, created=now if cluster_ca_pem else cluster_created(cluster),
                   provided=provided, rolled=rolled, generation=cluster.generation, kind=CLIENTS, holding=holding,
                   first=first)
    return plan, pair


async def ensure_security(client: KubeClient, cluster: ClusterSpec, status: Mapping[str, Any] | None, *,
                          master: str, ctx: OperatorContext, now: datetime.datetime,
                          external_hosts: frozenset[str] = frozenset(), rolled: str | None = None,
                          clients_rolled: str | None = None, holding: str = "") -> SecurityOutcome:
    """Make (or renew) the Secrets spec.listeners asks for: the SCRAM users whenever brokers or clients log
    in with SCRAM (a cluster without TLS replicates as the inter-broker user), the CA bundle and broker
    certificate with TLS; the certificate names `external_hosts` too (external.certificate_hosts), and a
    change of them renews it. `rolled`: the CA marker every broker runs with (ca_lifecycle.rolled_marker);
    `clients_rolled`, `holding`: the clients CA's marker, and the users not yet re-issued in its rotation."""
    names = Names.of(cluster)
    if cluster.needs_scram_users:
        users = UserStore()
        password = broker_password(master, cluster)
        users.set_password(broker_user(cluster), password)
        await _create_once(client, _secret(cluster, names.broker_users, {
            "users.json": json.dumps(users.to_json(), indent=1), "broker-password": password}))
    if not cluster.tls:
        return SecurityOutcome()
    plan, provided = await cluster_ca_plan(client, cluster, status, now=now, rolled=rolled)
    if plan.problem:
        return SecurityOutcome(ca=plan)
    bundle = _bundle(master, cluster, plan)
    clients, clients_status, clients_file = None, None, {}
    if cluster.tls_clients:
        clients, clients_status = await _ensure_clients_ca(client, cluster, status, master=master, now=now,
                                                           rolled=clients_rolled, holding=holding, cluster_bundle=bundle)
        if clients.problem:
            return SecurityOutcome(ca=plan, clients=clients)
        clients_file = {CLIENTS_CA_FILE: _bundle(master, cluster, clients, CLIENTS)}
    written = hosts_digest(frozenset({bundle}))
    ca_status = {**plan.state.to_status(), "bundle": written}
    bundle_changed = ((status or {}).get("clusterCa") or {}).get("bundle") != written
    ca_secret = _secret(cluster, names.ca_cert, {"ca.crt": bundle})
    await (_create_or_replace_data(client, ca_secret) if bundle_changed else _create_once(client, ca_secret))
    if bundle_changed and ctx.controller_tls:
        await _rewrite_controller_bundle(client, master, dataclasses.replace(cluster, ca_status=ca_status))
    dns = broker_dns_names(cluster.name, cluster.namespace, ctx.cluster_domain) | external_hosts
    current = IssuedRecord.from_status((status or {}).get("certificates"))
    signer = plan.signer or (plan.trusted[-1] if current is None else None)
    ca = _ca_pair(master, cluster, signer, provided) if signer is not None else None
    reason = (renewal_reason(current, ca=ca, dns_names=dns, renew_token=cluster.renew_token, now=now,
                             renewal_days=cluster.cert_renewal_days) if ca is not None else None)
    if reason is None:
        if bundle_changed:  # the broker certificate stays; the brokers' trust bundle changes (a roll follows)
            tls_secret = _secret(cluster, names.broker_tls, {"ca.crt": bundle})
            if not await create_secret(client, tls_secret):
                await patch_owned_secret(client, tls_secret, [
                    {"op": "add", "path": "/data/ca.crt", "value": tls_secret["data"]["ca.crt"]}])
        return SecurityOutcome(certificates=current.to_status() if current else None, ca=plan, ca_status=ca_status,
                               clients=clients, clients_status=clients_status)
    assert ca is not None
    dns_names, ip_addresses = split_hosts(dns)
    broker = issue(ca, broker_user(cluster), dns_names, now=now, days=cluster.cert_validity_days,
                   ip_addresses=ip_addresses)
    await _create_or_replace_data(client, _secret(cluster, names.broker_tls, {
        "broker.pem": broker.cert_pem + broker.key_pem, "ca.crt": bundle, **clients_file}))
    record = IssuedRecord.of(broker, ca, dns, cluster.renew_token)
    return SecurityOutcome(certificates=record.to_status(), issued_because=reason, ca=plan, ca_status=ca_status,
                           clients=clients, clients_status=clients_status)


async def _rewrite_controller_bundle(client: KubeClient, master: str, cluster: ClusterSpec) -> None:
    """controller-ca.crt in the broker tokens Secret as the CA state just planned has it (controller_ca), before
    the roll that state starts: a broker pod made from now on trusts every CA the controller may sign with.
    The Secret is made when the cluster's controller opens (controller_secret.py): absent, it is left to that."""
    _, bundle = controller_ca(master, cluster)
    owned = {"metadata": {"name": tokens_name(cluster.name), "namespace": cluster.namespace,
                          "ownerReferences": [owner_reference(cluster)]}}
    await patch_owned_secret(client, owned, [{"op": "add", "path": f"/data/{CONTROLLER_CA_FILE}",
                                              "value": base64.b64encode(bundle.encode()).decode()}])


async def _ensure_clients_ca(client: KubeClient, cluster: ClusterSpec, status: Mapping[str, Any] | None, *,
                             master: str, now: datetime.datetime, rolled: str | None, holding: str,
                             cluster_bundle: str) -> tuple[CaPlan, dict[str, Any] | None]:
    """The clients CA step: its bundle into the broker TLS Secret (clients-ca.crt, the client listeners'
    truststore) and into <cluster>-clients-ca-cert; status.clientsCa to record."""
    status = status or {}
    legacy = not status.get("clientsCa") and bool(status.get("clusterCa") or status.get("certificates"))
    plan, _ = await clients_ca_plan(client, cluster, status, now=now, rolled=rolled, holding=holding,
                                    cluster_ca_pem=cluster_bundle if legacy else "")
    if plan.problem:
        return plan, None
    names = Names.of(cluster)
    bundle = _bundle(master, cluster, plan, CLIENTS)
    written = hosts_digest(frozenset({bundle}))
    secret = _secret(cluster, f"{cluster.name}-clients-ca-cert", {"ca.crt": bundle})
    if (status.get("clientsCa") or {}).get("bundle") != written:
        await _create_or_replace_data(client, secret)
        tls_secret = _secret(cluster, names.broker_tls, {CLIENTS_CA_FILE: bundle})
        if not await create_secret(client, tls_secret):
            await patch_owned_secret(client, tls_secret, [
                {"op": "add", "path": f"/data/{CLIENTS_CA_FILE}", "value": tls_secret["data"][CLIENTS_CA_FILE]}])
    else:
        await _create_once(client, secret)
    return plan, {**plan.state.to_status(), "bundle": written}
