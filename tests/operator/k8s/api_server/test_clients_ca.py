"""Issue 23, item 4: the clients CA (spec.security.clientsCa) signs tls users, against the real API server.

A cluster whose listener authenticates by certificate: a tls TinyStreamUser's certificate is of the clients
CA, not of the cluster CA (its ca.crt is the cluster CA, which verifies the brokers); a forced renewal of the
clients CA re-issues the user's Secret, rolls the brokers twice (not three times as the cluster CA: they present
no certificate of it) and ends with them trusting only the new clients CA for client certificates. The kubelet
is played as in test_ca_rotation.
"""

from __future__ import annotations

import base64

import pytest
from cryptography import x509
from fake_controller import FakeController
from kmock_helpers import ready_condition, running_operator
from real_api import connection
from test_ca_rotation import TS, condition, kubelet_stand_in, pems

from tinystream.operator.k8s.ca_lifecycle import CLIENTS_CA_ANNOTATION
from tinystream.operator.k8s.certificates import fingerprint, signed_by

pytestmark = pytest.mark.timeout(240)

CLUSTER = {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "mtls"},
           "spec": {"brokers": 3, "storage": {"size": "1Gi"},
                    "listeners": {"tls": True, "authentication": {"type": "tls"}}}}
USER = {"apiVersion": TS, "kind": "TinyStreamUser", "metadata": {"name": "app"},
        "spec": {"cluster": "mtls", "authentication": {"type": "tls"}}}


def files(secret: dict | None, key: str) -> str:
    return base64.b64decode(((secret or {}).get("data") or {}).get(key, "")).decode()


def clients_bundle(secret: dict | None) -> list[str]:
    """The certificates of the broker TLS Secret's clients-ca.crt (the client listener's truststore)."""
    return pems({"data": {"ca.crt": ((secret or {}).get("data") or {}).get("clients-ca.crt", "")}})


async def test_users_come_from_the_clients_ca_and_its_renewal_reissues_them(control_plane, api) -> None:
    async with kubelet_stand_in(api, "mtls-broker-") as pods, running_operator(
            control_plane.url, controller=FakeController(), connection=connection(control_plane)):
        await api.create(TS, "tinystreamclusters", CLUSTER)
        steady = await api.wait_for(TS, "tinystreamclusters", "mtls",
                                    lambda o: ready_condition(o).get("status") == "True", timeout=60)
        assert condition(steady, "ClientsCa")["reason"] == "CaValid"
        (cluster_ca,) = pems(await api.get("v1", "secrets", "mtls-cluster-ca-cert"))
        (old_clients,) = pems(await api.get("v1", "secrets", "mtls-clients-ca-cert"))
        assert fingerprint(old_clients) != fingerprint(cluster_ca)
        assert clients_bundle(await api.get("v1", "secrets", "mtls-broker-tls")) == [old_clients]

        await api.create(TS, "tinystreamusers", USER)
        user = await api.wait_for(TS, "tinystreamusers", "app",
                                  lambda o: ((o or {}).get("status") or {}).get("certificate"), timeout=60)
        secret = await api.get("v1", "secrets", "app")
        assert signed_by(files(secret, "user.crt"), old_clients)
        assert not signed_by(files(secret, "user.crt"), cluster_ca)
        assert pems({"data": {"ca.crt": secret["data"]["ca.crt"]}}) == [cluster_ca]  # verifies the brokers
        assert user["status"]["certificate"]["ca"] == fingerprint(old_clients)

        await api.patch(TS, "tinystreamclusters", "mtls",
                        {"metadata": {"annotations": {"tinystream.io/force-renew-clients-ca": "now"}}})
        rotating = await api.wait_for(TS, "tinystreamclusters", "mtls",
                                      lambda o: (o["status"].get("clientsCa") or {}).get("phase") != "Steady",
                                      timeout=30)
        assert condition(rotating, "ClientsCa")["reason"] == "CaRotating"
        both = clients_bundle(await api.get("v1", "secrets", "mtls-broker-tls"))
        assert len(both) == 2 and both[0] == old_clients  # step 1: a client of either CA is accepted
        new_clients = both[1]
        done = await api.wait_for(TS, "tinystreamclusters", "mtls",
                                  lambda o: (o["status"].get("clientsCa") or {}).get("phase") == "Steady"
                                  and o["status"]["clientsCa"]["generation"] == 1
                                  and ready_condition(o).get("status") == "True", timeout=180)
        reissued = await api.get("v1", "secrets", "app")
        user = await api.get(TS, "tinystreamusers", "app")
    assert signed_by(files(reissued, "user.crt"), new_clients)
    assert user["status"]["certificate"]["ca"] == fingerprint(new_clients)
    assert clients_bundle(await api.get("v1", "secrets", "mtls-broker-tls")) == [new_clients]
    assert pems(await api.get("v1", "secrets", "mtls-clients-ca-cert")) == [new_clients]
    assert pems(await api.get("v1", "secrets", "mtls-cluster-ca-cert")) == [cluster_ca]  # the cluster CA stays
    assert done["status"]["clusterCa"]["generation"] == 0
    sts = await api.get("apps/v1", "statefulsets", "mtls-broker")
    assert sts["spec"]["template"]["metadata"]["annotations"][CLIENTS_CA_ANNOTATION] == "ca-1"
    assert max(int(n) for n in pods.pop("down")) <= 1  # one broker at a time
    assert sorted(len(uids) for uids in pods.values()) == [3, 3, 3], pods  # two rolls: made, then made again twice
    x509.load_pem_x509_certificate(files(reissued, "user.crt").encode())


async def test_a_missing_provided_clients_ca_is_a_condition(control_plane, api) -> None:
    body = {**CLUSTER, "metadata": {"name": "byo"},
            "spec": {**CLUSTER["spec"], "security": {"clientsCa": {"generateCertificateAuthority": False}}}}
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane)):
        await api.create(TS, "tinystreamclusters", body)
        found = await api.wait_for(TS, "tinystreamclusters", "byo",
                                   lambda o: condition(o, "ClientsCa").get("reason") == "CaSecretMissing",
                                   timeout=30)
    assert condition(found, "ClientsCa")["status"] == "False"
    assert ready_condition(found)["reason"] == "CaUnusable" and "byo-clients-ca" in ready_condition(found)["message"]
    assert await api.get("apps/v1", "statefulsets", "byo-broker") is None  # no broker without its clients CA


async def test_clientsca_fields_are_validated(api) -> None:
    for bad in ({"validityDays": 30, "renewalDays": 30}, {"secretName": "x"}):
        body = {**CLUSTER, "metadata": {"name": "bad"},
                "spec": {**CLUSTER["spec"], "security": {"clientsCa": bad}}}
        with pytest.raises(AssertionError, match="clientsCa"):
            await api.create(TS, "tinystreamclusters", body)
