"""Bad requests get a 4xx with a clear JSON error, never a 500; storage failures a 503."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_helpers import Controller

from tinystream.controller_client import ControllerUnavailable
from tinystream.operator.controller import ControllerError, ControllerState
from tinystream.operator.service import HTTP_STATUS, MemoryStateStore


def test_every_core_error_has_an_http_status() -> None:
    assert set(HTTP_STATUS) == set(ControllerError)
    assert all(400 <= status < 600 for status in HTTP_STATUS.values())


async def test_invalid_json_is_400(controller: Controller) -> None:
    status, body = await controller.request("POST", "/v1/brokers/register", raw=b'{"broker_id": 1,')
    assert status == 400
    assert body["error"] == "INVALID_REQUEST" and body["code"] == 42
    assert "not valid JSON" in body["message"] and "/v1/brokers/register" in body["message"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ([1, 2], "must be a JSON object, got an array"),
        ({"broker_id": 1, "incarnation_id": "i", "host": "h", "port": 1, "colour": "red"}, "unknown field(s) ['colour']"),
        ({"broker_id": 1, "host": "h", "port": 1}, "missing required field(s) ['incarnation_id']"),
        ({"broker_id": 1, "incarnation_id": "i", "host": "h", "port": "9092"}, "body.port: expected int"),
        ({"broker_id": True, "incarnation_id": "i", "host": "h", "port": 1}, "body.broker_id"),
        ({"broker_id": 10**30, "incarnation_id": "i", "host": "h", "port": 1}, "body.broker_id"),
        ({"broker_id": 1, "incarnation_id": "i", "host": "h", "port": 70000}, "out of range"),
        ({"broker_id": 1, "incarnation_id": "", "host": "h", "port": 1}, "incarnation id is empty"),
    ],
)
async def test_bad_register_bodies_are_400_with_a_clear_message(controller: Controller, body, fragment) -> None:
    status, reply = await controller.request("POST", "/v1/brokers/register", body)
    assert status == 400, reply
    assert reply["error"] == "INVALID_REQUEST"
    assert fragment in reply["message"], reply["message"]


async def test_unknown_paths_and_methods_answer_json(controller: Controller) -> None:
    status, body = await controller.request("GET", "/v1/nope")
    assert status == 404 and "no endpoint GET /v1/nope" in body["message"]
    status, body = await controller.request("PUT", "/v1/topics")
    assert status == 405 and "POST" in body["message"]
    status, body = await controller.request("POST", "/v1/brokers/abc/heartbeat", {})
    assert status == 400 and "'abc' is not an integer" in body["message"]


async def test_oversized_body_is_413_json(controller: Controller) -> None:
    status, body = await controller.request("POST", "/v1/topics", raw=b" " * (5 * 1024 * 1024))
    assert status == 413 and body["error"] == "INVALID_REQUEST"


_ODD_BODIES = [b"", b"null", b"[]", b'"x"', b"42", b"{}", b'{"x": 1}', b"\xff\xfe", b'{"name": {"a": []}}',
               b'{"count": -3}', b'{"config": 5}', b'{"isr": "1,2"}', b'{"partitions": [{"topic": 1}]}',
               b'{"assignments": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}',
               b'{"name": "t", "partitions": 1000000000}', b'{"name": "t", "replica_assignment": [[]]}']
_ENDPOINTS = [("POST", "/v1/brokers/register"), ("POST", "/v1/brokers/1/heartbeat"), ("POST", "/v1/brokers/1/drain"),
              ("POST", "/v1/partitions/alter"), ("POST", "/v1/topics"), ("POST", "/v1/topics/t/partitions"),
              ("PATCH", "/v1/topics/t/config"), ("POST", "/v1/elections/preferred"), ("POST", "/v1/reassignments"),
              ("DELETE", "/v1/topics/t"), ("DELETE", "/v1/brokers/1")]


async def test_odd_bodies_never_crash_the_service(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.client.create_topic("t", partitions=1)
    for method, path in _ENDPOINTS:
        for raw in _ODD_BODIES:
            status, body = await ctl.request(method, path, raw=raw)
            assert status < 500, (method, path, raw, body)
            if status >= 400:
                assert set(body) == {"error", "code", "message"} and body["message"], (method, path, raw)
    assert (await ctl.client.health())["status"] == "ok"


class FlakyStore(MemoryStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    async def save(self, state: ControllerState) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")
        await super().save(state)


async def test_a_failed_save_is_503_and_changes_nothing(tmp_path: Path) -> None:
    store = FlakyStore()
    ctl = Controller(tmp_path / "unused.json", store=store)
    await ctl.start()
    try:
        await ctl.start_broker(1)
        before = await ctl.image()
        store.fail = True
        status, body = await ctl.request("POST", "/v1/topics", {"name": "t"})
        assert status == 503 and body["error"] == "KAFKA_STORAGE_ERROR" and body["code"] == 56
        assert "No space left" in body["message"]
        with pytest.raises(ControllerUnavailable) as info:
            await ctl.client.create_topic("t")
        assert info.value.error == "KAFKA_STORAGE_ERROR" and info.value.status == 503
        assert await ctl.image() == before  # neither in memory...
        assert ControllerState.from_dict(store.data).image.to_dict() == before  # ...nor in the store
        store.fail = False
        assert (await ctl.client.create_topic("t")).topic is not None
    finally:
        await ctl.stop()
