"""TLS on the controller API (operator/k8s/controller_tls.py): real handshakes on a real socket.

Each cluster's controller name is answered with a certificate from that
cluster's CA, so a broker of one cluster cannot be talked to by the
controller name of another; other names get the operator's certificate;
renewal swaps certificates for new connections without a restart.
"""

from __future__ import annotations

from k8s_requirements import require

require('cryptography')

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from cryptography import x509

from tinystream.controller_client import controller_ssl_context
from tinystream.operator.k8s.ca_lifecycle import CaPhase, CaState, Generation
from tinystream.operator.k8s.cli import service_names
from tinystream.operator.k8s.cluster_tls import cluster_ca, controller_ca, generation_ca
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.controller_secret import tokens_secret
from tinystream.operator.k8s.controller_tls import ControllerTLS, operator_ca
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.resources import CONTROLLER_CA_FILE, broker_config

MASTER = "master-secret"
#: Certificates are issued as if 70 days ago (90-day validity): still valid now, due for renewal now.
START = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=70)


def spec(name: str, namespace: str = "apps") -> ClusterSpec:
    return ClusterSpec.from_resource({"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                                                   "creationTimestamp": "2026-11-01T00:00:00Z"},
                                      "spec": {"brokers": 3}})


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime.datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest_asyncio.fixture
async def tls(clock) -> AsyncIterator[tuple[ControllerTLS, int]]:
    """A TLS server with the controller's contexts: (the certificates, its port)."""
    certificates = ControllerTLS(MASTER, service_names=frozenset({"ts.ops.svc"}), now=clock)
    certificates.add_cluster(spec("demo"))
    certificates.add_cluster(spec("other"))

    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=certificates.server)
    try:
        yield certificates, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def served(port: int, name: str, context: ssl.SSLContext) -> x509.Certificate:
    """The certificate a client that asks for `name` and trusts `context` sees (verified)."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=name)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()


def trusting(pem: str) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=pem)


async def test_each_cluster_name_is_answered_by_its_own_clusters_ca(tls):
    certificates, port = tls
    demo_ca = cluster_ca(MASTER, spec("demo")).cert_pem
    for name in ("demo-controller.apps.svc", "demo-controller.apps.svc.cluster.local", "DEMO-controller.apps.svc"):
        cert = await served(port, name, trusting(demo_ca))
        assert "apps/demo controller" in cert.subject.rfc4514_string()
    # A broker of `demo` does not accept `other`'s controller, nor the operator's own certificate.
    with pytest.raises(ssl.SSLCertVerificationError):
        await served(port, "other-controller.apps.svc", trusting(demo_ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        await served(port, "ts.ops.svc", trusting(demo_ca))


async def test_other_names_get_the_operators_certificate(tls):
    certificates, port = tls
    for name in ("ts.ops.svc", "localhost", "127.0.0.1"):
        cert = await served(port, name, certificates.client_context())
        assert "tinystream-operator" in cert.subject.rfc4514_string()
    with pytest.raises(ssl.SSLCertVerificationError):  # a name nobody was issued for
        await served(port, "evil.example", certificates.client_context())


async def test_a_forgotten_cluster_is_no_longer_served_its_certificate(tls):
    certificates, port = tls
    certificates.remove_cluster(ClusterKey("apps", "demo"))
    with pytest.raises(ssl.SSLCertVerificationError):
        await served(port, "demo-controller.apps.svc", trusting(cluster_ca(MASTER, spec("demo")).cert_pem))
    assert certificates.certificate(ClusterKey("apps", "demo")) is None


async def test_renewal_before_expiry_serves_new_certificates_to_new_connections(tls, clock):
    certificates, port = tls
    demo = ClusterKey("apps", "demo")
    demo_ca = trusting(cluster_ca(MASTER, spec("demo")).cert_pem)
    before = await served(port, "demo-controller.apps.svc", demo_ca)
    operator_before = await served(port, "localhost", certificates.client_context())
    assert certificates.renew_due() == []  # 90 days left: nothing yet

    clock.now = START + datetime.timedelta(days=70)  # 20 days left: inside the 30-day window
    assert sorted(certificates.renew_due()) == ["apps/demo", "apps/other", "operator"]
    after = await served(port, "demo-controller.apps.svc", demo_ca)
    assert after.serial_number != before.serial_number
    assert after.serial_number == certificates.certificate(demo).certificate.serial_number
    assert after.not_valid_after_utc > before.not_valid_after_utc
    operator_after = await served(port, "localhost", certificates.client_context())
    assert operator_after.serial_number != operator_before.serial_number


def test_cas_are_derived_the_same_every_time_and_differ_by_purpose():
    assert operator_ca(MASTER).cert_pem == operator_ca(MASTER).cert_pem  # deterministic signature too
    assert cluster_ca(MASTER, spec("demo")).cert_pem == cluster_ca(MASTER, spec("demo")).cert_pem
    assert operator_ca(MASTER).cert_pem != cluster_ca(MASTER, spec("demo")).cert_pem
    assert operator_ca("another").cert_pem != operator_ca(MASTER).cert_pem


def test_renewal_window_must_be_inside_the_validity():
    with pytest.raises(ValueError, match="renewal_days"):
        ControllerTLS(MASTER, service_names=frozenset(), validity_days=30, renewal_days=30)


def test_the_operators_certificate_carries_every_name_of_its_service():
    assert service_names("ts.ops.svc.cluster.local") == {"ts", "ts.ops", "ts.ops.svc", "ts.ops.svc.cluster.local"}
    assert service_names("localhost") == {"localhost"}


def test_brokers_are_told_https_and_where_the_ca_is_only_when_tls_is_on():
    on = broker_config(spec("demo"), OperatorContext())
    assert str(on["controller.url"]).startswith("https://demo-controller.apps.svc:9091/")
    assert on["controller.ssl.truststore.location"] == f"/etc/tinystream-auth/{CONTROLLER_CA_FILE}"
    off = broker_config(spec("demo"), OperatorContext(controller_tls=False))
    assert str(off["controller.url"]).startswith("http://") and "controller.ssl.truststore.location" not in off


def test_the_secret_broker_pods_mount_carries_the_clusters_ca_and_admin_token_and_no_broker_token():
    import base64

    from tinystream.operator.k8s.controller_secret import broker_admin_token
    from tinystream.operator.k8s.resources import ADMIN_TOKEN_FILE
    ca = cluster_ca(MASTER, spec("demo")).cert_pem
    body = tokens_secret(ClusterKey("apps", "demo"), "uid-demo", ca, "admin-token-value")
    assert base64.b64decode(body["data"][CONTROLLER_CA_FILE]).decode() == ca
    assert base64.b64decode(body["data"][ADMIN_TOKEN_FILE]).decode() == "admin-token-value"
    assert set(body["data"]) == {CONTROLLER_CA_FILE, ADMIN_TOKEN_FILE}  # no broker's identity: each pod has its own
    assert broker_admin_token("secret-a") != broker_admin_token("secret-b")  # per cluster
    assert "." not in broker_admin_token("secret-a")  # not shaped like a controller API token


def test_a_controller_truststore_is_checked_when_the_broker_starts(tmp_path):
    assert controller_ssl_context("http://c:9091", None) is None
    assert controller_ssl_context("https://c:9091", None) is not None  # the system's CAs
    with pytest.raises(ValueError, match="not https"):
        controller_ssl_context("http://c:9091", str(tmp_path / "ca.crt"))
    with pytest.raises(ValueError, match="not a readable PEM"):
        controller_ssl_context("https://c:9091", str(tmp_path / "missing.crt"))
    (tmp_path / "junk.crt").write_text("not a certificate")
    with pytest.raises(ValueError, match="not a readable PEM"):
        controller_ssl_context("https://c:9091", str(tmp_path / "junk.crt"))


async def test_the_operators_dashboard_reads_its_own_tls_api():
    from kmock_helpers import BareClusters, memory_secret

    from tinystream.operator.dashboard import HttpClusterSource
    from tinystream.operator.k8s.controller_host import OperatorController
    from tinystream.operator.service import MemoryStateStore

    host = OperatorController(host="127.0.0.1", port=0, store_factory=lambda client, key: MemoryStateStore(),
                              secret_source=memory_secret,
                              tls=ControllerTLS(MASTER, service_names=frozenset({"ts.ops.svc"})))
    await host.start(client=BareClusters())
    key = ClusterKey("apps", "demo")
    try:
        await host.attach(key)
        assert host.cluster_url(key).startswith("https://127.0.0.1:")
        source = HttpClusterSource(host.cluster_url(key), controller_token=host.admin_token(key),
                                   controller_ssl=host.client_ssl_context())
        unverified = HttpClusterSource(host.cluster_url(key), controller_token=host.admin_token(key))
        try:
            assert (await source.snapshot()).controller_up
            assert not (await unverified.snapshot()).controller_up  # the system's CAs do not know it
        finally:
            await source.close()
            await unverified.close()
    finally:
        await host.stop()


# -- the controller's certificate through a cluster CA rotation (cluster_tls.controller_ca) -----------------

#: Generation 0 from about a year ago (two-year validity), generation 1 made before the controller's certificates (START) are issued.
CREATED = START - datetime.timedelta(days=300)
GEN0, GEN1 = Generation(0, CREATED, 730), Generation(1, START - datetime.timedelta(days=10), 730)


def tls_spec(state: CaState | None) -> ClusterSpec:
    """A cluster with a TLS listener whose status.clusterCa is `state` (None: the CA step has not run)."""
    status = {"clusterCa": state.to_status()} if state is not None else {}
    return ClusterSpec.from_resource({"metadata": {"name": "demo", "namespace": "apps", "uid": "uid-demo",
                                                   "creationTimestamp": "2026-11-01T00:00:00Z"},
                                      "spec": {"brokers": 3, "listeners": {"tls": True}}, "status": status})


def rotation(old: Generation, new: Generation) -> tuple[CaState, ...]:
    """The states status.clusterCa goes through in a rotation from `old` to `new`."""
    return (CaState(old), CaState(old, CaPhase.TRUST_NEW, new), CaState(old, CaPhase.SIGN_NEW, new),
            CaState(new, CaPhase.DROP_OLD), CaState(new))


GEN2 = Generation(2, START - datetime.timedelta(days=5), 730)
ROTATION_STATES = rotation(GEN0, GEN1)
#: A cluster whose CA was rotated before (generation 1) rotating again, to generation 2.
SECOND_ROTATION = rotation(GEN1, GEN2)


async def walk(certificates: ControllerTLS, states: tuple[CaState, ...], *, also_trusting: str,
               dropped: str = "") -> list[bool]:
    """Follow `states` on a live server: at each, brokers started in it, in the phase before (not rolled
    yet) and trusting `also_trusting` verify the controller; at the end one trusting `dropped` alone does
    not. What follow_ca answered at each."""
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0, ssl=certificates.server)
    port, reissued = server.sockets[0].getsockname()[1], []
    try:
        previous = controller_ca(MASTER, tls_spec(states[0]))[1]
        for state in states:
            reissued.append(certificates.follow_ca(tls_spec(state)))
            bundle = controller_ca(MASTER, tls_spec(state))[1]
            for trusted in (previous, bundle, also_trusting):
                cert = await served(port, CONTROLLER, trusting(trusted))
                assert "apps/demo controller" in cert.subject.rfc4514_string()
            previous = bundle
        if dropped:
            with pytest.raises(ssl.SSLCertVerificationError):
                await served(port, CONTROLLER, trusting(dropped))
    finally:
        server.close()
        await server.wait_closed()
    return reissued


CONTROLLER = "demo-controller.apps.svc"


async def test_the_controller_certificate_follows_a_cluster_ca_rotation_and_no_broker_is_refused(clock):
    """Brokers read controller-ca.crt when they start: at every phase both a broker started in it and one
    started in the phase before verify the controller; the certificate moves to the new CA in
    RenewingCertificates only. (Generation 0 has the first CA's key: it stays a path for older brokers.)"""
    certificates = ControllerTLS(MASTER, service_names=frozenset({"ts.ops.svc"}), now=clock)
    certificates.add_cluster(tls_spec(ROTATION_STATES[0]))
    first = cluster_ca(MASTER, tls_spec(None)).cert_pem
    assert await walk(certificates, ROTATION_STATES, also_trusting=first) == [False, False, True, False, False]
    assert controller_ca(MASTER, tls_spec(ROTATION_STATES[0]))[1].count("BEGIN CERTIFICATE") == 1
    assert controller_ca(MASTER, tls_spec(ROTATION_STATES[1]))[1].count("BEGIN CERTIFICATE") == 2
    assert controller_ca(MASTER, tls_spec(ROTATION_STATES[3]))[1] == controller_ca(MASTER, tls_spec(CaState(GEN1)))[1]


async def test_a_second_rotation_drops_the_old_ca_and_brokers_of_an_older_operator_still_verify(clock):
    """A cluster rotated before this operator: its running brokers trust the first CA alone (the fixed
    controller CA of before); the new CA, cross-signed by the first, is sent along, so they verify at every
    phase, while a broker trusting generation 1 alone is refused once generation 2 signs."""
    certificates = ControllerTLS(MASTER, service_names=frozenset({"ts.ops.svc"}), now=clock)
    certificates.add_cluster(tls_spec(SECOND_ROTATION[0]))
    first = cluster_ca(MASTER, tls_spec(None)).cert_pem
    gen1 = controller_ca(MASTER, tls_spec(SECOND_ROTATION[0]))[1]
    assert await walk(certificates, SECOND_ROTATION, also_trusting=first,
                      dropped=gen1) == [False, False, True, False, False]
    served_pem = certificates.certificate(ClusterKey("apps", "demo")).cert_pem
    assert served_pem.count("BEGIN CERTIFICATE") == 2  # the leaf and generation 2 signed by the first CA


def test_an_operator_restarted_mid_rotation_signs_with_the_ca_the_state_names():
    """controller_ca reads status.clusterCa alone: before RenewingCertificates the old CA signs, from it the new."""
    old = generation_ca(MASTER, tls_spec(None), GEN0).cert_pem
    new = generation_ca(MASTER, tls_spec(None), GEN1).cert_pem
    signers = [controller_ca(MASTER, tls_spec(state))[0].cert_pem for state in ROTATION_STATES]
    assert signers == [old, old, new, new, new]


async def test_a_broker_trusting_the_first_ca_verifies_a_certificate_of_generation_zero(clock):
    """The upgrade path: brokers started before this operator trust cluster_ca (ten years); the controller now
    signs with generation 0 (the same key, its own validity), and they still verify it."""
    certificates = ControllerTLS(MASTER, service_names=frozenset({"ts.ops.svc"}), now=clock)
    certificates.add_cluster(tls_spec(ROTATION_STATES[0]))
    assert controller_ca(MASTER, tls_spec(ROTATION_STATES[0]))[0].cert_pem != cluster_ca(MASTER, tls_spec(None)).cert_pem
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0, ssl=certificates.server)
    try:
        cert = await served(server.sockets[0].getsockname()[1], "demo-controller.apps.svc",
                            trusting(cluster_ca(MASTER, tls_spec(None)).cert_pem))
    finally:
        server.close()
        await server.wait_closed()
    assert "apps/demo controller" in cert.subject.rfc4514_string()


def test_a_provided_ca_is_stood_in_for_by_the_first_derived_ca():
    """The user's CA key is read only in a pass: the controller keeps the derived first CA while one is in force."""
    provided = Generation(0, CREATED, 0, cluster_ca(MASTER, spec("elsewhere")).cert_pem)
    signer, bundle = controller_ca(MASTER, tls_spec(CaState(provided)))
    assert signer.cert_pem == bundle == cluster_ca(MASTER, tls_spec(None)).cert_pem
    # From a provided CA to a generated one: both are trusted, the derived one signs until RenewingCertificates.
    signer, bundle = controller_ca(MASTER, tls_spec(CaState(provided, CaPhase.TRUST_NEW, GEN1)))
    assert signer.cert_pem == cluster_ca(MASTER, tls_spec(None)).cert_pem and bundle.count("BEGIN CERTIFICATE") == 2
