"""Who may call the controller API (issue 12, attack 1: anonymous takeover).

Before tokens, anyone who reached the port could register a broker, heartbeat
it unfenced, read the epochs from /v1/metadata, forge an AlterPartition and
reassign partitions onto it, fence a real broker or delete topics.
"""

from __future__ import annotations

import pytest
from service_helpers import Controller

from tinystream.controller_auth import ADMIN, broker_principal, new_secret, principal_of, read_secret, token_for

REGISTER = {"broker_id": 1, "incarnation_id": "evil", "host": "attacker.example", "port": 9092}


def broker_token(controller: Controller, broker_id: int) -> str:
    return token_for(read_secret(controller.info.secret_file), broker_principal(broker_id))


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/v1/brokers/register", REGISTER),
    ("POST", "/v1/brokers/1/heartbeat", {"broker_epoch": 1, "metadata_version": 1, "want_fence": True}),
    ("GET", "/v1/metadata", None),
    ("GET", "/v1/state", None),
    ("POST", "/v1/partitions/alter", {"broker_id": 1, "broker_epoch": 1, "topic": "t", "partition": 0,
                                      "leader_epoch": 0, "partition_epoch": 0, "isr": [1]}),
    ("POST", "/v1/reassignments", {"assignments": [{"topic": "t", "partition": 0, "replicas": [1]}]}),
    ("DELETE", "/v1/topics/t", None),
    ("DELETE", "/v1/brokers/1", None),
])
async def test_an_anonymous_caller_is_refused_everything_but_health(controller: Controller, method, path, body):
    status, reply = await controller.request(method, path, body, token=None)
    assert status == 401 and reply["error"] == "SASL_AUTHENTICATION_FAILED", reply
    assert "bearer token" in reply["message"]
    status, _ = await controller.request("GET", "/healthz", token=None)
    assert status == 200


async def test_a_token_from_another_secret_or_a_forged_principal_is_refused(controller: Controller):
    foreign = token_for(new_secret(), ADMIN)
    status, reply = await controller.request("GET", "/v1/metadata", token=foreign)
    assert status == 401 and "not made for this cluster" in reply["message"]
    mine = broker_token(controller, 2)
    forged = "admin." + mine.split(".", 1)[1]  # broker-2's MAC under the admin's name
    status, _ = await controller.request("GET", "/v1/metadata", token=forged)
    assert status == 401


async def test_a_broker_acts_only_as_itself(controller: Controller):
    token = broker_token(controller, 2)
    status, reply = await controller.request("POST", "/v1/brokers/register", REGISTER, token=token)  # as broker 1
    assert status == 403 and reply["error"] == "CLUSTER_AUTHORIZATION_FAILED", reply
    status, _ = await controller.request("POST", "/v1/brokers/register", {**REGISTER, "broker_id": 2}, token=token)
    assert status == 200
    status, _ = await controller.request("POST", "/v1/brokers/1/heartbeat",
                                         {"broker_epoch": 1, "metadata_version": 1, "want_fence": True}, token=token)
    assert status == 403
    status, _ = await controller.request("POST", "/v1/producer-ids", {"broker_id": 1, "broker_epoch": 1}, token=token)
    assert status == 403


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/v1/brokers/1/drain", None),
    ("DELETE", "/v1/brokers/1", None),
])
async def test_a_broker_may_not_drain_or_unregister_others(controller: Controller, method, path, body):
    status, reply = await controller.request(method, path, body, token=broker_token(controller, 2))
    assert status == 403 and "admin only" in reply["message"], reply


async def test_brokers_may_forward_topic_admin_and_the_admin_may_do_all(controller: Controller):
    await controller.start_broker(1)
    status, reply = await controller.request("POST", "/v1/topics", {"name": "t", "partitions": 1,
                                                                   "replication_factor": 1},
                                             token=broker_token(controller, 1))
    assert status == 201, reply
    status, reply = await controller.request("POST", "/v1/elections/preferred", {}, token=broker_token(controller, 1))
    assert status == 200, reply  # a forwarded ElectLeaders (preferred: only ever back to an in-sync replica)
    status, reply = await controller.request("POST", "/v1/elections/preferred", {})  # the admin's token
    assert status == 200, reply
    move = {"assignments": [{"topic": "t", "partition": 0, "replicas": [1]}]}  # a forwarded reassignment
    status, reply = await controller.request("POST", "/v1/reassignments", move, token=broker_token(controller, 1))
    assert status == 200, reply
    status, reply = await controller.request("POST", "/v1/reassignments", move, token=None)
    assert status == 401, reply


def test_tokens_name_their_principal_and_only_their_secret_verifies_them():
    secret = new_secret()
    assert principal_of(secret, token_for(secret, broker_principal(7))) == "broker-7"
    assert principal_of(new_secret(), token_for(secret, ADMIN)) is None
    assert principal_of(secret, "admin") is None and principal_of(secret, ".x") is None
    with pytest.raises(ValueError):
        token_for(secret, "a.b")


def test_a_token_file_is_read_again_when_its_issuer_replaces_it(tmp_path):
    from tinystream.controller_auth import TokenFile, write_token_file

    path = tmp_path / "token"
    write_token_file(path, "first")
    token = TokenFile(path)
    assert token() == "first" == token()
    replacement = tmp_path / "token.new"  # the kubelet swaps a projected token in by a rename
    write_token_file(replacement, "second")
    replacement.replace(path)
    assert token() == "second"


def test_a_token_file_missing_for_a_moment_keeps_the_last_token(tmp_path):
    from tinystream.controller_auth import TokenFile, write_token_file

    path = tmp_path / "token"
    with pytest.raises(FileNotFoundError):
        TokenFile(path)()  # never read: the broker's start stops with the file's name
    write_token_file(path, "first")
    token = TokenFile(path)
    assert token() == "first"
    path.unlink()  # the kubelet between two steps of its swap
    assert token() == "first"
