"""A TinyStreamUser's ACLs and credential against the cluster's metadata, and its Secret (operator/k8s/users.py):
pure decisions; `ensure_user_secret` (user_secrets.py) with a stand-in for the API's create and patch."""

from __future__ import annotations

import base64
import datetime

import pytest

from tinystream.acls import AclBinding
from tinystream.operator.controller.image import AclRecord
from tinystream.operator.k8s.ca_lifecycle import CLIENTS, CaSpec, first_state
from tinystream.operator.k8s.certificates import CertFacts, IssuedRecord, fingerprint, issue, signed_by
from tinystream.operator.k8s.cluster_tls import ForeignSecret, cluster_ca, cluster_created, generation_ca
from tinystream.operator.k8s.errors import Conflict, KubeApiError
from tinystream.operator.k8s.model import ClusterSpec, UserSpec
from tinystream.operator.k8s.user_secrets import ensure_user_secret, user_password
from tinystream.operator.k8s.users import (
    SecretChange,
    SecretPlan,
    plan_user_access,
    plan_user_removal,
    plan_user_secret,
    scram_record,
    secret_change,
)
from tinystream.scram_users import ScramCredential

BODY = {"metadata": {"name": "app", "namespace": "ns", "uid": "u1"}, "spec": {
    "cluster": "secure", "authentication": {"type": "scram-sha-512"}, "authorization": {"acls": [
        {"resource": {"type": "topic", "name": "orders-", "patternType": "prefix"}, "operations": ["Read", "Write"]},
        {"resource": {"type": "group", "name": "app"}, "operations": ["Read"]},
        {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
        {"resource": {"type": "topic", "name": "secrets"}, "operations": ["All"], "type": "deny"},
    ]}}}
USER = UserSpec.from_resource(BODY)


def other(principal: str) -> AclRecord:
    return AclRecord(resource_type="TOPIC", resource_name="x", pattern_type="LITERAL", principal=principal,
                     host="*", operation="READ", permission="ALLOW")


def test_a_new_user_gets_every_acl_it_asks_for_and_a_credential() -> None:
    plan = plan_user_access(USER, [other("User:someone")], [], password="pw")
    assert len(plan.create) == 5 and not plan.delete
    for record in plan.create:
        AclBinding.from_dict({
            f: getattr(record, f) for f in ("resource_type", "resource_name", "pattern_type", "principal", "host",
                                            "operation", "permission")})  # each is a valid Kafka ACL
    by_op = {(r.resource_type, r.operation): r for r in plan.create}
    assert by_op[("TOPIC", "READ")].pattern_type == "PREFIXED" and by_op[("TOPIC", "READ")].principal == "User:app"
    assert by_op[("CLUSTER", "IDEMPOTENT_WRITE")].resource_name == "kafka-cluster"
    assert by_op[("TOPIC", "ALL")].permission == "DENY"
    upsert, = plan.upsert
    credential = ScramCredential(*(base64.b64decode(getattr(upsert, k)) for k in ("salt", "stored_key", "server_key")),
                                 upsert.iterations)
    assert upsert.user == "app" and credential.matches_password("SCRAM-SHA-512", "pw")


def test_a_user_in_force_needs_nothing_and_stray_acls_of_its_principal_go() -> None:
    first = plan_user_access(USER, [], [], password="pw")
    held = [*first.create, other("User:app"), other("User:someone")]
    again = plan_user_access(USER, held, first.upsert, password="pw")
    assert not again.create and not again.upsert
    assert [f.principal for f in again.delete] == ["User:app"] and again.delete[0].resource_name == "x"
    assert plan_user_access(USER, held, first.upsert, password="rotated").upsert  # another password: set again


def test_removal_takes_every_acl_and_credential_of_the_user_only() -> None:
    first = plan_user_access(USER, [], [], password="pw")
    gone = plan_user_removal(USER, [*first.create, other("User:someone")],
                             [*first.upsert, scram_record("someone", "x")])
    assert len(gone.delete) == 5 and {f.principal for f in gone.delete} == {"User:app"}
    assert [(d.user, d.mechanism) for d in gone.remove] == [("app", "SCRAM-SHA-512")]


def test_a_tls_user_is_named_by_its_certificate() -> None:
    tls = UserSpec.from_resource({**BODY, "spec": {**BODY["spec"], "authentication": {"type": "tls"}}})
    plan = plan_user_access(tls, [], [], password=None)
    assert {r.principal for r in plan.create} == {"User:CN=app"} and not plan.upsert


# --- the user's Secret ---

MASTER = "master-secret"
NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC)
TLS_USER = UserSpec.from_resource({**BODY, "spec": {**BODY["spec"], "authentication": {"type": "tls"}}})
TLS_BODY = {
    "metadata": {"name": "secure", "namespace": "ns", "uid": "c1", "creationTimestamp": "2026-11-01T00:00:00Z"},
    "spec": {"listeners": {"tls": True, "authentication": {"type": "tls"}},
             "certificates": {"validityDays": 30, "renewalDays": 5}}}
_CLIENTS_STATE = first_state(CaSpec(), created=datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC), legacy=False,
                             provided=None)
#: A tls cluster whose pass recorded its clients CA (status.clientsCa): users' certificates come from it.
TLS_CLUSTER = ClusterSpec.from_resource({**TLS_BODY, "status": {"clientsCa": _CLIENTS_STATE.to_status()}})
SCRAM_CLUSTER = ClusterSpec.from_resource({
    "metadata": {"name": "secure", "namespace": "ns", "uid": "c1"},
    "spec": {"listeners": {"authentication": {"type": "scram-sha-512"}}}})
CA = generation_ca(MASTER, TLS_CLUSTER, _CLIENTS_STATE.current, CLIENTS)


def record(*, now: datetime.datetime = NOW, days: int = 30, ca=CA) -> IssuedRecord:
    return IssuedRecord.of(issue(ca, "app", frozenset(), now=now, days=days), ca, frozenset(), "")


def test_a_scram_secret_is_only_ever_created_and_a_remade_one_needs_no_new_credential() -> None:
    plan = plan_user_secret(USER, current=None, ca=None, now=NOW, renewal_days=5)
    assert plan == SecretPlan(renew=None)
    assert secret_change(plan, recorded=False, created=True) is SecretChange.CREATED
    assert secret_change(plan, recorded=True, created=True) is SecretChange.RECREATED
    assert secret_change(plan, recorded=True, created=False) is None  # a Conflict: it is there
    # The password is derived (master secret, namespace, name, uid), so the re-made Secret's password is the
    # one whose salted credential the cluster holds: the plan sets no new credential.
    first = plan_user_access(USER, [], [], password=user_password(MASTER, USER))
    assert not plan_user_access(USER, first.create, first.upsert, password=user_password(MASTER, USER)).upsert
    other_uid = UserSpec.from_resource({**BODY, "metadata": {**BODY["metadata"], "uid": "u2"}})
    assert user_password(MASTER, other_uid) != user_password(MASTER, USER)  # a user made anew: a new password


def test_a_tls_certificate_is_renewed_within_the_clusters_renewal_window_only() -> None:
    current = record()
    fresh = plan_user_secret(TLS_USER, current=current, ca=CA, now=NOW + datetime.timedelta(days=24),
                             renewal_days=5)
    assert fresh.renew is None and secret_change(fresh, recorded=True, created=False) is None
    due = plan_user_secret(TLS_USER, current=current, ca=CA, now=NOW + datetime.timedelta(days=25, minutes=1),
                           renewal_days=5)
    assert due.renew is not None and "renewal window 5 days" in due.renew
    assert secret_change(due, recorded=True, created=False) is SecretChange.RENEWED
    assert secret_change(due, recorded=True, created=True) is SecretChange.RECREATED  # made anew: not renewed
    nothing = plan_user_secret(TLS_USER, current=None, ca=CA, now=NOW, renewal_days=5)
    assert nothing.renew == "no certificate recorded yet"  # a Secret made before status.certificate existed
    other_ca = cluster_ca(MASTER, ClusterSpec.from_resource({"metadata": {"name": "secure", "namespace": "ns",
                                                                          "uid": "c2"}}))
    moved = plan_user_secret(TLS_USER, current=record(ca=other_ca), ca=CA, now=NOW, renewal_days=5)
    assert moved.renew == "the certificate was not signed by the cluster's current CA"


class SecretsApi:
    """The two calls the operator may make on Secrets: create (409 when there) and patch (RFC 6902, the
    first operation a test of the owner's uid, as the API server applies it: all or none)."""

    def __init__(self, *, present: bool, owner: str = "u1") -> None:
        self.present = present
        self.owner = owner  # the uid in the ownerReference of the Secret there
        self.created: list[dict] = []
        self.patched: list[dict] = []  # the data written (test-only patches write nothing)

    async def create(self, obj: dict) -> dict:
        if self.present:
            raise Conflict(409, "AlreadyExists", f"secrets {obj['metadata']['name']} already exists")
        self.present = True
        self.created.append(obj)
        return obj

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None, patch: list,
                    *, json_patch: bool = False) -> dict:
        assert (api_version, kind, name, namespace) == ("v1", "Secret", "app", "ns") and self.present and json_patch
        test, *operations = patch
        assert test["op"] == "test" and test["path"] == "/metadata/ownerReferences/0/uid"
        if test["value"] != self.owner:
            raise KubeApiError(422, "Invalid", "the server rejected our request: test operation failed")
        for operation in operations:
            assert (operation["op"], operation["path"]) == ("add", "/data")
            self.patched.append({"data": operation["value"]})
        return {}


def files(data: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


async def test_a_deleted_scram_secret_is_made_again_with_the_same_password() -> None:
    api = SecretsApi(present=False)
    done = await ensure_user_secret(api, USER, SCRAM_CLUSTER, master=MASTER, current=None, recorded=True, now=NOW)
    assert done.change is SecretChange.RECREATED and done.certificate is None
    (secret,) = api.created
    assert files(secret["data"])["password"] == user_password(MASTER, USER)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "u1"
    there = await ensure_user_secret(api, USER, SCRAM_CLUSTER, master=MASTER, current=None, recorded=True, now=NOW)
    assert there.change is None and len(api.created) == 1 and not api.patched


@pytest.mark.parametrize("present", [False, True])
async def test_a_tls_secret_made_again_or_renewed_holds_the_certificate_status_records(present: bool) -> None:
    api = SecretsApi(present=present)
    later = NOW + datetime.timedelta(days=26)  # inside the renewal window of `record()`
    done = await ensure_user_secret(api, TLS_USER, TLS_CLUSTER, master=MASTER, current=record(), recorded=True,
                                    now=later)
    assert done.change is (SecretChange.RENEWED if present else SecretChange.RECREATED)
    (written,) = [p["data"] for p in api.patched] if present else [s["data"] for s in api.created]
    pem = files(written)
    facts = CertFacts.of(pem["user.crt"])
    assert done.certificate is not None and f"{facts.serial:x}" == done.certificate.serial
    assert facts.not_after == done.certificate.not_after == later + datetime.timedelta(days=30)  # validityDays
    assert signed_by(pem["user.crt"], CA.cert_pem) and done.certificate.ca == fingerprint(CA.cert_pem)
    assert not signed_by(pem["user.crt"], pem["ca.crt"])  # ca.crt: the cluster CA, which verifies the brokers
    assert (done.because is not None) == present


async def test_a_tls_user_is_signed_by_the_clients_ca_and_trusts_the_cluster_ca() -> None:
    api = SecretsApi(present=False)
    done = await ensure_user_secret(api, TLS_USER, TLS_CLUSTER, master=MASTER, current=None, recorded=False, now=NOW)
    files = {k: base64.b64decode(v).decode() for k, v in api.created[0]["data"].items()}
    assert signed_by(files["user.crt"], CA.cert_pem)
    assert not signed_by(files["user.crt"], cluster_ca(MASTER, TLS_CLUSTER).cert_pem)
    assert files["ca.crt"].count("BEGIN CERTIFICATE") == 1  # the cluster CA, to verify the brokers with
    assert fingerprint(files["ca.crt"]) == fingerprint(cluster_ca(MASTER, TLS_CLUSTER).cert_pem)
    assert done.certificate is not None and done.certificate.ca == fingerprint(CA.cert_pem)
    assert cluster_created(TLS_CLUSTER) == _CLIENTS_STATE.current.created


async def test_a_tls_user_waits_until_the_cluster_recorded_its_clients_ca() -> None:
    api = SecretsApi(present=False)
    done = await ensure_user_secret(api, TLS_USER, ClusterSpec.from_resource(TLS_BODY), master=MASTER, current=None,
                                    recorded=False, now=NOW)
    assert done.change is None and done.certificate is None and not api.created


async def test_a_tls_secret_in_force_is_left_as_it_is() -> None:
    api = SecretsApi(present=True)
    current = record()
    done = await ensure_user_secret(api, TLS_USER, TLS_CLUSTER, master=MASTER, current=current, recorded=True,
                                    now=NOW + datetime.timedelta(days=1))
    assert done.change is None and done.certificate == current and not api.patched


@pytest.mark.parametrize("tls", [False, True])
async def test_a_secret_of_another_owner_is_neither_taken_nor_written(tls: bool) -> None:
    api = SecretsApi(present=True, owner="someone-else")
    user, cluster = (TLS_USER, TLS_CLUSTER) if tls else (USER, SCRAM_CLUSTER)
    with pytest.raises(ForeignSecret, match="not owned"):
        await ensure_user_secret(api, user, cluster, master=MASTER, current=record() if tls else None,
                                 recorded=True, now=NOW + datetime.timedelta(days=26))
    assert not api.patched and not api.created
