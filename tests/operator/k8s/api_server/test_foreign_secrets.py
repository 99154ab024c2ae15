"""Issue 21, item 7: the operator never writes into a Secret it does not own, and user names that are the
cluster's own are refused. Against the real API server, whose JSON patch `test` makes the owner check and
the write one atomic step (the operator may not read Secrets).

Before: a tls TinyStreamUser named like any existing Secret made the operator overwrite that Secret's keys
at the next renewal, and a scram user named like the brokers' own user took over replication.
"""

from __future__ import annotations

import base64

import pytest
from fake_controller import FakeController
from kmock_helpers import ready_condition, running_operator
from real_api import connection

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.cluster_tls import ForeignSecret, create_secret, replace_secret_data

pytestmark = pytest.mark.timeout(120)
TS = "tinystream.io/v1alpha1"


def secret(name: str, namespace: str, data: dict[str, str], owner: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if owner is not None:  # a real object: the garbage collector deletes what a missing owner owns
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"]}]
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta,
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def decoded(obj: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}


async def test_a_secret_of_another_owner_is_never_written(control_plane, namespace, api) -> None:
    client = KubeClient.from_connection_info(connection(control_plane))
    try:
        owners = []
        for name in ("owner-1", "owner-2", "owner-3"):
            await api.create("v1", "configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
            owners.append(await api.get("v1", "configmaps", name))
        await api.create("v1", "secrets", secret("payments-db", namespace, {"password": "theirs"}))
        ours = secret("payments-db", namespace, {"user.key": "ours"}, owner=owners[0])
        with pytest.raises(ForeignSecret):
            await create_secret(client, ours)  # a Conflict, and the one there has no owner
        with pytest.raises(ForeignSecret):
            await replace_secret_data(client, ours)  # a renewal
        kept = await api.get("v1", "secrets", "payments-db")
        assert decoded(kept) == {"password": "theirs"}

        mine = secret("app", namespace, {"v": "1"}, owner=owners[1])
        assert await create_secret(client, mine) is True
        assert await create_secret(client, mine) is False  # ours is there: no error
        await replace_secret_data(client, secret("app", namespace, {"v": "2"}, owner=owners[1]))
        assert decoded(await api.get("v1", "secrets", "app")) == {"v": "2"}
        with pytest.raises(ForeignSecret):  # the same name, another owner (a user deleted and made again)
            await replace_secret_data(client, secret("app", namespace, {"v": "3"}, owner=owners[2]))
        assert decoded(await api.get("v1", "secrets", "app")) == {"v": "2"}
    finally:
        await client.close()


async def test_users_named_like_the_cluster_or_another_secret_are_refused(control_plane, namespace, api) -> None:
    await api.create("v1", "secrets", secret("alice", namespace, {"password": "someone else's"}))
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane)):
        await api.create(TS, "tinystreamclusters", {
            "apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "demo"},
            "spec": {"brokers": 1, "storage": {"size": "1Gi"},
                     "listeners": {"authentication": {"type": "scram-sha-512"}}}})
        for name in ("demo-broker", "demo-broker-users", "alice", "bob"):
            await api.create(TS, "tinystreamusers", {
                "apiVersion": TS, "kind": "TinyStreamUser", "metadata": {"name": name},
                "spec": {"cluster": "demo", "authentication": {"type": "scram-sha-512"}}})
        reasons = {}
        for name in ("demo-broker", "demo-broker-users", "alice", "bob"):
            found = await api.wait_for(TS, "tinystreamusers", name, lambda o: ready_condition(o), timeout=30)
            reasons[name] = ready_condition(found)["reason"]
        assert reasons["demo-broker"] == "NameReserved"  # the brokers' own SCRAM user
        assert reasons["demo-broker-users"] == "NameReserved"  # the Secret the brokers mount
        assert reasons["alice"] == "SecretNotOwned"
        assert reasons["bob"] in ("UserReady", "ControllerUnavailable", "ControllerRefused")  # not refused
        assert decoded(await api.get("v1", "secrets", "alice")) == {"password": "someone else's"}
        assert await api.get("v1", "secrets", "demo-broker") is None  # never made
        users = await api.wait_for("v1", "secrets", "demo-broker-users", lambda o: o is not None, timeout=30)
        assert users["metadata"]["ownerReferences"][0]["kind"] == "TinyStreamCluster"
        assert (await api.get("v1", "secrets", "bob"))["metadata"]["ownerReferences"][0]["name"] == "bob"


async def test_a_cluster_whose_secret_name_is_taken_says_so(control_plane, namespace, api) -> None:
    await api.create("v1", "secrets", secret("other-broker-users", namespace, {"users.json": "{}"}))
    async with running_operator(control_plane.url, controller=FakeController(), connection=connection(control_plane)):
        await api.create(TS, "tinystreamclusters", {
            "apiVersion": TS, "kind": "TinyStreamCluster", "metadata": {"name": "other"},
            "spec": {"brokers": 1, "storage": {"size": "1Gi"}}})
        found = await api.wait_for(TS, "tinystreamclusters", "other",
                                   lambda o: (ready_condition(o) or {}).get("reason") == "SecretNotOwned",
                                   timeout=30)
        assert "other-broker-users" in ready_condition(found)["message"]
        assert await api.get("apps/v1", "statefulsets", "other-broker") is None  # nothing mounts it
        assert decoded(await api.get("v1", "secrets", "other-broker-users")) == {"users.json": "{}"}
