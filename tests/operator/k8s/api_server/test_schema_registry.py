"""spec.schemaRegistry and TinyStreamSchema against the real API server, with a real registry process.

The StatefulSet, Services (clients' and headless), TinyStreamUser, users Secret and HTTPS certificate (from the
cluster CA) appear for spec.schemaRegistry and (but the Secret, which goes with the cluster) vanish without it;
the API server accepts several replicas and refuses a bad spec; a Deployment of an earlier release is deleted. A
TinyStreamSchema is registered by the operator (as its own login, from the users file the operator
writes) in a registry on an in-process broker: status gets id and version; an incompatible change gets
Ready False with the registry's 409 message.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl

import aiohttp
import pytest
from fake_controller import FakeController
from kmock_helpers import ready_condition, running_operator
from real_api import connection

from tinystream.operator.k8s.certificates import CertFacts, signed_by
from tinystream.operator.k8s.model import ClusterSpec
from tinystream.operator.k8s.schema_registry import operator_password, users_json
from tinystream.registry.app import RegistryOptions
from tinystream.testing.broker import BrokerThread, test_settings
from tinystream.testing.registry import RegistryThread
from tinystream.testing.waiting import wait_until_async

pytestmark = pytest.mark.timeout(120)
TS = "tinystream.io/v1alpha1"
MASTER = "test-master-secret"  # running_operator's
REGISTRY = [("apps/v1", "statefulsets", "demo-schema-registry"), ("v1", "services", "demo-schema-registry"),
            ("v1", "services", "demo-schema-registry-headless"), (TS, "tinystreamusers", "demo-schema-registry")]


def cluster(**spec) -> dict:
    return {"apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo"},
            "spec": {"brokers": 1, "storage": {"size": "1Gi", "deleteClaim": True}, **spec}}


def record(*fields: str) -> str:
    return json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": f, "type": "string"} for f in fields]})


@pytest.fixture
async def operator(control_plane):
    async with running_operator(control_plane.url, controller=FakeController(),
                                connection=connection(control_plane)) as deps:
        yield deps


async def test_the_registry_objects_come_with_the_field_and_go_without_it(api, operator) -> None:
    await api.create(TS, "tinystreamclusters", cluster(schemaRegistry={
        "replicas": 3, "resources": {"limits": {"memory": "256Mi"}}}))
    for api_version, plural, name in REGISTRY:
        obj = await api.wait_for(api_version, plural, name, lambda o: o is not None, timeout=30)
        assert obj["metadata"]["ownerReferences"][0]["name"] == "demo"
    sts = await api.get("apps/v1", "statefulsets", "demo-schema-registry")
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["serviceName"] == "demo-schema-registry-headless"
    container = sts["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "schema-registry" and "--tls-certfile" in args
    assert args[args.index("--advertised-url") + 1] == (
        f"https://$(POD_NAME).demo-schema-registry-headless.{api.ns}.svc:8081")
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"  # as stored
    headless = await api.get("v1", "services", "demo-schema-registry-headless")
    assert headless["spec"]["clusterIP"] == "None"
    secret = await api.wait_for("v1", "secrets", "demo-schema-registry-users", lambda o: o is not None, timeout=30)
    users = json.loads(base64.b64decode(secret["data"]["users.json"]))["users"]
    assert "tinystream-operator" in users
    # The registry's TinyStreamUser is a scram user of the cluster: its login is in the file too.
    await api.wait_for("v1", "secrets", "demo-schema-registry-users", lambda o: "demo-schema-registry" in json.loads(
        base64.b64decode(o["data"]["users.json"]))["users"], timeout=30)
    found = await api.wait_for(TS, "tinystreamclusters", "demo",
                               lambda o: "certificate" in ((o.get("status") or {}).get("schemaRegistry") or {}),
                               timeout=30)
    registry = found["status"]["schemaRegistry"]
    assert registry["url"] == "https://demo-schema-registry." + api.ns + ".svc:8081"  # the cluster has TLS
    tls = {k: base64.b64decode(v).decode() for k, v in
           (await api.get("v1", "secrets", "demo-schema-registry-tls"))["data"].items()}
    ca = base64.b64decode((await api.get("v1", "secrets", "demo-cluster-ca-cert"))["data"]["ca.crt"]).decode()
    assert signed_by(tls["registry.crt"], ca) and tls["ca.crt"] == ca
    facts = CertFacts.of(tls["registry.crt"])
    assert f"demo-schema-registry.{api.ns}.svc" in facts.dns_names
    assert f"*.demo-schema-registry-headless.{api.ns}.svc" in facts.dns_names  # each pod by its own name
    assert f"{facts.serial:x}" == registry["certificate"]["serial"]
    sts = await api.get("apps/v1", "statefulsets", "demo-schema-registry")
    template = sts["spec"]["template"]["metadata"]
    assert template["annotations"]["tinystream.io/registry-certificate"] == registry["certificate"]["serial"]

    await api.patch(TS, "tinystreamclusters", "demo", {"spec": {"schemaRegistry": None}})
    for api_version, plural, name in REGISTRY:
        await api.wait_for(api_version, plural, name, lambda o: o is None, timeout=30)
    await api.wait_for(TS, "tinystreamclusters", "demo",
                       lambda o: "schemaRegistry" not in (o.get("status") or {}), timeout=30)


async def test_the_deployment_of_an_earlier_release_gives_way_to_the_statefulset(api, operator) -> None:
    """An upgrade: the registry ran as a Deployment of the same name; the operator deletes it."""
    labels = {"tinystream.io/cluster": "demo", "app.kubernetes.io/component": "schema-registry"}
    await api.create("apps/v1", "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo-schema-registry", "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "strategy": {"type": "Recreate"},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "schema-registry", "image": "old"}]}}}})
    await api.create(TS, "tinystreamclusters", cluster(schemaRegistry={"replicas": 2}))
    await api.wait_for("apps/v1", "deployments", "demo-schema-registry", lambda o: o is None, timeout=30)
    sts = await api.wait_for("apps/v1", "statefulsets", "demo-schema-registry", lambda o: o is not None, timeout=30)
    assert sts["spec"]["replicas"] == 2


@pytest.mark.parametrize("registry", [{"replicas": -1}, {"replicas": 11}, {"compatibility": "SOMETIMES"},
                                      {"template": {"pod": {"metadata": {"labels": {"tinystream.io/x": "y"}}}}}])
def test_the_api_server_refuses_a_bad_schema_registry(control_plane, namespace, registry) -> None:
    body = {**cluster(schemaRegistry=registry), "metadata": {"name": "bad", "namespace": namespace}}
    status, answer = control_plane.request(
        "POST", f"/apis/{TS}/namespaces/{namespace}/tinystreamclusters", body)
    assert status == 422, answer
    assert "schemaRegistry" in json.dumps(answer)


def test_the_api_server_refuses_a_bad_schema(control_plane, namespace) -> None:
    body = {"apiVersion": TS, "kind": "TinyStreamSchema", "metadata": {"name": "s", "namespace": namespace},
            "spec": {"cluster": "demo", "subject": "s-value", "schema": "x", "schemaType": "XML"}}
    status, answer = control_plane.request("POST", f"/apis/{TS}/namespaces/{namespace}/tinystreamschemas", body)
    assert status == 422 and "schemaType" in json.dumps(answer), answer


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("schemas") / "data")) as running:
        yield running


async def test_a_schema_is_registered_and_an_incompatible_change_is_reported(
        api, control_plane, broker, tmp_path, monkeypatch) -> None:
    """Over HTTPS, as on Kubernetes: the registry serves the certificate the operator issued (from its Secret),
    the operator trusts the cluster CA and calls the registry by its Service name (resolved here to loopback)."""
    users_file = tmp_path / "users.json"
    users_file.write_text('{"users": {}}')
    registry: list[RegistryThread] = []
    service = f"demo-schema-registry.{api.ns}.svc"
    resolve = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: resolve(
        "127.0.0.1" if host == service else host, *a, **k))
    try:
        async with running_operator(control_plane.url, controller=FakeController(),
                                    connection=connection(control_plane), schema_interval_s=1.0,
                                    registry_url=lambda _: f"https://{service}:{registry[0].url.rsplit(':', 1)[1]}"):
            await api.create(TS, "tinystreamclusters", cluster(schemaRegistry={}))
            body = await api.get(TS, "tinystreamclusters", "demo")
            # What the operator writes into the users Secret: its own login (derived from its master secret).
            users_file.write_text(users_json(MASTER, ClusterSpec.from_resource(body), []))
            secret = await api.wait_for("v1", "secrets", "demo-schema-registry-tls", lambda o: o is not None,
                                        timeout=30)
            for name in ("registry.crt", "registry.key"):
                (tmp_path / name).write_bytes(base64.b64decode(secret["data"][name]))
            registry.append(RegistryThread(RegistryOptions(
                bootstrap=broker.bootstrap, port=0, users_file=users_file,
                tls_certfile=tmp_path / "registry.crt", tls_keyfile=tmp_path / "registry.key")))
            registry[0].start()
            assert registry[0].url.startswith("https://")
            await api.create(TS, "tinystreamschemas", {
                "apiVersion": TS, "kind": "TinyStreamSchema", "metadata": {"name": "orders"},
                "spec": {"cluster": "demo", "subject": "orders-value", "schema": record("id"),
                         "compatibility": "BACKWARD"}})
            done = await api.wait_for(TS, "tinystreamschemas", "orders",
                                      lambda o: ready_condition(o).get("status") == "True", timeout=30)
            assert (done["status"]["version"], done["status"]["subject"]) == (1, "orders-value")
            first_id = done["status"]["id"]

            # A new field without a default: BACKWARD refuses it (409), and status says so.
            await api.patch(TS, "tinystreamschemas", "orders", {"spec": {"schema": record("id", "customer")}})
            refused = await api.wait_for(TS, "tinystreamschemas", "orders",
                                         lambda o: ready_condition(o).get("reason") == "IncompatibleSchema", timeout=30)
            assert "409" in ready_condition(refused)["message"]
            assert refused["status"]["id"] == first_id  # the version in force is still reported

            # A compatible change (a default) is a new version.
            fields = [{"name": "id", "type": "string"}, {"name": "customer", "type": "string", "default": ""}]
            await api.patch(TS, "tinystreamschemas", "orders", {"spec": {"schema": json.dumps(
                {"type": "record", "name": "Order", "fields": fields})}})
            second = await api.wait_for(TS, "tinystreamschemas", "orders",
                                        lambda o: (o.get("status") or {}).get("version") == 2, timeout=30)
            assert ready_condition(second)["status"] == "True" and second["status"]["id"] != first_id
            # Who may call: the logins of the users file only (the operator's here); others get 401.
            trust = ssl.create_default_context(cadata=base64.b64decode(secret["data"]["ca.crt"]).decode())
            url = f"https://{service}:{registry[0].url.rsplit(':', 1)[1]}/subjects"
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as session:
                for headers in ({}, {"Authorization": aiohttp.encode_basic_auth("tinystream-operator", "guess")}):
                    async with session.get(url, headers=headers) as response:
                        assert response.status == 401, headers
                # A subject deleted by hand: the periodic check registers the schema again.
                operator_login = {"Authorization": aiohttp.encode_basic_auth(
                    "tinystream-operator", operator_password(MASTER, ClusterSpec.from_resource(body)))}
                async with session.delete(f"{url}/orders-value", headers=operator_login) as response:
                    assert response.status == 200, await response.text()

                async def registered_again() -> bool:
                    async with session.get(f"{url}/orders-value/versions", headers=operator_login) as response:
                        return response.status == 200

                await wait_until_async(registered_again, timeout=30, interval=0.5)
            await api.delete(TS, "tinystreamschemas", "orders")  # Keep: the subject stays
            await api.wait_for(TS, "tinystreamschemas", "orders", lambda o: o is None, timeout=30)
    finally:
        for running in registry:
            running.stop()
    assert registry and registry[0].server is not None
    assert "orders-value" in registry[0].server.state.subject_names()


def _file(secret: dict, key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


async def test_tls_users_log_in_by_certificate_and_rules_follow_their_topic_acls(
        api, control_plane, broker, tmp_path, monkeypatch) -> None:
    """A cluster whose listener authenticates by certificate: the registry pod mounts the clients CA and the
    rules the operator derives from the TinyStreamUsers; a real registry on the rendered files (as the pod
    reads them) lets a tls user in by its Secret's certificate, as far as its topic ACLs go, and follows an
    ACL change through the rewritten rules file."""
    service = f"demo-schema-registry.{api.ns}.svc"
    resolve = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: resolve(
        "127.0.0.1" if host == service else host, *a, **k))
    user = {"apiVersion": TS, "kind": "TinyStreamUser", "spec": {"cluster": "demo", "authentication": {"type": "tls"}}}
    writes_orders = {"acls": [{"resource": {"type": "topic", "name": "orders", "patternType": "literal"},
                               "operations": ["Write", "Describe"]}]}
    registry: list[RegistryThread] = []
    try:
        async with running_operator(control_plane.url, controller=FakeController(),
                                    connection=connection(control_plane)):
            await api.create(TS, "tinystreamclusters", cluster(
                listeners={"tls": True, "authentication": {"type": "tls"}}, schemaRegistry={}))
            await api.create(TS, "tinystreamusers", {**user, "metadata": {"name": "alice"},
                                                      "spec": {**user["spec"], "authorization": writes_orders}})
            await api.create(TS, "tinystreamusers", {**user, "metadata": {"name": "bob"}})

            def rules_of(secret: dict | None) -> dict:
                data = (secret or {}).get("data") or {}
                return json.loads(base64.b64decode(data["rules.json"])) if "rules.json" in data else {}

            secret = await api.wait_for("v1", "secrets", "demo-schema-registry-users", lambda o: any(
                r["principal"] == "User:CN=alice" for r in rules_of(o).get("rules", [])), timeout=60)
            assert {r["subject"] for r in rules_of(secret)["rules"] if r["principal"] == "User:CN=alice"} == {
                "orders-key", "orders-value"}
            assert "User:tinystream-operator" in rules_of(secret)["admins"]
            sts = await api.wait_for("apps/v1", "statefulsets", "demo-schema-registry",
                                     lambda o: o is not None, timeout=60)
            pod = sts["spec"]["template"]["spec"]
            args = pod["containers"][0]["args"]
            assert args[args.index("--rules-file") + 1] == "/etc/tinystream-registry-users/rules.json"
            assert args[args.index("--tls-client-cafile") + 1] == "/etc/tinystream-clients-ca/ca.crt"
            volumes = {v["name"]: v for v in pod["volumes"]}
            assert volumes["clients-ca"]["secret"] == {"secretName": "demo-clients-ca-cert", "defaultMode": 0o440}
            assert pod["securityContext"]["fsGroup"] == 10001 and pod["securityContext"]["runAsNonRoot"]

            # The pod's files, from the Secrets the operator wrote.
            for name in ("alice", "bob"):
                done = await api.wait_for("v1", "secrets", name, lambda o: o is not None and "user.crt" in o["data"],
                                          timeout=60)
                for key in ("user.crt", "user.key"):
                    (tmp_path / f"{name}-{key}").write_bytes(_file(done, key))
            tls = await api.wait_for("v1", "secrets", "demo-schema-registry-tls", lambda o: o is not None, timeout=60)
            for key in ("registry.crt", "registry.key", "ca.crt"):
                (tmp_path / key).write_bytes(_file(tls, key))
            (tmp_path / "clients-ca.crt").write_bytes(_file(await api.get("v1", "secrets", "demo-clients-ca-cert"),
                                                            "ca.crt"))
            for key in ("users.json", "rules.json"):
                (tmp_path / key).write_bytes(_file(secret, key))
            registry.append(RegistryThread(RegistryOptions(
                bootstrap=broker.bootstrap, port=0, topic="_schemas_mtls", users_file=tmp_path / "users.json",
                rules_file=tmp_path / "rules.json", tls_certfile=tmp_path / "registry.crt",
                tls_keyfile=tmp_path / "registry.key", tls_client_cafile=tmp_path / "clients-ca.crt")))
            registry[0].start()
            url = f"https://{service}:{registry[0].url.rsplit(':', 1)[1]}/subjects/orders-value/versions"
            body = {"schema": record("id")}

            async def register(who: str | None) -> int:
                trust = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
                if who is not None:
                    trust.load_cert_chain(tmp_path / f"{who}-user.crt", tmp_path / f"{who}-user.key")
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as session:
                    async with session.post(url, json=body) as response:
                        return response.status

            assert await register("alice") == 200  # User:CN=alice, Write on topic orders
            assert await register("bob") == 403  # a login, but no ACL: no rule
            assert await register(None) == 401

            # Alice's ACL becomes Read: the next cluster pass rewrites rules.json, the registry reads it again.
            await api.patch(TS, "tinystreamusers", "alice", {"spec": {"authorization": {"acls": [
                {"resource": {"type": "topic", "name": "orders", "patternType": "literal"}, "operations": ["Read"]}]}}})
            secret = await api.wait_for("v1", "secrets", "demo-schema-registry-users", lambda o: any(
                r["principal"] == "User:CN=alice" and r["operations"] == ["READ"]
                for r in rules_of(o).get("rules", [])), timeout=60)
            (tmp_path / "rules.json").write_bytes(_file(secret, "rules.json"))
            os.utime(tmp_path / "rules.json", ns=(1, 1))  # another mtime, whatever the clock's resolution
            assert await register("alice") == 403
    finally:
        for running in registry:
            running.stop()
