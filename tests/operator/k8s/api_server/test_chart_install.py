"""`helm install` of the chart on a real API server, CRDs included, and the operator working under its RBAC.

A control plane of its own (no CRDs yet, as on a new cluster): helm creates
the CRDs from crds/ and then a TinyStreamCluster and a Topic that the real
server validates. The operator then runs in-process logged in as the chart's
ServiceAccount (a TokenRequest token), so every call it makes passes the real
RBAC authorizer against the chart's Roles; and that ServiceAccount is refused
what it was not given.
"""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from fake_controller import FakeController
from kmock_helpers import ready_condition, running_operator
from real_api import RealApi, connection

from tinystream.operator.k8s.certificates import CertFacts, signed_by
from tinystream.operator.k8s.model import ClusterSpec
from tinystream.operator.k8s.schema_registry import users_json
from tinystream.registry.app import RegistryOptions
from tinystream.scram_users import UserStore
from tinystream.testing.broker import BrokerThread, test_settings
from tinystream.testing.kube_control_plane import KubeControlPlane, k8s_bin_dir, missing_binaries
from tinystream.testing.registry import RegistryThread
from tinystream.testing.waiting import wait_until_async

pytestmark = pytest.mark.timeout(180)
ROOT = __import__("pathlib").Path(__file__).resolve().parents[4]
NS, RELEASE, SA = "tinystream", "ts", "ts-tinystream"
TS = "tinystream.io/v1alpha1"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeControlPlane]:
    missing = missing_binaries("etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "helm")
    if missing:
        pytest.skip(f"not built: {', '.join(missing)}; run make k8s-binaries")
    with KubeControlPlane(tmp_path_factory.mktemp("helm-plane"), controller_manager=True) as cp:
        subprocess.run(
            [str(k8s_bin_dir() / "helm"), "install", RELEASE, str(ROOT / "charts" / "tinystream"), "--namespace", NS,
             "--create-namespace", "--kubeconfig", str(cp.kubeconfig),
             "--set", "cluster.enabled=true", "--set", "cluster.name=demo",
             "--set", "cluster.spec.config.auto\\.create\\.topics\\.enable=false",
             "--set", "cluster.spec.config.log\\.retention\\.ms=86400000",
             "--set", "topics[0].name=orders", "--set", "topics[0].partitions=3",
             "--set", "topics[0].replicationFactor=2", "--set", "topics[0].config.retention\\.ms=604800000"],
            check=True, capture_output=True, text=True, timeout=120)
        yield cp


def test_helm_install_creates_the_crds_and_the_custom_resources(installed: KubeControlPlane) -> None:
    for crd in ("tinystreamclusters.tinystream.io", "topics.tinystream.io"):
        installed.kubectl("wait", "--for=condition=Established", "--timeout=30s", f"crd/{crd}")
    status, cluster = installed.request("GET", f"/apis/{TS}/namespaces/{NS}/tinystreamclusters/demo")
    assert status == 200, cluster
    # Helm's numbers and booleans arrive as the CRD wants them (the chart quotes what is not an integer).
    assert cluster["spec"]["config"] == {"auto.create.topics.enable": "false", "log.retention.ms": 86400000}
    status, topic = installed.request("GET", f"/apis/{TS}/namespaces/{NS}/topics/orders")
    assert status == 200 and topic["spec"]["partitions"] == 3, topic
    status, deployment = installed.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{SA}")
    assert status == 200 and deployment["spec"]["template"]["spec"]["serviceAccountName"] == SA


@pytest.mark.parametrize("verb,resource,namespace", [
    ("get", "secrets", "kube-system"),
    ("get", "secrets", NS),  # it makes certificates and passwords but never reads a Secret back
    ("list", "secrets", NS),
    ("delete", "nodes", None),
    ("create", "clusterroles", None),
    ("create", "pods/exec", NS),
    ("delete", "customresourcedefinitions", None),
])
def test_the_operator_service_account_is_refused_what_it_was_not_given(installed, verb, resource, namespace) -> None:
    args = ["auth", "can-i", verb, resource, f"--as=system:serviceaccount:{NS}:{SA}"]
    result = installed.kubectl(*args, *(["-n", namespace] if namespace else []), check=False)
    assert result.stdout.strip() == "no", (verb, resource, result.stdout, result.stderr)


async def test_the_operator_reconciles_under_the_charts_service_account(installed: KubeControlPlane) -> None:
    token = installed.service_account_token(NS, SA)
    api = RealApi(installed, NS)
    fake = FakeController()
    try:
        async with running_operator(installed.url, controller=fake, connection=connection(installed, token),
                                    namespace=NS):
            sts = await api.wait_for("apps/v1", "statefulsets", "demo-broker", lambda o: o is not None, timeout=60)
            assert sts["spec"]["replicas"] == 3
            topic = await api.wait_for(TS, "topics", "orders", lambda o: ready_condition(o).get("status") == "True",
                                       timeout=60)
            assert len(topic["status"]["partitions"]) == 3
            await api.delete(TS, "topics", "orders")  # the finalizer is released under the same RBAC
            await api.wait_for(TS, "topics", "orders", lambda o: o is None, timeout=60)
    finally:
        await api.close()
    assert [name for _, name in fake.deleted] == ["orders"]


USER = {"apiVersion": TS, "kind": "TinyStreamUser", "metadata": {"name": "app"}, "spec": {
    "cluster": "secure", "authentication": {"type": "scram-sha-512"}, "authorization": {"acls": [
        {"resource": {"type": "topic", "name": "app-", "patternType": "prefix"}, "operations": ["Read", "Write"]}]}}}


def secret_files(secret: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


async def test_a_secured_cluster_gets_its_certificates_and_credentials_under_the_charts_rbac(installed) -> None:
    token = installed.service_account_token(NS, SA)
    api = RealApi(installed, NS)
    secured = {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "secure"}, "spec": {
        "brokers": 1, "storage": {"size": "1Gi"},
        "listeners": {"tls": True, "authentication": {"type": "scram-sha-512"}},
        "certificates": {"validityDays": 30, "renewalDays": 5}}}
    controller = FakeController()
    try:
        await api.create(TS, "tinystreamclusters", secured)
        async with running_operator(installed.url, controller=controller, connection=connection(installed, token),
                                    namespace=NS):
            cluster = await api.wait_for(TS, "tinystreamclusters", "secure",
                                         lambda o: bool(((o or {}).get("status") or {}).get("certificates")))
            first = cluster["status"]["certificates"]
            tls = secret_files(await api.get("v1", "secrets", "secure-broker-tls"))
            ca = secret_files(await api.get("v1", "secrets", "secure-cluster-ca-cert"))["ca.crt"]
            assert tls["ca.crt"] == ca and signed_by(tls["broker.pem"], ca)
            assert f"{CertFacts.of(tls['broker.pem']).serial:x}" == first["serial"]
            assert "*.secure-brokers.tinystream.svc" in CertFacts.of(tls["broker.pem"]).dns_names
            users = secret_files(await api.get("v1", "secrets", "secure-broker-users"))
            store = UserStore.from_json(json.loads(users["users.json"]))
            assert store.check_plain("secure-broker", users["broker-password"])  # salted; the password alone here
            assert users["broker-password"] not in users["users.json"]  # only salted keys are stored

            await api.patch(TS, "tinystreamclusters", "secure",
                            {"metadata": {"annotations": {"tinystream.io/renew-certificates": "1"}}})
            renewed = await api.wait_for(TS, "tinystreamclusters", "secure", lambda o: (
                (o or {}).get("status", {}).get("certificates", {}).get("renewToken") == "1"))
            assert renewed["status"]["certificates"]["serial"] != first["serial"]
            tls_after = secret_files(await api.get("v1", "secrets", "secure-broker-tls"))
            assert f"{CertFacts.of(tls_after['broker.pem']).serial:x}" == renewed["status"]["certificates"]["serial"]
            assert signed_by(tls_after["broker.pem"], ca)  # the same CA: clients keep trusting the brokers

            await api.create(TS, "tinystreamusers", USER)
            user = await api.wait_for(TS, "tinystreamusers", "app", lambda o: ready_condition(o).get("status") == "True")
            assert user["status"]["username"] == "app" and user["status"]["acls"] == 2
            password = secret_files(await api.get("v1", "secrets", "app"))["password"]
            credential = controller.credentials[("app", "SCRAM-SHA-512")]
            assert UserStore.from_json({"users": {"app": {"SCRAM-SHA-512": {
                "salt": credential.salt, "stored_key": credential.stored_key, "server_key": credential.server_key,
                "iterations": credential.iterations}}}}).check_plain("app", password)
            assert {(a.resource_name, a.operation) for a in controller.acls} == {("app-", "READ"), ("app-", "WRITE")}
            await api.delete(TS, "tinystreamusers", "app")  # the finalizer removes its access first
            await api.wait_for(TS, "tinystreamusers", "app", lambda o: o is None)
            assert not controller.acls and not controller.credentials

            # A user applied before its cluster waits (ClusterNotFound, no Secret), then gets its credentials.
            await api.create(TS, "tinystreamusers", {**USER, "metadata": {"name": "early"},
                                                     "spec": {**USER["spec"], "cluster": "late"}})
            early = await api.wait_for(TS, "tinystreamusers", "early",
                                       lambda o: ready_condition(o).get("reason") == "ClusterNotFound")
            assert "secret" not in early["status"] and await api.get("v1", "secrets", "early") is None
            await api.create(TS, "tinystreamclusters", {**secured, "metadata": {"name": "late"}})
            await api.wait_for(TS, "tinystreamusers", "early", lambda o: ready_condition(o).get("status") == "True",
                               timeout=30)
            assert "password" in secret_files(await api.get("v1", "secrets", "early"))
        sts = await api.get("apps/v1", "statefulsets", "secure-broker")
        volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
        assert volumes["tls"]["secret"]["secretName"] == "secure-broker-tls"
        assert volumes["users"]["secret"]["secretName"] == "secure-broker-users"
    finally:
        await api.close()


async def test_a_deleted_user_secret_comes_back_and_a_tls_certificate_is_renewed_under_the_charts_rbac(
        installed) -> None:
    # The operator cannot read the Secrets back (no get/list): it learns that one is gone by creating it.
    token = installed.service_account_token(NS, SA)
    api = RealApi(installed, NS)
    controller = FakeController()
    days: list[float] = [0.0]  # the operator's clock runs this many days ahead of the real one

    def clock() -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=days[0])

    def cluster(name: str, authentication: str) -> dict:
        return {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": name}, "spec": {
            "brokers": 1, "storage": {"size": "1Gi"},
            "listeners": {"tls": True, "authentication": {"type": authentication}},
            "certificates": {"validityDays": 30, "renewalDays": 5}}}

    async def events_of(name: str, reason: str) -> list[dict]:
        return [e for e in await api.list("v1", "events")
                if e["involvedObject"]["name"] == name and e["reason"] == reason]

    try:
        await api.create(TS, "tinystreamclusters", cluster("scram", "scram-sha-512"))
        await api.create(TS, "tinystreamclusters", cluster("mtls", "tls"))
        async with running_operator(installed.url, controller=controller, connection=connection(installed, token),
                                    namespace=NS, user_secret_interval_s=0.5, clock=clock):
            await api.create(TS, "tinystreamusers", {**USER, "metadata": {"name": "carol"},
                                                     "spec": {**USER["spec"], "cluster": "scram"}})
            await api.wait_for(TS, "tinystreamusers", "carol", lambda o: ready_condition(o).get("status") == "True")
            credential = controller.credentials[("carol", "SCRAM-SHA-512")]
            first_password = secret_files(await api.get("v1", "secrets", "carol"))["password"]

            await api.delete("v1", "secrets", "carol")
            back = await api.wait_for("v1", "secrets", "carol", lambda o: o is not None, timeout=30)
            password = secret_files(back)["password"]
            assert password == first_password
            assert controller.credentials[("carol", "SCRAM-SHA-512")] == credential  # no new credential was set
            held = UserStore.from_json({"users": {"carol": {"SCRAM-SHA-512": {
                "salt": credential.salt, "stored_key": credential.stored_key, "server_key": credential.server_key,
                "iterations": credential.iterations}}}})
            assert held.check_plain("carol", password) and not held.check_plain("carol", password + "x")  # accepted
            assert back["metadata"]["ownerReferences"][0]["name"] == "carol"
            (recreated,) = await wait_for_events(events_of, "carol", "SecretRecreated")
            assert recreated["type"] == "Warning" and "same derived password" in recreated["message"]

            await api.create(TS, "tinystreamusers", {"apiVersion": TS, "kind": "TinyStreamUser",
                                                     "metadata": {"name": "dave"},
                                                     "spec": {"cluster": "mtls", "authentication": {"type": "tls"}}})
            dave = await api.wait_for(TS, "tinystreamusers", "dave", lambda o: bool(
                ((o or {}).get("status") or {}).get("certificate")) and ready_condition(o).get("status") == "True")
            issued = dave["status"]["certificate"]
            pem = secret_files(await api.get("v1", "secrets", "dave"))
            facts = CertFacts.of(pem["user.crt"])
            assert f"{facts.serial:x}" == issued["serial"] and facts.not_after.isoformat() == issued["notAfter"]
            clients_ca = secret_files(await api.get("v1", "secrets", "mtls-clients-ca-cert"))["ca.crt"]
            assert signed_by(pem["user.crt"], clients_ca)  # the clients CA; ca.crt (the cluster CA) verifies brokers
            assert not signed_by(pem["user.crt"], pem["ca.crt"])
            assert (facts.not_after - datetime.datetime.now(datetime.UTC)).days in (29, 30)  # validityDays

            days[0] = 26  # inside the renewal window (renewalDays 5 of 30)
            renewed = await api.wait_for(TS, "tinystreamusers", "dave", lambda o: (
                (o or {}).get("status", {}).get("certificate", {}).get("serial") not in (None, issued["serial"])),
                timeout=30)
            after = secret_files(await api.get("v1", "secrets", "dave"))
            facts_after = CertFacts.of(after["user.crt"])
            assert f"{facts_after.serial:x}" == renewed["status"]["certificate"]["serial"]
            assert facts_after.not_after > facts.not_after + datetime.timedelta(days=25)
            assert signed_by(after["user.crt"], clients_ca) and after["user.key"] != pem["user.key"]
            await wait_for_events(events_of, "dave", "CertificateRenewed")

            await api.delete("v1", "secrets", "dave")
            remade = await api.wait_for(TS, "tinystreamusers", "dave", lambda o: (
                (o or {}).get("status", {}).get("certificate", {}).get("serial")
                not in (None, renewed["status"]["certificate"]["serial"])), timeout=30)
            again = secret_files(await api.get("v1", "secrets", "dave"))
            assert f"{CertFacts.of(again['user.crt']).serial:x}" == remade["status"]["certificate"]["serial"]
            await wait_for_events(events_of, "dave", "SecretRecreated")
    finally:
        await api.close()


async def wait_for_events(events_of, name: str, reason: str, timeout: float = 15.0) -> list[dict]:
    return await wait_until_async(lambda: events_of(name, reason), timeout=timeout, interval=0.2,
                                  what=f"a {reason} Event for {name}")


@pytest.mark.parametrize("verb,resource", [
    ("get", f"secrets/{SA}-controller-secret"),  # its master secret, by name: one of two Secrets it may read
    ("get", f"secrets/{SA}-dashboard-login"),  # the dashboard's login token, by name
    ("create", "secrets"),
    ("create", "tokenreviews.authentication.k8s.io"),  # who calls the controller API: a broker pod's token
    # kopf lists and watches namespaces even when it serves one; refused, it retried ~55 s before its first pass.
    ("list", "namespaces"),
    ("watch", "namespaces"),
])
def test_the_operator_service_account_may_do_what_it_needs(installed, verb, resource) -> None:
    result = installed.kubectl("auth", "can-i", verb, resource, f"--as=system:serviceaccount:{NS}:{SA}",
                               "-n", NS, check=False)
    assert result.stdout.strip() == "yes", (verb, resource, result.stdout, result.stderr)


async def test_the_operator_makes_its_master_secret_and_dashboard_login_once_under_the_charts_rbac(installed) -> None:
    from tinystream.operator.k8s.api import KubeClient
    from tinystream.operator.k8s.master_secret import ensure_dashboard_login, ensure_master_secret

    client = KubeClient.from_connection_info(connection(installed, installed.service_account_token(NS, SA)))
    try:
        first = await ensure_master_secret(client, NS, f"{SA}-controller-secret")
        again = await ensure_master_secret(client, NS, f"{SA}-controller-secret")  # a restart reads the same
        assert first == again and len(first) >= 32
        login = await ensure_dashboard_login(client, NS, f"{SA}-dashboard-login")
        assert login == await ensure_dashboard_login(client, NS, f"{SA}-dashboard-login") and login != first
    finally:
        await client.close()


ZONE = "topology.kubernetes.io/zone"
RACK_ROLE = f"{SA}-broker-rack"


def run_rack_init(cp: KubeControlPlane, tmp_path, *, token: str, node: str,
                  out: str) -> subprocess.CompletedProcess[str]:
    """The init container's entry point, as a process, against the real API server with `token`."""
    creds = tmp_path / f"creds-{out}"
    creds.mkdir()
    (creds / "token").write_text(token)
    (creds / "ca.crt").write_bytes((cp.workdir / "apiserver-certs" / "apiserver.crt").read_bytes())
    return subprocess.run([sys.executable, "-m", "tinystream.operator.k8s.rack_init", "--topology-key", ZONE,
                           "--out", str(tmp_path / out), "--credentials", str(creds), "--node", node,
                           "--server", cp.url], capture_output=True, text=True, timeout=60)


async def test_a_rack_clusters_brokers_may_get_nodes_and_nothing_else(installed: KubeControlPlane, tmp_path) -> None:
    """Under the chart's RBAC the operator gives a spec.rack cluster's brokers their own ServiceAccount bound to
    the chart's get-nodes ClusterRole; the init container's entry point reads its node's zone with it."""
    for name, labels in (("node-a", {ZONE: "zone-a"}), ("node-bare", {})):
        status, body = installed.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                                   "metadata": {"name": name, "labels": labels}})
        assert status == 201, body
    token = installed.service_account_token(NS, SA)
    api = RealApi(installed, NS)
    binding = f"tinystream-{NS}-racked-rack"
    try:
        await api.create(TS, "tinystreamclusters", {"apiVersion": TS, "kind": "TinyStreamCluster",
                                                    "metadata": {"name": "racked"}, "spec": {
            "brokers": 1, "storage": {"size": "1Gi"}, "rack": {"topologyKey": ZONE}}})
        async with running_operator(installed.url, controller=FakeController(), connection=connection(installed, token),
                                    namespace=NS):
            sts = await api.wait_for("apps/v1", "statefulsets", "racked-broker", lambda o: o is not None, timeout=60)
            pod = sts["spec"]["template"]["spec"]
            assert [c["name"] for c in pod["initContainers"]] == ["rack"]
            assert pod["serviceAccountName"] == "racked-broker" and pod["automountServiceAccountToken"] is False
            assert {"name": "rack", "mountPath": "/var/run/tinystream-rack", "readOnly": True} in \
                pod["containers"][0]["volumeMounts"]
            status, crb = installed.request("GET", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}")
            assert status == 200 and crb["roleRef"]["name"] == RACK_ROLE, crb
            assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "racked-broker", "namespace": NS}]

            broker = f"--as=system:serviceaccount:{NS}:racked-broker"
            for verb, resource, allowed in (("get", "nodes", "yes"), ("list", "nodes", "no"), ("watch", "nodes", "no"),
                                            ("patch", "nodes", "no"), ("get", "pods", "no"), ("get", "secrets", "no")):
                result = installed.kubectl("auth", "can-i", verb, resource, broker, "-n", NS, check=False)
                assert result.stdout.strip() == allowed, (verb, resource, result.stdout, result.stderr)
            other = installed.kubectl("auth", "can-i", "get", "nodes", f"--as=system:serviceaccount:{NS}:default",
                                      check=False)
            assert other.stdout.strip() == "no"  # only the rack cluster's brokers, not the namespace

            broker_token = installed.service_account_token(NS, "racked-broker")
            done = run_rack_init(installed, tmp_path, token=broker_token, node="node-a", out="a")
            assert done.returncode == 0, done.stderr
            assert (tmp_path / "a").read_text() == "zone-a\n"
            bare = run_rack_init(installed, tmp_path, token=broker_token, node="node-bare", out="bare")
            assert bare.returncode == 0, bare.stderr
            assert (tmp_path / "bare").read_text() == ""
            assert f"node node-bare has no label {ZONE}" in bare.stderr
            refused = run_rack_init(installed, tmp_path, token=installed.service_account_token(NS, "default"),
                                    node="node-a", out="refused")
            assert refused.returncode == 1 and "cannot read node node-a" in refused.stderr, refused.stderr
            assert "Forbidden" in refused.stderr and not (tmp_path / "refused").exists()

            await api.delete(TS, "tinystreamclusters", "racked")  # the operator deletes the cluster-scoped binding
            await wait_until_async(lambda: installed.request(
                "GET", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}")[0] == 404, timeout=30)
    finally:
        await api.close()


async def test_a_schema_registry_and_a_schema_under_the_charts_rbac(installed, tmp_path) -> None:
    """spec.schemaRegistry's objects made and deleted, a TinyStreamSchema's status and finalizer, as the chart's
    ServiceAccount; the registry is a process of the test's (no kubelet here)."""
    installed.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/tinystreamschemas.tinystream.io")
    token = installed.service_account_token(NS, SA)
    api = RealApi(installed, NS)
    users_file = tmp_path / "users.json"
    users_file.write_text('{"users": {}}')
    with BrokerThread(test_settings(tmp_path / "data")) as broker:
        registry = RegistryThread(RegistryOptions(bootstrap=broker.bootstrap, port=0, users_file=users_file))
        registry.start()
        try:
            await api.create(TS, "tinystreamclusters", {
                "apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "reg"},
                "spec": {"brokers": 1, "storage": {"size": "1Gi"}, "schemaRegistry": {}}})
            body = await api.get(TS, "tinystreamclusters", "reg")
            users_file.write_text(users_json("test-master-secret", ClusterSpec.from_resource(body), []))
            async with running_operator(installed.url, controller=FakeController(),
                                        connection=connection(installed, token), namespace=NS,
                                        registry_url=lambda _: registry.url):
                for api_version, plural in (("apps/v1", "statefulsets"), ("v1", "services"), (TS, "tinystreamusers")):
                    await api.wait_for(api_version, plural, "reg-schema-registry", lambda o: o is not None, timeout=60)
                await api.wait_for("v1", "secrets", "reg-schema-registry-users", lambda o: o is not None, timeout=60)
                await api.create(TS, "tinystreamschemas", {
                    "apiVersion": TS, "kind": "TinyStreamSchema", "metadata": {"name": "s"},
                    "spec": {"cluster": "reg", "subject": "s-value", "schema": '"string"'}})
                done = await api.wait_for(TS, "tinystreamschemas", "s",
                                          lambda o: ready_condition(o).get("status") == "True", timeout=60)
                assert done["status"]["version"] == 1
                await api.delete(TS, "tinystreamschemas", "s")  # the finalizer is released under the same RBAC
                await api.wait_for(TS, "tinystreamschemas", "s", lambda o: o is None, timeout=60)
                await api.patch(TS, "tinystreamclusters", "reg", {"spec": {"schemaRegistry": None}})
                for api_version, plural in (("apps/v1", "statefulsets"), ("v1", "services"), (TS, "tinystreamusers")):
                    await api.wait_for(api_version, plural, "reg-schema-registry", lambda o: o is None, timeout=60)
        finally:
            registry.stop()
            await api.close()
