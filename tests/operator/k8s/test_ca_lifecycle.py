"""The CAs' lifecycle, planned with an injected clock: renewal, force-renew, the cluster CA's three rolls and the
clients CA's two, a provided CA."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tinystream.operator.k8s.ca_lifecycle import (
    CA_ANNOTATION,
    CLIENTS,
    CLUSTER,
    CaKind,
    CaPhase,
    CaReason,
    CaSpec,
    CaState,
    check_provided,
    plan_ca,
    rolled_marker,
)
from tinystream.operator.k8s.certificates import (
    IssuedRecord,
    broker_dns_names,
    derived_ca,
    fingerprint,
    issue,
    renewal_reason,
)
from tinystream.operator.k8s.cluster_tls import (
    LEGACY_REASON,
    generation_ca,
    legacy_clients_state,
    signing_ca,
    users_holding,
)
from tinystream.operator.k8s.model import ClusterSpec
from tinystream.operator.k8s.reconcile import BrokerPod

DAY = datetime.timedelta(days=1)
CREATED = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SPEC = CaSpec(validity_days=100, renewal_days=10)


def steps(spec: CaSpec, state: CaState | None, now: datetime.datetime, rolled: str | None = None, **kw):
    plan = plan_ca(spec, state, now=now, created=CREATED, rolled=rolled, **kw)
    return plan, CaState.from_status(plan.state.to_status())  # as status keeps it: a restart resumes from it


def test_a_new_cluster_starts_with_generation_0_and_no_roll_marker() -> None:
    plan, _ = steps(SPEC, None, CREATED + DAY)
    assert plan.state.current.number == 0 and plan.state.phase is CaPhase.STEADY
    assert plan.state.current.not_after == CREATED + 100 * DAY
    assert plan.marker == ""  # an upgraded operator does not roll anything
    assert plan.condition.reason == CaReason.VALID.value and plan.condition.status is True
    legacy, _ = steps(SPEC, None, CREATED + DAY, legacy=True)  # made before CA lifecycles: its CA stays
    assert legacy.state.current.not_after == CREATED + 3650 * DAY


def test_renewal_starts_renewal_days_before_expiry_and_takes_three_complete_rolls() -> None:
    _, state = steps(SPEC, None, CREATED)
    before, state = steps(SPEC, state, CREATED + 89 * DAY)
    assert before.state.phase is CaPhase.STEADY  # 11 days left: not yet
    plan, state = steps(SPEC, state, CREATED + 91 * DAY)
    assert plan.state.phase is CaPhase.TRUST_NEW and "expires" in plan.started
    assert [g.number for g in plan.trusted] == [0, 1] and plan.signer.number == 0
    assert plan.marker == "trust-0-1" and plan.condition.reason == CaReason.ROTATING.value
    assert state.next.created == CREATED + 91 * DAY and state.next.validity_days == 100
    # The roll is not complete (another marker, or none): the phase holds.
    for rolled in (None, "", "ca-7"):
        held, _ = steps(SPEC, state, CREATED + 92 * DAY, rolled=rolled)
        assert held.state.phase is CaPhase.TRUST_NEW and held.started == ""
    plan, state = steps(SPEC, state, CREATED + 92 * DAY, rolled="trust-0-1")
    assert plan.state.phase is CaPhase.SIGN_NEW and plan.signer.number == 1
    assert [g.number for g in plan.trusted] == [0, 1] and plan.marker == "sign-1-trust-0-1"
    plan, state = steps(SPEC, state, CREATED + 93 * DAY, rolled="sign-1-trust-0-1")
    assert plan.state.phase is CaPhase.DROP_OLD and [g.number for g in plan.trusted] == [1]
    assert plan.marker == "ca-1" and plan.signer.number == 1
    plan, state = steps(SPEC, state, CREATED + 94 * DAY, rolled="ca-1")
    assert plan.state.phase is CaPhase.STEADY and plan.marker == "ca-1" and plan.state.next is None
    assert plan.state.current.not_after == CREATED + 191 * DAY
    assert plan.condition.reason == CaReason.VALID.value and "generation 1" in plan.condition.message


def test_force_renew_rotates_on_a_new_annotation_value_only() -> None:
    _, state = steps(CaSpec(force_token="a"), None, CREATED)  # there at creation: already handled
    plan, state = steps(CaSpec(force_token="a"), state, CREATED + DAY)
    assert plan.state.phase is CaPhase.STEADY
    plan, state = steps(CaSpec(force_token="b"), state, CREATED + DAY)
    assert plan.state.phase is CaPhase.TRUST_NEW and "force-renew-ca" in plan.started
    assert state.renew_token == "b"


def test_an_operator_restart_mid_rotation_resumes_with_the_same_plan() -> None:
    _, state = steps(SPEC, None, CREATED)
    _, state = steps(SPEC, state, CREATED + 95 * DAY)
    first, _ = steps(SPEC, state, CREATED + 96 * DAY)
    again, _ = steps(SPEC, CaState.from_status(first.state.to_status()), CREATED + 96 * DAY)
    assert (again.marker, again.trusted, again.signer) == (first.marker, first.trusted, first.signer)


def test_validity_days_changed_applies_to_the_next_ca() -> None:
    _, state = steps(SPEC, None, CREATED)
    plan, _ = steps(CaSpec(validity_days=500, renewal_days=10), state, CREATED + DAY)
    assert plan.state.current.validity_days == 100 and plan.state.phase is CaPhase.STEADY


def _ca(name: str, days: int = 365, now: datetime.datetime = CREATED, ca: bool = True) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - DAY)
            .not_valid_after(now + days * DAY)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


BYO = CaSpec(generate=False, secret_name="demo-cluster-ca")


def test_a_provided_ca_that_is_missing_or_unusable_stops_with_a_condition() -> None:
    missing = plan_ca(BYO, None, now=CREATED, created=CREATED, provided=None)
    assert missing.problem and missing.condition.status is False
    assert missing.condition.reason == CaReason.SECRET_MISSING.value and "demo-cluster-ca" in missing.condition.message
    cert, key = _ca("mine")
    other_cert, _ = _ca("other")
    assert check_provided(cert, key, now=CREATED).cert_pem == cert
    assert check_provided(other_cert, key, now=CREATED).problem is CaReason.SECRET_INVALID  # key of another
    assert check_provided(cert, None, now=CREATED).detail == "it has no ca.key"
    assert check_provided("junk", key, now=CREATED).problem is CaReason.SECRET_INVALID
    leaf, leaf_key = _ca("leaf", ca=False)
    assert "not a CA" in check_provided(leaf, leaf_key, now=CREATED).detail
    expired = check_provided(cert, key, now=CREATED + 400 * DAY)
    assert expired.problem is CaReason.SECRET_EXPIRED
    plan = plan_ca(BYO, None, now=CREATED, created=CREATED, provided=expired)
    assert plan.problem and plan.condition.reason == CaReason.SECRET_EXPIRED.value


def test_a_new_ca_in_the_users_secret_is_rotated_to_and_the_old_one_signs_nothing() -> None:
    old_cert, old_key = _ca("old")
    plan, state = steps(BYO, None, CREATED, provided=check_provided(old_cert, old_key, now=CREATED))
    assert plan.state.current.provided == old_cert and plan.signer is not None and not plan.rotating
    new_cert, new_key = _ca("new")
    provided = check_provided(new_cert, new_key, now=CREATED)
    plan, state = steps(BYO, state, CREATED + DAY, provided=provided)
    assert plan.state.phase is CaPhase.TRUST_NEW and [g.provided for g in plan.trusted] == [old_cert, new_cert]
    assert plan.signer is None  # the old key left the Secret: the broker certificate stays as it is
    plan, state = steps(BYO, state, CREATED + DAY, provided=provided, rolled=plan.marker)
    assert plan.signer.provided == new_cert
    plan, state = steps(BYO, state, CREATED + DAY, provided=provided, rolled=plan.marker)
    assert [g.provided for g in plan.trusted] == [new_cert]


def test_a_provided_ca_near_expiry_is_reported_not_replaced() -> None:
    cert, key = _ca("mine", days=20)
    plan = plan_ca(BYO, None, now=CREATED + 15 * DAY, created=CREATED,
                   provided=check_provided(cert, key, now=CREATED + 15 * DAY))
    assert plan.condition.reason == CaReason.EXPIRING.value and not plan.rotating


def _sts(annotation: str, *, generation: int = 2, observed: int = 2) -> dict:
    return {"metadata": {"name": "demo-broker", "generation": generation},
            "spec": {"template": {"metadata": {"annotations": {CA_ANNOTATION: annotation}}}},
            "status": {"observedGeneration": observed, "updateRevision": "r2"}}


def test_rolled_marker_needs_every_broker_at_the_update_revision_and_ready() -> None:
    pods = [BrokerPod(f"demo-broker-{i}", i, True, "r2") for i in range(3)]
    assert rolled_marker(_sts("trust-0-1"), pods, replicas=3) == "trust-0-1"
    assert rolled_marker(_sts("trust-0-1", observed=1), pods, replicas=3) is None  # template not seen yet
    assert rolled_marker(_sts("trust-0-1"), pods[:2], replicas=3) is None
    assert rolled_marker(_sts("trust-0-1"), [*pods[:2], BrokerPod("demo-broker-2", 2, True, "r1")], replicas=3) is None
    assert rolled_marker(_sts("trust-0-1"), [*pods[:2], BrokerPod("demo-broker-2", 2, False, "r2")], replicas=3) is None
    assert rolled_marker(None, pods, replicas=3) is None


def test_a_broker_certificate_renews_before_expiry_but_not_past_its_ca() -> None:
    dns = broker_dns_names("demo", "ns", "cluster.local")
    ca = derived_ca(b"seed", "demo", "ns", created=CREATED, days=100)
    cert = issue(ca, "broker", dns, now=CREATED, days=30)
    record = IssuedRecord.of(cert, ca, dns, "")
    due = dict(ca=ca, dns_names=dns, renew_token="", renewal_days=10)
    assert renewal_reason(record, now=CREATED + 5 * DAY, **due) is None
    assert "expires" in renewal_reason(record, now=CREATED + 25 * DAY, **due)  # same CA, a longer life ahead
    clipped = issue(ca, "broker", dns, now=CREATED + 80 * DAY, days=30)  # ends with its CA
    clipped_record = IssuedRecord.of(clipped, ca, dns, "")
    assert clipped_record.not_after == CREATED + 100 * DAY
    assert renewal_reason(clipped_record, now=CREATED + 95 * DAY, **due) is None  # the CA's rotation renews it


async def test_tls_users_are_signed_by_the_clients_ca_of_the_phase_and_trust_the_cluster_bundle() -> None:
    body = {"metadata": {"name": "demo", "namespace": "ns", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"listeners": {"tls": True, "authentication": {"type": "tls"}},
                     "security": {"clientsCa": {"validityDays": 100, "renewalDays": 10}}}}
    _, state = steps(SPEC, None, CREATED, kind=CLIENTS)
    trusting, state = steps(SPEC, state, CREATED + 91 * DAY, kind=CLIENTS)
    signing, _ = steps(SPEC, state, CREATED + 92 * DAY, rolled=trusting.marker, kind=CLIENTS)
    now = CREATED + 92 * DAY
    for plan, signer in ((trusting, 0), (signing, 1)):
        spec = ClusterSpec.from_resource({**body, "status": {"clientsCa": plan.state.to_status()}})
        ca, bundle = await signing_ca(None, "master", spec, now=now)  # type: ignore[arg-type]  # no Secret read
        assert ca.cert_pem == generation_ca("master", spec, plan.trusted[signer], CLIENTS).cert_pem
        assert "clients CA" in ca.certificate.subject.rfc4514_string()
        assert bundle.count("BEGIN CERTIFICATE") == 1 and ca.cert_pem not in bundle  # the cluster CA's
        assert fingerprint(ca.cert_pem) != fingerprint(generation_ca("master", spec, plan.trusted[signer]).cert_pem)


def test_the_clients_ca_has_its_own_condition_annotation_and_force_token() -> None:
    spec = CaSpec(validity_days=100, renewal_days=10, force_token="a")
    _, state = steps(spec, None, CREATED, kind=CLIENTS)
    plan, state = steps(CaSpec(validity_days=100, renewal_days=10, force_token="b"), state, CREATED + DAY,
                        kind=CLIENTS)
    assert plan.condition.type == "ClientsCa" and "tinystream.io/force-renew-clients-ca" in plan.started
    assert "clients CA" in plan.started and "client certificates" in plan.condition.message
    sts = {"metadata": {"name": "demo-broker", "generation": 1}, "status": {"observedGeneration": 1,
           "updateRevision": "r1"}, "spec": {"template": {"metadata": {"annotations": {
               CA_ANNOTATION: "ca-3", CLIENTS.annotation: plan.marker}}}}}
    pods = [BrokerPod("demo-broker-0", 0, True, revision="r1")]
    assert rolled_marker(sts, pods, replicas=1) == "ca-3"
    assert rolled_marker(sts, pods, replicas=1, annotation=CLIENTS.annotation) == plan.marker == "trust-0-1"


def test_renewing_certificates_waits_while_something_holds_it_then_moves_on() -> None:
    _, state = steps(SPEC, None, CREATED, kind=CLIENTS)
    trusting, state = steps(SPEC, state, CREATED + 91 * DAY, kind=CLIENTS)
    signing, state = steps(SPEC, state, CREATED + 92 * DAY, rolled=trusting.marker, kind=CLIENTS)
    assert signing.state.phase is CaPhase.SIGN_NEW
    held, state = steps(SPEC, state, CREATED + 93 * DAY, rolled=signing.marker, kind=CLIENTS, holding="users: app")
    assert held.state.phase is CaPhase.SIGN_NEW and "waiting for users: app" in held.condition.message
    assert [g.number for g in held.trusted] == [0, 1] and held.signer.number == 1  # both trusted meanwhile
    done, _ = steps(SPEC, state, CREATED + 93 * DAY, rolled=signing.marker, kind=CLIENTS)
    assert done.state.phase is CaPhase.DROP_OLD and [g.number for g in done.trusted] == [1]


def test_a_cluster_from_before_the_clients_ca_starts_by_trusting_the_cluster_ca_for_clients() -> None:
    cluster_pem = derived_ca(b"seed", "demo", "ns", created=CREATED, days=3650).cert_pem
    first = legacy_clients_state(CaSpec(), cluster_pem, None, now=CREATED + DAY)
    plan, state = steps(CaSpec(), None, CREATED + DAY, kind=CLIENTS, first=first)
    assert plan.state.phase is CaPhase.TRUST_NEW and plan.state.reason == LEGACY_REASON
    assert plan.trusted[0].provided == cluster_pem and plan.trusted[1].number == 1
    assert plan.signer is None  # the cluster CA signs no user any more: new users wait one roll
    signing, _ = steps(CaSpec(), state, CREATED + 2 * DAY, rolled=plan.marker, kind=CLIENTS)
    assert signing.signer is not None and signing.signer.number == 1 and not signing.signer.provided


def test_users_holding_names_the_tls_users_of_the_cluster_not_yet_of_the_new_ca() -> None:
    cluster = ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "ns", "uid": "u1"}})
    new = derived_ca(b"new", "demo", "ns", created=CREATED, days=100).cert_pem

    def user(name: str, cluster_name: str = "demo", kind: str = "tls", ca: str = "") -> dict:
        return {"metadata": {"name": name}, "spec": {"cluster": cluster_name, "authentication": {"type": kind}},
                "status": {"certificate": {"ca": ca}} if ca else {}}

    users = [user("done", ca=fingerprint(new)), user("old", ca="0123"), user("fresh"), user("other", "x"),
             user("scram", kind="scram-sha-512")]
    assert users_holding(users, cluster, new) == "users whose certificate is not of the new CA yet: fresh, old"
    assert users_holding(users[:1], cluster, new) == ""


class _Secrets:
    """Create (every Secret new here) and patch, recorded: all _ensure_clients_ca calls."""

    def __init__(self) -> None:
        self.created: dict[str, dict] = {}

    async def create(self, obj: dict) -> dict:
        self.created[obj["metadata"]["name"]] = obj
        return obj


async def test_an_existing_tls_cluster_starts_its_clients_ca_by_trusting_its_cluster_ca() -> None:
    import base64  # noqa: PLC0415

    from tinystream.operator.k8s.cluster_tls import _ensure_clients_ca  # noqa: PLC0415

    body = {"metadata": {"name": "demo", "namespace": "ns", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"listeners": {"tls": True, "authentication": {"type": "tls"}}}}
    spec = ClusterSpec.from_resource(body)
    cluster_pem = generation_ca("master", spec, CaState.from_status(
        steps(SPEC, None, CREATED)[0].state.to_status()).current).cert_pem
    # An existing cluster, a year old; a new one, a day old.
    for status, legacy, now in (({"clusterCa": {"generation": 0}}, True, CREATED + 400 * DAY),
                                ({}, False, CREATED + DAY)):
        api = _Secrets()
        plan, recorded = await _ensure_clients_ca(api, spec, status, master="master", now=now,  # type: ignore[arg-type]
                                                  rolled=None, holding="", cluster_bundle=cluster_pem)
        bundle = base64.b64decode(api.created["demo-broker-tls"]["data"]["clients-ca.crt"]).decode()
        if legacy:  # users signed by the cluster CA keep logging in until they are re-issued
            assert plan.state.phase is CaPhase.TRUST_NEW and plan.marker == "trust-0-1" and plan.signer is None
            assert bundle.startswith(cluster_pem) and bundle.count("BEGIN CERTIFICATE") == 2
            assert recorded["reason"] == LEGACY_REASON
        else:  # a new cluster: one clients CA, no roll
            assert plan.state.phase is CaPhase.STEADY and plan.marker == "" and cluster_pem not in bundle
            assert bundle.count("BEGIN CERTIFICATE") == 1


@dataclass
class Rotation:
    """What a rotation driven by plan_ca did: the phase of each pass, the roll markers in turn."""

    phases: list[CaPhase] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)


def rotate(kind: CaKind, users: dict[str, int], state: CaState | None = None, *, template: str = "",
           brokers: tuple[int, ...] = (0,)) -> Rotation:
    """Drive a forced renewal to Steady as the operator does, checking on the way that no user is refused.

    Each round: the cluster's pass (holding: the tls users not of the new CA yet, as users_holding), a roll
    when the marker changed (each broker runs the old bundle or the new one meanwhile: a user's CA must be
    in both), then the users' passes (re-issued from the signer of the recorded state, as signing_ca: every
    broker must trust it already). `users`: name -> generation of the CA its certificate is of; `template`,
    `brokers`: the marker the brokers run with at the start, the generations they trust."""
    if state is None:
        _, state = steps(SPEC, None, CREATED, kind=kind)
    token = "go" if state.phase is CaPhase.STEADY else state.renew_token  # a forced renewal, or the one under way
    spec, now, out = CaSpec(validity_days=100, renewal_days=10, force_token=token), CREATED + DAY, Rotation()
    for _ in range(10):
        behind = [u for u, ca in users.items() if state.next and ca != state.next.number]
        holding = ", ".join(behind) if state.phase is CaPhase.SIGN_NEW else ""
        plan, state = steps(spec, state, now, rolled=template, kind=kind, holding=holding)
        out.phases.append(plan.state.phase)
        bundle = tuple(g.number for g in plan.trusted)
        if plan.marker != template:  # a roll: one broker at a time, old and new bundles side by side
            out.markers.append(plan.marker)
        else:
            assert bundle == brokers, "a new bundle without a roll"
        everywhere = set(brokers) & set(bundle)  # trusted by every broker until the roll is over
        assert all(ca in everywhere for ca in users.values()), (plan.state, users)
        signer = plan_ca(spec, state, now=now, created=CREATED, kind=kind).signer  # what a user's pass reads
        for name in users:  # meanwhile (during the roll)
            if signer is not None and users[name] != signer.number:
                assert signer.number in everywhere, f"{name} re-issued from a CA a broker does not trust yet"
                users[name] = signer.number
        brokers, template = bundle, plan.marker
        if plan.state.phase is CaPhase.STEADY:
            return out
    raise AssertionError(f"no end: {out}")


def test_the_cluster_ca_rotates_in_three_rolls() -> None:
    done = rotate(CLUSTER, {})
    assert done.markers == ["trust-0-1", "sign-1-trust-0-1", "ca-1"]
    assert done.phases == [CaPhase.TRUST_NEW, CaPhase.SIGN_NEW, CaPhase.DROP_OLD, CaPhase.STEADY]
    assert CLUSTER.rolls() == (CaPhase.TRUST_NEW, CaPhase.SIGN_NEW, CaPhase.DROP_OLD)


def test_the_clients_ca_rotates_in_two_rolls_and_drops_the_old_ca_after_every_user_is_reissued() -> None:
    users = {"app": 0, "batch": 0}
    done = rotate(CLIENTS, users)
    assert done.markers == ["trust-0-1", "ca-1"]  # no roll for RenewingCertificates
    assert done.phases == [CaPhase.TRUST_NEW, CaPhase.SIGN_NEW, CaPhase.DROP_OLD, CaPhase.STEADY]
    assert users == {"app": 1, "batch": 1}
    assert CLIENTS.rolls() == (CaPhase.TRUST_NEW, CaPhase.DROP_OLD)


def test_the_clients_ca_holds_renewing_certificates_for_a_user_and_rolls_nothing_meanwhile() -> None:
    _, state = steps(SPEC, None, CREATED, kind=CLIENTS)
    trusting, state = steps(SPEC, state, CREATED + 91 * DAY, kind=CLIENTS)
    assert trusting.signer.number == 0  # users are re-issued only once every broker trusts the new CA
    for rolled in (None, "ca-0"):  # roll 1 not complete: no user is signed by the new CA yet
        held, _ = steps(SPEC, state, CREATED + 92 * DAY, rolled=rolled, kind=CLIENTS)
        assert held.state.phase is CaPhase.TRUST_NEW and held.signer.number == 0
    signing, state = steps(SPEC, state, CREATED + 92 * DAY, rolled=trusting.marker, kind=CLIENTS)
    assert signing.state.phase is CaPhase.SIGN_NEW and signing.marker == trusting.marker == "trust-0-1"
    assert signing.signer.number == 1 and [g.number for g in signing.trusted] == [0, 1]
    for rolled in (None, "trust-0-1", "other"):  # whatever the brokers run: a user holds it
        held, _ = steps(SPEC, state, CREATED + 93 * DAY, rolled=rolled, kind=CLIENTS, holding="users: app")
        assert held.state.phase is CaPhase.SIGN_NEW and held.marker == "trust-0-1"
    assert "1/2 brokers learn to trust" in trusting.condition.message
    assert "between rolls 1/2 and 2/2: users get certificates" in held.condition.message
    assert "(waiting for users: app)" in held.condition.message
    dropping, _ = steps(SPEC, state, CREATED + 93 * DAY, rolled=None, kind=CLIENTS)
    assert dropping.state.phase is CaPhase.DROP_OLD and dropping.marker == "ca-1"
    assert "2/2 the old CA leaves" in dropping.condition.message


def test_a_clients_ca_left_mid_roll_2_by_an_earlier_operator_finishes() -> None:
    """An earlier operator version rolled the brokers in the clients CA's RenewingCertificates too
    (marker sign-1-trust-0-1): every broker trusted both CAs before it, so the rotation goes on from there."""
    _, state = steps(SPEC, None, CREATED, kind=CLIENTS)
    _, state = steps(SPEC, state, CREATED + 91 * DAY, kind=CLIENTS)
    recorded = CaState.from_status({**state.to_status(), "phase": CaPhase.SIGN_NEW.value})
    for rolled in (None, "sign-1-trust-0-1"):  # its roll under way, or done
        held, _ = steps(SPEC, recorded, CREATED + 92 * DAY, rolled=rolled, kind=CLIENTS, holding="users: app")
        assert held.state.phase is CaPhase.SIGN_NEW and held.signer.number == 1
        assert [g.number for g in held.trusted] == [0, 1]
    users = {"app": 0, "new": 1}
    done = rotate(CLIENTS, users, recorded, template="sign-1-trust-0-1", brokers=(0, 1))
    assert done.phases == [CaPhase.SIGN_NEW, CaPhase.DROP_OLD, CaPhase.STEADY]
    assert done.markers == ["trust-0-1", "ca-1"] and users == {"app": 1, "new": 1}
    quick = rotate(CLIENTS, {"app": 1}, recorded, template="sign-1-trust-0-1", brokers=(0, 1))  # all re-issued
    assert quick.markers == ["ca-1"] and quick.phases == [CaPhase.DROP_OLD, CaPhase.STEADY]


def test_an_upgrade_from_before_the_clients_ca_rolls_twice() -> None:
    cluster_pem = derived_ca(b"seed", "demo", "ns", created=CREATED, days=3650).cert_pem
    first = legacy_clients_state(CaSpec(), cluster_pem, None, now=CREATED)
    users = {"app": 0}  # signed by the cluster CA: generation 0 of the clients CA's rotation
    done = rotate(CLIENTS, users, first)
    assert done.markers == ["trust-0-1", "ca-1"] and users == {"app": 1}
