"""The controller API's ACL and SCRAM credential endpoints: who may call them, what they store."""

from __future__ import annotations

import pytest
from service_helpers import Controller

from tinystream.controller_auth import broker_principal

ACL = {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL", "principal": "User:alice",
       "host": "*", "operation": "READ", "permission": "ALLOW"}
CRED = {"user": "alice", "mechanism": "SCRAM-SHA-512", "salt": "c2FsdA==", "stored_key": "a2V5",
        "server_key": "a2V5", "iterations": 4096}


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/acls", {"acls": [ACL]}),
    ("/v1/acls/delete", {"filters": [{}]}),
    ("/v1/scram-credentials", {"upsertions": [CRED]}),
])
async def test_only_brokers_and_the_admin_may_change_acls_or_credentials(controller: Controller, path, body):
    status, reply = await controller.request("POST", path, body, token=None)
    assert status == 401, reply
    status, reply = await controller.request("POST", path, body, token=controller.token("dashboard"))
    assert status == 403 and reply["error"] == "CLUSTER_AUTHORIZATION_FAILED", reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert "acls" not in metadata and "scram_credentials" not in metadata


async def test_a_broker_forwards_acl_and_credential_changes(controller: Controller):
    broker = controller.token(broker_principal(1))
    status, reply = await controller.request("POST", "/v1/acls", {"acls": [ACL]}, token=broker)
    assert status == 200 and reply["actions"][0]["type"] == "AclsCreated", reply
    status, reply = await controller.request("POST", "/v1/scram-credentials", {"upsertions": [CRED]}, token=broker)
    assert status == 200, reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert metadata["acls"] == [ACL] and metadata["scram_credentials"] == [CRED]
    status, reply = await controller.request("POST", "/v1/acls/delete",
                                             {"filters": [{"resource_type": "TOPIC", "principal": "User:alice"},
                                                          {"resource_type": "GROUP"}]}, token=broker)
    assert status == 200 and reply["matched"] == [[ACL], []], reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert "acls" not in metadata


@pytest.mark.parametrize(("path", "body", "fragment"), [
    ("/v1/acls", {"acls": [{**ACL, "operation": "CLUSTER_ACTION"}]}, "does not apply"),
    ("/v1/acls", {"acls": [{**ACL, "extra": 1}]}, "extra"),
    ("/v1/acls/delete", {"filters": [{"pattern_type": "SOMETIMES"}]}, "unknown"),
    ("/v1/scram-credentials", {"upsertions": [{**CRED, "iterations": 10}]}, "iterations"),
])
async def test_bad_acls_and_credentials_get_400_naming_the_problem(controller: Controller, path, body, fragment):
    status, reply = await controller.request("POST", path, body)
    assert status == 400 and fragment in reply["message"], reply
