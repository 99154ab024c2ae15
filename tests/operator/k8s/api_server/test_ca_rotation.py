"""Issue 23, item 4: the cluster CA rotates, against the real API server and StatefulSet controller.

No kubelet runs, so a background task plays it: every broker pod the StatefulSet controller makes is
marked Ready (pods/status), which is all the roll's checks read. A force-renew takes the cluster through
three one-at-a-time rolls and ends with a trust bundle holding the new CA only; a provided CA whose
Secret is missing gives the condition, and the operator takes it once it is there (never writing it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fake_controller import FakeController
from kmock_helpers import ready_condition, running_operator
from real_api import connection

from tinystream.operator.k8s.ca_lifecycle import CA_ANNOTATION
from tinystream.operator.k8s.certificates import fingerprint
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.controller_secret import tokens_secret
from tinystream.operator.k8s.resources import CONTROLLER_CA_FILE

pytestmark = pytest.mark.timeout(240)
TS = "tinystream.io/v1alpha1"


def cluster(name: str, **security) -> dict:
    return {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": name},
            "spec": {"brokers": 3, "storage": {"size": "1Gi"}, **({"security": security} if security else {})}}


def condition(obj: dict | None, kind: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def pems(secret: dict | None, key: str = "ca.crt") -> list[str]:
    """The certificates of a Secret's ca.crt bundle (or another key's)."""
    raw = base64.b64decode(((secret or {}).get("data") or {}).get(key, "")).decode()
    return [f"-----BEGIN CERTIFICATE-----{part}" for part in raw.split("-----BEGIN CERTIFICATE-----")[1:]]


@contextlib.asynccontextmanager
async def kubelet_stand_in(api, prefix: str):
    """Mark each broker pod Ready as the StatefulSet controller makes it; records every pod uid seen, and
    (under "down") the most brokers seen without a live pod at once."""
    seen: dict[str, set[str]] = {"down": {"0"}}

    async def loop() -> None:
        while True:
            listed = await api.list("v1", "pods")
            live = {p["metadata"]["name"] for p in listed if not p["metadata"].get("deletionTimestamp")}
            if len(seen) > 3:  # all three made once: count those missing now
                down = sum(1 for name in seen if name != "down" and name not in live)
                seen["down"].add(str(down))
            for pod in listed:
                meta = pod["metadata"]
                if not meta["name"].startswith(prefix) or meta.get("deletionTimestamp"):
                    continue
                seen.setdefault(meta["name"], set()).add(meta["uid"])
                await api.mark_pod_ready(pod)
            await asyncio.sleep(0.2)

    task = asyncio.create_task(loop())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_force_renew_rolls_the_brokers_and_ends_trusting_the_new_ca_only(control_plane, api) -> None:
    """...and the controller API follows: the brokers' controller-ca.crt holds both CAs from the first roll
    and the new one alone at the end, and the controller is told each phase (controller_tls.follow_ca)."""
    controllers = (FakeController(), FakeController())
    for fake in controllers:
        fake.tls = True  # the operator serves its controller API over TLS (running_operator reads this)
    async with kubelet_stand_in(api, "demo-broker-") as pods:
        async with running_operator(control_plane.url, controller=controllers[0],
                                    connection=connection(control_plane)):
            await api.create(TS, "tinystreamclusters", cluster("demo"))
            steady = await api.wait_for(TS, "tinystreamclusters", "demo",
                                        lambda o: ready_condition(o).get("status") == "True", timeout=60)
            assert condition(steady, "ClusterCa")["reason"] == "CaValid"
            assert steady["status"]["clusterCa"]["generation"] == 0
            (old_ca,) = pems(await api.get("v1", "secrets", "demo-cluster-ca-cert"))
            old_serial = steady["status"]["certificates"]["serial"]
            assert [len(pods[f"demo-broker-{i}"]) for i in range(3)] == [1, 1, 1]
            # The tokens Secret the controller makes when it opens (no controller runs here): stale content.
            await api.create("v1", "secrets", tokens_secret(ClusterKey(steady["metadata"]["namespace"], "demo"),
                                                            steady["metadata"]["uid"],
                                                            "stale", "admin-token"))

            await api.patch(TS, "tinystreamclusters", "demo",
                            {"metadata": {"annotations": {"tinystream.io/force-renew-ca": "now"}}})
            # Phase 1: the bundle holds old and new, for clients and brokers; the broker certificate stays.
            rotating = await api.wait_for(TS, "tinystreamclusters", "demo",
                                          lambda o: (o["status"].get("clusterCa") or {}).get("phase") != "Steady",
                                          timeout=30)
            assert condition(rotating, "ClusterCa")["reason"] == "CaRotating"
            bundle = pems(await api.get("v1", "secrets", "demo-cluster-ca-cert"))
            assert len(bundle) == 2 and bundle[0] == old_ca
            assert pems(await api.get("v1", "secrets", "demo-broker-tls")) == bundle
            assert pems(await api.get("v1", "secrets", "demo-broker-tokens"), CONTROLLER_CA_FILE) == bundle
            new_ca = bundle[1]
            await api.wait_for("v1", "pods", "demo-broker-2",  # the first roll has begun
                               lambda o: o is None or len(pods["demo-broker-2"]) > 1, timeout=30)
        # The operator stops mid-rotation; another one carries on from status.clusterCa.
        async with running_operator(control_plane.url, controller=controllers[1],
                                    connection=connection(control_plane)):
            done = await api.wait_for(TS, "tinystreamclusters", "demo",
                                      lambda o: (o["status"].get("clusterCa") or {}).get("phase") == "Steady"
                                      and o["status"]["clusterCa"]["generation"] == 1
                                      and ready_condition(o).get("status") == "True", timeout=180)
    assert pems(await api.get("v1", "secrets", "demo-cluster-ca-cert")) == [new_ca]
    assert pems(await api.get("v1", "secrets", "demo-broker-tls")) == [new_ca]
    assert pems(await api.get("v1", "secrets", "demo-broker-tokens"), CONTROLLER_CA_FILE) == [new_ca]
    followed = [phase for fake in controllers for _, phase in fake.ca_phases]
    phases = [p for i, p in enumerate(followed) if i == 0 or followed[i - 1] != p]
    assert phases == ["Steady", "TrustingNewCa", "RenewingCertificates", "RemovingOldCa", "Steady"], phases
    assert done["status"]["certificates"]["ca"] == fingerprint(new_ca) != fingerprint(old_ca)
    assert done["status"]["certificates"]["serial"] != old_serial
    assert "next" not in done["status"]["clusterCa"]
    assert condition(done, "ClusterCa")["reason"] == "CaValid"
    sts = await api.get("apps/v1", "statefulsets", "demo-broker")
    assert sts["spec"]["template"]["metadata"]["annotations"][CA_ANNOTATION] == "ca-1"
    # Three rolls: every broker pod was made again three times, never two gone at once. (A deleted pod
    # comes back within milliseconds here, so a 0.2 s sampler may see none gone: at most one, not exactly.)
    assert max(int(n) for n in pods.pop("down")) <= 1
    assert sorted(len(uids) for uids in pods.values()) == [4, 4, 4], pods
    broker_tls = await api.get("v1", "secrets", "demo-broker-tls")
    pem = base64.b64decode(broker_tls["data"]["broker.pem"]).decode()
    cert = x509.load_pem_x509_certificate(pem.encode())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(new_ca.encode()))


def own_ca() -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "my company CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=400))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


async def test_a_missing_provided_ca_is_a_condition_and_the_ca_is_used_once_there(control_plane, api) -> None:
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane)):
        await api.create(TS, "tinystreamclusters",
                         cluster("byo", clusterCa={"generateCertificateAuthority": False}))
        found = await api.wait_for(TS, "tinystreamclusters", "byo",
                                   lambda o: condition(o, "ClusterCa").get("reason") == "CaSecretMissing",
                                   timeout=30)
        assert condition(found, "ClusterCa")["status"] == "False"
        assert ready_condition(found)["reason"] == "CaUnusable" and "byo-cluster-ca" in ready_condition(found)["message"]
        assert await api.get("apps/v1", "statefulsets", "byo-broker") is None  # nothing starts without its CA
        assert await api.get("v1", "secrets", "byo-cluster-ca-cert") is None

        cert, key = own_ca()
        data = {"ca.crt": base64.b64encode(cert.encode()).decode(), "ca.key": base64.b64encode(key.encode()).decode()}
        await api.create("v1", "secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "byo-cluster-ca"},
                                           "data": data})
        used = await api.wait_for(TS, "tinystreamclusters", "byo",
                                  lambda o: condition(o, "ClusterCa").get("reason") == "CaValid", timeout=60)
        assert used["status"]["clusterCa"]["source"] == "provided"
        assert pems(await api.get("v1", "secrets", "byo-cluster-ca-cert")) == [cert]
        assert used["status"]["certificates"]["ca"] == fingerprint(cert)
        theirs = await api.get("v1", "secrets", "byo-cluster-ca")
        assert theirs["data"] == data and not theirs["metadata"].get("ownerReferences")  # never written


async def test_clusterca_fields_are_validated(api) -> None:
    for bad in ({"validityDays": 30, "renewalDays": 30}, {"secretName": "x"}, {"validityDays": 1}):
        with pytest.raises(AssertionError, match="clusterCa|validityDays"):
            await api.create(TS, "tinystreamclusters", cluster("bad", clusterCa=bad))
