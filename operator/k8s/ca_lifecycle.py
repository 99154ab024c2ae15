"""A CA's lifecycle (the cluster CA's, the clients CA's): which CA signs, which are trusted, when brokers roll. Pure.

Two CAs go through it, as Strimzi's: the cluster CA (`CLUSTER`: it signs the broker certificates, clients
trust the brokers with its bundle) and the clients CA (`CLIENTS`: it signs tls TinyStreamUsers'
certificates, the brokers' client listeners trust its bundle). `CaKind` names what differs: the spec
field, the condition, the pod-template annotation that rolls the brokers, the force-renew annotation.

`plan_ca(spec, state, now=..., ...) -> CaPlan` is called once per pass with what status.clusterCa
remembers (`CaState`), the spec (`CaSpec`: spec.security.clusterCa) and, for a CA the user brings, what
the I/O layer read of their Secret (`ProvidedCa`). A rotation of the cluster CA is three rolls, as
Strimzi's CA renewal:

    Steady        bundle [CA n]          broker certificate by n
      | renewal due (renewalDays before expiry), tinystream.io/force-renew-ca changed,
      | or the user's Secret holds another CA (generateCertificateAuthority false)
    TrustingNewCa bundle [n, n+1]        by n      roll 1: every broker trusts both
    RenewingCertificates [n, n+1]        by n+1    roll 2: every broker presents a certificate of n+1
    RemovingOldCa bundle [n+1]           by n+1    roll 3: n is trusted nowhere any more
    Steady (n+1)

The clients CA's rotation takes two (`CaKind.sign_roll` false): no broker presents a certificate of it, so its
RenewingCertificates rolls nothing (its marker is TrustingNewCa's). It is entered once roll 1 is complete,
so a user re-issued from n+1 there is accepted by every broker, and it ends once no tls user is left on n
(`holding`), whatever the brokers run: RemovingOldCa (roll 2) never drops a CA a user still needs.

A rolling phase moves on only once its roll is complete: the StatefulSet's pod template carries the
phase's `marker` (the CA_ANNOTATION), and `rolled_marker` reads the marker every broker pod runs with (all
at the update revision and ready). Clients trust the bundle in the `<cluster>-cluster-ca-cert` Secret,
which holds both CAs from roll 1 until the last. Everything a later pass needs is in the state, so an
operator restarted mid-way carries on where it was (a generated CA is derived again from the master
secret, its generation number and its creation time; a provided CA's certificate is public and kept).
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tinystream.operator.k8s.certificates import fingerprint
from tinystream.operator.k8s.conditions import Condition

#: Pod-template annotation: the CA state the brokers run with (a change rolls them, one at a time).
CA_ANNOTATION = "tinystream.io/cluster-ca"
CLIENTS_CA_ANNOTATION = "tinystream.io/clients-ca"
#: What a cluster made before CA lifecycles was given: its first CA lives this long (cluster_tls.CA_VALIDITY_DAYS).
LEGACY_VALIDITY_DAYS = 3650
CONDITION = "ClusterCa"


class CaPhase(str, enum.Enum):
    STEADY = "Steady"
    TRUST_NEW = "TrustingNewCa"
    SIGN_NEW = "RenewingCertificates"
    DROP_OLD = "RemovingOldCa"


#: A rotation's phases, in order (Steady before and after).
ROTATION = (CaPhase.TRUST_NEW, CaPhase.SIGN_NEW, CaPhase.DROP_OLD)


@dataclass(frozen=True, slots=True)
class CaKind:
    """What differs between the cluster CA and the clients CA (the planner is the same)."""

    title: str  # "cluster CA"
    condition: str  # the condition's type
    annotation: str  # the pod template's marker annotation (a change rolls the brokers)
    force_annotation: str  # a new value on the cluster renews the CA
    status_field: str  # status.<field>
    steps: tuple[str, str, str]  # what each rotation phase (ROTATION) does, for the condition
    sign_roll: bool = True  # RenewingCertificates rolls the brokers (they present a certificate of this CA)

    def rolls(self) -> tuple[CaPhase, ...]:
        """The rotation's phases that roll the brokers, in order."""
        return tuple(p for p in ROTATION if p is not CaPhase.SIGN_NEW or self.sign_roll)


CLUSTER = CaKind("cluster CA", CONDITION, CA_ANNOTATION, "tinystream.io/force-renew-ca", "clusterCa",
                 ("brokers learn to trust the new CA", "brokers get certificates of the new CA",
                  "the old CA leaves the trust bundle"))
CLIENTS = CaKind("clients CA", "ClientsCa", CLIENTS_CA_ANNOTATION, "tinystream.io/force-renew-clients-ca", "clientsCa",
                 ("brokers learn to trust client certificates of the new CA",
                  "users get certificates of the new CA (their Secrets are updated)",
                  "the old CA leaves the client listeners' trust bundle"), sign_roll=False)


class CaReason(str, enum.Enum):
    """The ClusterCa condition's reasons."""

    VALID = "CaValid"
    ROTATING = "CaRotating"
    EXPIRING = "CaExpiringSoon"  # a provided CA in its renewal window: the user must bring a new one
    SECRET_MISSING = "CaSecretMissing"
    SECRET_INVALID = "CaSecretInvalid"
    SECRET_EXPIRED = "CaSecretExpired"
    SECRET_FORBIDDEN = "CaSecretForbidden"


@dataclass(frozen=True, slots=True)
class CaSpec:
    """spec.security.clusterCa (or .clientsCa), and the force-renew annotation's value."""

    generate: bool = True
    validity_days: int = 365
    renewal_days: int = 30
    secret_name: str = ""  # a provided CA's Secret (ca.crt, ca.key); "" with generate
    force_token: str = ""


@dataclass(frozen=True, slots=True)
class Generation:
    """One CA: a generated one is derived from (master secret, number, created, validity_days); a provided
    one is the user's certificate (`provided`, PEM), whose key only their Secret holds."""

    number: int
    created: datetime.datetime
    validity_days: int
    provided: str = ""

    @property
    def not_after(self) -> datetime.datetime:
        if self.provided:
            return x509.load_pem_x509_certificate(self.provided.encode()).not_valid_after_utc
        return self.created + datetime.timedelta(days=self.validity_days)

    @property
    def source(self) -> str:
        return "provided" if self.provided else "generated"

    def same_ca(self, cert_pem: str) -> bool:
        return bool(self.provided) and fingerprint(self.provided) == fingerprint(cert_pem)

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"generation": self.number, "source": self.source, "created": self.created.isoformat(),
                               "validityDays": self.validity_days, "notAfter": self.not_after.isoformat()}
        if self.provided:
            out["certificate"] = self.provided
        return out

    @classmethod
    def from_status(cls, raw: Mapping[str, Any]) -> Generation:
        return cls(int(raw["generation"]), datetime.datetime.fromisoformat(raw["created"]),
                   int(raw["validityDays"]), str(raw.get("certificate") or ""))


@dataclass(frozen=True, slots=True)
class CaState:
    """status.clusterCa: the CA in force, the one coming in (while rotating), and the force token handled."""

    current: Generation
    phase: CaPhase = CaPhase.STEADY
    next: Generation | None = None
    renew_token: str = ""
    reason: str = ""  # why the rotation in progress started

    def to_status(self) -> dict[str, Any]:
        # `next` is always written (None deletes it in a status merge patch once a rotation is over).
        return {**self.current.to_status(), "phase": self.phase.value, "renewToken": self.renew_token,
                "reason": self.reason or None, "next": self.next.to_status() if self.next else None}

    @classmethod
    def from_status(cls, raw: Mapping[str, Any] | None) -> CaState | None:
        if not raw:
            return None
        try:
            nxt = raw.get("next")
            return cls(Generation.from_status(raw), CaPhase(raw.get("phase") or CaPhase.STEADY.value),
                       Generation.from_status(nxt) if nxt else None, str(raw.get("renewToken") or ""),
                       str(raw.get("reason") or ""))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class ProvidedCa:
    """What the user's CA Secret held: a usable CA (cert_pem), or the problem with it."""

    cert_pem: str = ""
    problem: CaReason | None = None
    detail: str = ""


def check_provided(cert_pem: str | None, key_pem: str | None, *, now: datetime.datetime) -> ProvidedCa:
    """A user's ca.crt and ca.key: a CA certificate, valid now, whose key is the one given."""
    if not cert_pem or not key_pem:
        missing = " and ".join(k for k, v in (("ca.crt", cert_pem), ("ca.key", key_pem)) if not v)
        return ProvidedCa(problem=CaReason.SECRET_INVALID, detail=f"it has no {missing}")
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return ProvidedCa(problem=CaReason.SECRET_INVALID, detail=f"ca.crt or ca.key is not PEM ({exc})")
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        return ProvidedCa(problem=CaReason.SECRET_INVALID, detail="ca.key is neither an EC nor an RSA key")
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*raw) != cert.public_key().public_bytes(*raw):
        return ProvidedCa(problem=CaReason.SECRET_INVALID, detail="ca.key is not the key of ca.crt")
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        return ProvidedCa(problem=CaReason.SECRET_INVALID, detail="ca.crt is not a CA (basicConstraints CA:TRUE)")
    if cert.not_valid_after_utc <= now:
        return ProvidedCa(problem=CaReason.SECRET_EXPIRED,
                          detail=f"ca.crt expired {cert.not_valid_after_utc.isoformat()}")
    if cert.not_valid_before_utc > now:
        return ProvidedCa(problem=CaReason.SECRET_INVALID,
                          detail=f"ca.crt is not valid before {cert.not_valid_before_utc.isoformat()}")
    return ProvidedCa(cert_pem=cert_pem)


@dataclass(frozen=True, slots=True)
class CaPlan:
    """What the pass does with the CA: the state to record, the bundle to trust, who signs, the roll marker."""

    state: CaState
    trusted: tuple[Generation, ...]  # the bundle, newest last
    signer: Generation | None  # None: no certificate may be issued in this phase (the signer's key is gone)
    marker: str  # the pod template's CA_ANNOTATION; "" for a first generation in Steady (none)
    condition: Condition
    started: str = ""  # a rotation started in this pass, and why (an Event)
    problem: bool = False  # the provided CA cannot be used: the pass stops with the condition

    @property
    def rotating(self) -> bool:
        return self.state.phase is not CaPhase.STEADY


def marker(state: CaState, kind: CaKind = CLUSTER) -> str:
    """The pod template's CA annotation for a state: every phase that rolls (kind.rolls) has its own; the
    clients CA's RenewingCertificates keeps TrustingNewCa's (the brokers' files are the same)."""
    cur, nxt = state.current.number, state.next.number if state.next else None
    if state.phase is CaPhase.TRUST_NEW or (state.phase is CaPhase.SIGN_NEW and not kind.sign_roll):
        return f"trust-{cur}-{nxt}"
    if state.phase is CaPhase.SIGN_NEW:
        return f"sign-{nxt}-trust-{cur}-{nxt}"
    return "" if cur == 0 else f"ca-{cur}"  # Steady and RemovingOldCa: n+1 alone


class PodView(Protocol):
    """What rolled_marker reads of a broker pod (reconcile.BrokerPod)."""

    name: str
    revision: str | None
    ready: bool
    terminating: bool


def rolled_marker(statefulset: Mapping[str, Any] | None, pods: Sequence[PodView], *, replicas: int,
                  annotation: str = CA_ANNOTATION) -> str | None:
    """The CA marker every broker runs with: the template's, once each of the `replicas` pods is at the
    StatefulSet's update revision, ready and not going; None while a roll is due or under way."""
    if statefulset is None:
        return None
    meta, status = statefulset.get("metadata") or {}, statefulset.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return None  # the StatefulSet controller has not seen the latest template yet
    revision = status.get("updateRevision")
    by_name = {p.name: p for p in pods}
    for ordinal in range(replicas):
        pod = by_name.get(f"{meta.get('name')}-{ordinal}")
        if pod is None or pod.terminating or not pod.ready or not revision or pod.revision != revision:
            return None
    template = ((statefulset.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return str((template.get("annotations") or {}).get(annotation) or "")


def pools_rolled_marker(statefulsets: Sequence[Mapping[str, Any]], pods: Sequence[PodView], *,
                        annotation: str = CA_ANNOTATION) -> str | None:
    """rolled_marker for a cluster whose brokers are its node pools' (node_pools.py): the marker every pool's
    StatefulSet carries and every pod of each runs with; None while any pool's roll is due or under way, while
    the pools' templates disagree (one not updated yet), or with no pool StatefulSet at all."""
    found = {rolled_marker(sts, pods, replicas=int((sts.get("spec") or {}).get("replicas") or 0),
                           annotation=annotation) for sts in statefulsets}
    return found.pop() if len(found) == 1 else None


def first_state(spec: CaSpec, *, created: datetime.datetime, legacy: bool,
                provided: ProvidedCa | None) -> CaState:
    """The state of a cluster seen for the first time: generation 0, from the cluster's creation (a cluster
    made before CA lifecycles keeps the CA it has: LEGACY_VALIDITY_DAYS). The force token present now is
    taken as handled: only a later change renews."""
    if not spec.generate and provided is not None and provided.cert_pem:
        return CaState(Generation(0, created, 0, provided.cert_pem), renew_token=spec.force_token)
    days = LEGACY_VALIDITY_DAYS if legacy else spec.validity_days
    return CaState(Generation(0, created, days), renew_token=spec.force_token)


def _why_rotate(spec: CaSpec, state: CaState, provided: ProvidedCa | None, now: datetime.datetime,
                kind: CaKind) -> str:
    current = state.current
    if not spec.generate:
        if provided is not None and provided.cert_pem and not current.same_ca(provided.cert_pem):
            return "the CA Secret holds another CA"
        return ""
    if current.provided:
        return "generateCertificateAuthority is true again: a generated CA replaces the provided one"
    if spec.force_token != state.renew_token:
        return f"renewal asked for ({kind.force_annotation}: {spec.force_token!r})"
    if current.not_after - now <= datetime.timedelta(days=spec.renewal_days):
        return f"the CA expires {current.not_after.isoformat()} (renewal window {spec.renewal_days} days)"
    return ""


def _advance(state: CaState, rolled: str | None, holding: str, kind: CaKind) -> CaState:
    """The next phase once the roll of this one is complete (and, leaving SIGN_NEW, nothing `holding` it).
    A SIGN_NEW that rolls nothing (the clients CA) waits for `holding` alone: it was entered once every
    broker trusted both CAs, and that holds whatever roll is under way (also the roll 2 an earlier operator
    version started for it, which the pod template's new marker replaces)."""
    if state.phase in kind.rolls() and rolled != marker(state, kind):
        return state
    if state.phase is CaPhase.TRUST_NEW:
        return replace(state, phase=CaPhase.SIGN_NEW)
    if state.phase is CaPhase.SIGN_NEW and not holding:
        assert state.next is not None
        return replace(state, current=state.next, next=None, phase=CaPhase.DROP_OLD)
    if state.phase is CaPhase.DROP_OLD:
        return replace(state, phase=CaPhase.STEADY, reason="")
    return state


def _can_sign(gen: Generation, provided: ProvidedCa | None) -> bool:
    return not gen.provided or (provided is not None and bool(provided.cert_pem) and gen.same_ca(provided.cert_pem))


def _step(phase: CaPhase, kind: CaKind) -> str:
    """The condition's words for a rotation phase: "2/3 ..." for the second of three rolls."""
    text, rolls = kind.steps[ROTATION.index(phase)], kind.rolls()
    if phase not in rolls:  # between two rolls, rolling nothing itself
        done = sum(1 for p in ROTATION[:ROTATION.index(phase)] if p in rolls)
        return f"between rolls {done}/{len(rolls)} and {done + 1}/{len(rolls)}: {text}"
    return f"{rolls.index(phase) + 1}/{len(rolls)} {text}"


def _condition(state: CaState, spec: CaSpec, now: datetime.datetime, *, generation: int | None, kind: CaKind,
               holding: str) -> Condition:
    cur = state.current
    what = f"generation {cur.number} ({cur.source}), expires {cur.not_after.isoformat()}"
    if state.phase is not CaPhase.STEADY:
        nxt = f" to generation {state.next.number}" if state.next else ""
        steps = _step(state.phase, kind)
        wait = f" (waiting for {holding})" if holding and state.phase is CaPhase.SIGN_NEW else ""
        return Condition(kind.condition, True, CaReason.ROTATING.value,
                         f"rotating the {kind.title}{nxt} ({state.reason}): {steps}{wait}; in force {what}", generation)
    if cur.provided and cur.not_after - now <= datetime.timedelta(days=spec.renewal_days):
        return Condition(kind.condition, True, CaReason.EXPIRING.value,
                         f"the provided CA {what}: put a new CA in Secret {spec.secret_name} "
                         "(the operator rotates to it)", generation)
    return Condition(kind.condition, True, CaReason.VALID.value, what, generation)


def plan_ca(spec: CaSpec, state: CaState | None, *, now: datetime.datetime, created: datetime.datetime,
            legacy: bool = False, provided: ProvidedCa | None = None, rolled: str | None = None,
            generation: int | None = None, kind: CaKind = CLUSTER, holding: str = "",
            first: CaState | None = None) -> CaPlan:
    """The CA step of one pass (module docstring). `provided`: what the user's Secret held (generate false);
    `rolled`: rolled_marker of the StatefulSet (of kind.annotation); `legacy`: the cluster had a CA before
    CA lifecycles; `holding`: what still keeps RenewingCertificates from moving on, "" when nothing (the
    clients CA: users whose certificate is not of the new CA yet); `first`: the state to start from when
    there is none, instead of first_state's (the clients CA of a cluster made before it)."""
    if not spec.generate and (provided is None or provided.problem is not None):
        problem = provided.problem if provided is not None else CaReason.SECRET_MISSING
        detail = provided.detail if provided is not None else "not found"
        condition = Condition(kind.condition, False, (problem or CaReason.SECRET_MISSING).value,
                              f"Secret {spec.secret_name} (generateCertificateAuthority false): {detail}; the "
                              "operator never writes it, put ca.crt and ca.key of a valid CA there", generation)
        kept = state or CaState(Generation(0, created, spec.validity_days))
        return CaPlan(kept, (), None, marker(kept, kind), condition, problem=True)
    if state is None:
        state = first or first_state(spec, created=created, legacy=legacy, provided=provided)
    state = _advance(state, rolled, holding, kind)
    started = ""
    if state.phase is CaPhase.STEADY:
        why = _why_rotate(spec, state, provided, now, kind)
        if why:
            number = state.current.number + 1
            nxt = (Generation(number, now, 0, provided.cert_pem) if not spec.generate and provided is not None
                   else Generation(number, now, spec.validity_days))
            state = CaState(state.current, CaPhase.TRUST_NEW, nxt, spec.force_token, why)
            started = f"rotating the {kind.title} from generation {state.current.number} to {number}: {why}"
    if state.phase is CaPhase.TRUST_NEW:
        assert state.next is not None
        trusted: tuple[Generation, ...] = (state.current, state.next)
        signer = state.current if _can_sign(state.current, provided) else None
    elif state.phase is CaPhase.SIGN_NEW:
        assert state.next is not None
        trusted, signer = (state.current, state.next), state.next
    else:
        trusted, signer = (state.current,), state.current
    if signer is not None and not _can_sign(signer, provided):
        signer = None
    return CaPlan(state, trusted, signer, marker(state, kind),
                  _condition(state, spec, now, generation=generation, kind=kind, holding=holding), started)
