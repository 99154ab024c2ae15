"""The OpenAPI description covers every route and matches the request decoders."""

from __future__ import annotations

from service_helpers import Controller

from tinystream.operator.service import make_app, openapi_document


async def test_every_route_is_described(controller: Controller) -> None:
    app = make_app(controller.server.service, secret=None)  # the same routes as the running one
    routes = {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD"
    }
    document = openapi_document()
    described = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert routes == described


async def test_served_document(controller: Controller) -> None:
    status, served = await controller.request("GET", "/v1/openapi.json")
    assert status == 200 and served == openapi_document()
    assert served["openapi"] == "3.1.0"
    register = served["components"]["schemas"]["RegisterRequest"]
    assert register["additionalProperties"] is False
    assert register["required"] == ["broker_id", "incarnation_id", "host", "port"]
    op = served["paths"]["/v1/partitions/alter"]["post"]
    assert {"200", "400", "404", "409", "503"} <= set(op["responses"])
    for path, ops in served["paths"].items():
        for method, op in ops.items():
            for ref in _refs(op):
                assert ref.split("/")[-1] in served["components"]["schemas"], (method, path, ref)


def _refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)
