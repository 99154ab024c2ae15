"""The controller API's client quota endpoint: who may call it, what it stores, what it refuses."""

from __future__ import annotations

from service_helpers import Controller

from tinystream.controller_auth import broker_principal

ALICE = {"entity": {"user": "alice"}, "ops": [{"key": "producer_byte_rate", "value": 1024}]}


async def test_only_brokers_and_the_admin_may_change_client_quotas(controller: Controller):
    body = {"alterations": [ALICE]}
    status, reply = await controller.request("POST", "/v1/client-quotas", body, token=None)
    assert status == 401, reply
    status, reply = await controller.request("POST", "/v1/client-quotas", body, token=controller.token("dashboard"))
    assert status == 403 and reply["error"] == "CLUSTER_AUTHORIZATION_FAILED", reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert "client_quotas" not in metadata


async def test_a_broker_forwards_a_quota_change_into_the_image(controller: Controller):
    broker = controller.token(broker_principal(2))
    status, reply = await controller.request("POST", "/v1/client-quotas", {"alterations": [
        ALICE, {"entity": {"user": None, "client-id": "app"}, "ops": [{"key": "request_percentage", "value": 12.5}]},
    ]}, token=broker)
    assert status == 200 and reply["actions"][0]["type"] == "ClientQuotasChanged", reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert metadata["client_quotas"] == [
        {"entity": {"user": None, "client-id": "app"}, "values": {"request_percentage": 12.5}},
        {"entity": {"user": "alice"}, "values": {"producer_byte_rate": 1024.0}},
    ]
    status, reply = await controller.request("POST", "/v1/client-quotas", {"alterations": [
        {"entity": {"user": "alice"}, "ops": [{"key": "producer_byte_rate", "remove": True}]}]}, token=broker)
    assert status == 200, reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert [q["entity"] for q in metadata["client_quotas"]] == [{"user": None, "client-id": "app"}]


async def test_validate_only_stores_nothing(controller: Controller):
    status, reply = await controller.request("POST", "/v1/client-quotas",
                                             {"alterations": [ALICE], "validate_only": True})
    assert status == 200 and reply["validate_only"] is True, reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert "client_quotas" not in metadata


async def test_a_bad_quota_gets_400_naming_the_problem(controller: Controller):
    for alteration, fragment in [
        ({"entity": {"user": "a"}, "ops": [{"key": "producer_byte_rate", "value": -5}]}, "greater than 0"),
        ({"entity": {"ip": "10.0.0.1"}, "ops": [{"key": "producer_byte_rate", "value": 5}]}, "ip quotas"),
        ({"entity": {"user": "a"}, "ops": [{"key": "producer_byte_rate", "value": "fast"}]}, "value"),
    ]:
        status, reply = await controller.request("POST", "/v1/client-quotas", {"alterations": [alteration]})
        assert status == 400 and reply["error"] == "INVALID_REQUEST" and fragment in reply["message"], reply
