"""The controller API's dynamic broker config endpoint: who may call it, what it stores, what it refuses."""

from __future__ import annotations

from service_helpers import Controller

from tinystream.controller_auth import broker_principal

RETENTION = {"resource": "", "ops": [{"key": "log.retention.ms", "value": "60000"}]}


async def test_only_brokers_and_the_admin_may_change_broker_configs(controller: Controller):
    body = {"alterations": [RETENTION]}
    status, reply = await controller.request("POST", "/v1/broker-configs", body, token=None)
    assert status == 401, reply
    status, reply = await controller.request("POST", "/v1/broker-configs", body, token=controller.token("dashboard"))
    assert status == 403 and reply["error"] == "CLUSTER_AUTHORIZATION_FAILED", reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert "broker_configs" not in metadata


async def test_the_admin_and_a_broker_put_configs_into_the_image(controller: Controller):
    status, reply = await controller.request("POST", "/v1/broker-configs", {"alterations": [RETENTION]})  # admin
    assert status == 200 and reply["actions"] == [{"type": "BrokerConfigsChanged", "resources": [""]}], reply
    broker = controller.token(broker_principal(1))
    status, reply = await controller.request("POST", "/v1/broker-configs", {"alterations": [
        {"resource": "2", "ops": [{"key": "follower.replication.throttled.rate", "value": "1024"}]}]}, token=broker)
    assert status == 200, reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert metadata["broker_configs"] == {"default": {"log.retention.ms": "60000"},
                                          "brokers": {"2": {"follower.replication.throttled.rate": "1024"}}}
    status, reply = await controller.request("POST", "/v1/broker-configs", {"alterations": [
        {"resource": "", "ops": [{"key": "log.retention.ms", "op": "DELETE"}]}]}, token=broker)
    assert status == 200, reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert metadata["broker_configs"]["default"] == {}


async def test_validate_only_stores_nothing(controller: Controller):
    status, reply = await controller.request("POST", "/v1/broker-configs",
                                             {"alterations": [RETENTION], "validate_only": True})
    assert status == 200 and reply["validate_only"] is True, reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert "broker_configs" not in metadata


async def test_a_bad_change_gets_400_naming_the_problem_and_nothing_is_stored(controller: Controller):
    for ops, error, fragment in [
        ([{"key": "num.partitions", "value": "3"}], "INVALID_REQUEST", "num.partitions cannot change"),
        ([{"key": "log.retention.msec", "value": "3"}], "INVALID_CONFIG", "unknown broker config"),
        ([{"key": "log.retention.ms", "value": "soon"}], "INVALID_CONFIG", "invalid broker config value"),
    ]:
        status, reply = await controller.request("POST", "/v1/broker-configs", {"alterations": [
            RETENTION, {"resource": "1", "ops": ops}]})
        assert status == 400 and reply["error"] == error and fragment in reply["message"], reply
        assert reply["message"].startswith("broker 1: "), reply
    _, metadata = await controller.request("GET", "/v1/metadata")
    assert "broker_configs" not in metadata
