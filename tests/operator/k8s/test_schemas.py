"""TinyStreamSchema's pure part (schemas.py): desired state -> registry calls, answers -> status."""

from __future__ import annotations

from tinystream.operator.k8s.model import SchemaSpec
from tinystream.operator.k8s.schemas import Step, deletion_calls, refusal, register_calls, registered_status


def schema(**spec) -> SchemaSpec:
    return SchemaSpec.from_resource({"metadata": {"name": "orders", "namespace": "ns", "generation": 2},
                                     "spec": {"cluster": "demo", "subject": "orders-value", "schema": '"string"',
                                              **spec}})


def test_register_then_look_up_and_the_level_first_when_asked():
    assert [c.step for c in register_calls(schema())] == [Step.REGISTER, Step.LOOKUP]
    calls = register_calls(schema(compatibility="FULL", schemaType="JSON",
                                  references=[{"name": "a", "subject": "a-value", "version": 1}]))
    assert [(c.method, c.path) for c in calls] == [("PUT", "/config/orders-value"),
                                                   ("POST", "/subjects/orders-value/versions"),
                                                   ("POST", "/subjects/orders-value")]
    assert calls[0].body == {"compatibility": "FULL"}
    assert calls[1].body == {"schema": '"string"', "schemaType": "JSON",
                             "references": [{"name": "a", "subject": "a-value", "version": 1}]}


def test_a_subject_is_quoted_in_the_path():
    (call, _) = register_calls(schema(subject="a/b c"))
    assert call.path == "/subjects/a%2Fb%20c/versions"


def test_deletion_keeps_by_default_and_soft_deletes_on_request():
    assert deletion_calls(schema()) == []
    (call,) = deletion_calls(schema(deletionPolicy="Delete"))
    assert (call.method, call.path) == ("DELETE", "/subjects/orders-value")


def test_answers_become_conditions():
    spec = schema()
    assert refusal(spec, Step.REGISTER, 200, {"id": 1}) is None
    incompatible = refusal(spec, Step.REGISTER, 409, {"error_code": 409, "message": "Schema being registered is "
                                                                                    "incompatible"})
    assert incompatible is not None and not incompatible.retry
    assert incompatible.condition.reason == "IncompatibleSchema" and "incompatible" in incompatible.condition.message
    assert incompatible.condition.observed_generation == 2
    invalid = refusal(spec, Step.REGISTER, 422, {"error_code": 42201, "message": "Invalid schema"})
    assert invalid is not None and (invalid.condition.reason, invalid.retry) == ("InvalidSchema", False)
    assert "42201" in invalid.condition.message
    down = refusal(spec, Step.CONFIG, None, "connection refused")
    assert down is not None and (down.condition.reason, down.retry) == ("RegistryUnavailable", True)
    server = refusal(spec, Step.LOOKUP, 500, {"error_code": 50001, "message": "x"})
    assert server is not None and server.retry
    denied = refusal(spec, Step.REGISTER, 401, {"error_code": 401, "message": "Unauthorized"})
    assert denied is not None and (denied.condition.reason, denied.retry) == ("RegistryRefused", True)


def test_the_lookup_gives_id_and_version():
    fields, condition = registered_status(schema(), {"subject": "orders-value", "id": 7, "version": 3})
    assert fields == {"subject": "orders-value", "id": 7, "version": 3, "observedGeneration": 2}
    assert condition.status is True and condition.reason == "SchemaReady"
