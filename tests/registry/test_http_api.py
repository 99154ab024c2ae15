"""The REST API at the HTTP level: Confluent's status codes, error bodies and content type, 413, 401."""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastavro")

from tinystream.scram_users import UserStore

CT = "application/vnd.schemaregistry.v1+json"
AVRO_V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
AVRO_BAD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]})


def call(url: str, method: str = "GET", body=None, headers=None, raw: bytes | None = None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": CT, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Content-Type"), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type"), json.loads(error.read())


@pytest.fixture
def url(start_registry):
    return start_registry().url


def test_register_read_and_the_confluent_error_codes(url):
    status, content_type, body = call(f"{url}/subjects/s/versions", "POST", {"schema": AVRO_V1})
    assert (status, body) == (200, {"id": 1}) and content_type.startswith(CT)
    assert call(f"{url}/subjects/s/versions/latest")[2] == {"subject": "s", "version": 1, "id": 1, "schema": AVRO_V1.replace(" ", "")}
    assert call(f"{url}/subjects/s/versions/1/schema")[2] == json.loads(AVRO_V1)
    assert call(f"{url}/schemas/ids/1/versions")[2] == [{"subject": "s", "version": 1}]
    assert call(f"{url}/schemas/types")[2] == ["AVRO", "JSON", "PROTOBUF"]
    assert call(f"{url}/contexts")[2] == ["."]

    def error(*args, **kwargs):
        status, _, body = call(*args, **kwargs)
        assert set(body) == {"error_code", "message"}, body
        return status, body["error_code"]

    assert error(f"{url}/subjects/nope/versions") == (404, 40401)
    assert error(f"{url}/subjects/s/versions/9") == (404, 40402)
    assert error(f"{url}/subjects/s/versions/zero") == (422, 42202)
    assert error(f"{url}/schemas/ids/77") == (404, 40403)
    assert error(f"{url}/subjects/s", "POST", {"schema": json.dumps({"type": "long"})}) == (404, 40403)
    assert error(f"{url}/subjects/s/versions", "POST", {"schema": "{not json"}) == (422, 42201)
    assert error(f"{url}/subjects/s/versions", "POST", {"schema": json.dumps({"type": "wat"})}) == (422, 42201)
    assert error(f"{url}/subjects/s/versions", "POST", {"schema": AVRO_BAD}) == (409, 409)
    assert error(f"{url}/config", "PUT", {"compatibility": "SOMETIMES"}) == (422, 42203)
    assert error(f"{url}/mode", "PUT", {"mode": "SIDEWAYS"}) == (422, 42204)
    assert error(f"{url}/config/s") == (404, 40408)
    assert error(f"{url}/nowhere") == (404, 404)
    assert error(f"{url}/subjects/t/versions", "POST", {"schema": AVRO_V1, "id": "7"}) == (422, 42201)
    reference = {"name": "R", "subject": "s", "version": "latest"}
    assert error(f"{url}/subjects/t/versions", "POST", {"schema": AVRO_V1, "references": [reference]}) == (422, 42201)
    assert error(f"{url}/subjects/s/versions", "POST", raw=b"[1, 2]") == (422, 422)


def test_compatibility_config_mode_and_deletes(url):
    call(f"{url}/subjects/s/versions", "POST", {"schema": AVRO_V1})
    assert call(f"{url}/compatibility/subjects/s/versions/latest?verbose=true", "POST", {"schema": AVRO_BAD})[2]["is_compatible"] is False
    status, _, body = call(f"{url}/compatibility/subjects/s/versions/latest?verbose=true", "POST", {"schema": AVRO_BAD})
    assert body["messages"] and "TYPE_MISMATCH" in body["messages"][0]
    assert call(f"{url}/config/s", "PUT", {"compatibility": "NONE"})[2] == {"compatibility": "NONE"}
    assert call(f"{url}/config/s")[2] == {"compatibilityLevel": "NONE"}
    assert call(f"{url}/config")[2] == {"compatibilityLevel": "BACKWARD"}
    assert call(f"{url}/subjects/s/versions", "POST", {"schema": AVRO_BAD})[2] == {"id": 2}
    assert call(f"{url}/mode/s", "PUT", {"mode": "READONLY"})[2] == {"mode": "READONLY"}
    assert call(f"{url}/subjects/s/versions", "POST", {"schema": json.dumps({"type": "long"})})[2]["error_code"] == 42205
    assert call(f"{url}/mode/s", "DELETE")[2] == {"mode": "READONLY"}
    assert call(f"{url}/mode/s?defaultToGlobal=true")[2] == {"mode": "READWRITE"}
    assert call(f"{url}/subjects/s/versions/1?permanent=true", "DELETE")[2]["error_code"] == 40407
    assert call(f"{url}/subjects/s/versions/1", "DELETE")[2] == 1
    assert call(f"{url}/subjects/s/versions")[2] == [2]
    assert call(f"{url}/subjects/s/versions?deleted=true")[2] == [1, 2]
    assert call(f"{url}/subjects/s?permanent=true", "DELETE")[2]["error_code"] == 40405
    assert call(f"{url}/subjects/s", "DELETE")[2] == [2]
    assert call(f"{url}/subjects")[2] == []
    assert call(f"{url}/subjects/s?permanent=true", "DELETE")[2] == [1, 2]
    assert call(f"{url}/subjects?deleted=true")[2] == []
    assert call(f"{url}/schemas/ids/1")[2]["error_code"] == 40403


def test_references_block_deleting_what_they_name(url):
    address = json.dumps({"type": "record", "name": "Address", "namespace": "t", "fields": [{"name": "c", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "t", "fields": [{"name": "home", "type": "t.Address"}]})
    call(f"{url}/subjects/address/versions", "POST", {"schema": address})
    body = {"schema": person, "references": [{"name": "t.Address", "subject": "address", "version": 1}]}
    person_id = call(f"{url}/subjects/person/versions", "POST", body)[2]["id"]
    assert call(f"{url}/subjects/address/versions/1/referencedby")[2] == [person_id]
    status, _, refusal = call(f"{url}/subjects/address/versions/1", "DELETE")
    assert (status, refusal["error_code"]) == (409, 40901)
    assert call(f"{url}/subjects/address/versions")[2] == [1]  # still there


def test_a_body_over_the_limit_is_refused_with_413(start_registry):
    url = start_registry(max_body_bytes=4096).url
    status, _, body = call(f"{url}/subjects/s/versions", "POST", raw=b'{"schema": "' + b" " * 8192 + b'"}')
    assert status == 413 and body["error_code"] == 413
    assert call(f"{url}/subjects")[2] == []


def test_with_a_users_file_every_call_needs_basic_credentials(start_registry, tmp_path):
    store = UserStore()
    store.set_password("registry-user", "s3cret")
    users = tmp_path / "users.json"
    store.save(users)
    url = start_registry(users_file=users).url

    def basic(user, password):
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    for path, method, body in [("/subjects", "GET", None), ("/subjects/s/versions", "POST", {"schema": AVRO_V1}),
                               ("/config", "PUT", {"compatibility": "NONE"}), ("/mode", "GET", None),
                               ("/schemas/ids/1?format=serialized", "GET", None),
                               ("/subjects/p/versions", "POST", {"schema": PROTO_V1, "schemaType": "PROTOBUF"})]:
        status, _, answer = call(f"{url}{path}", method, body)
        assert (status, answer["error_code"]) == (401, 40101), path
        assert call(f"{url}{path}", method, body, headers=basic("registry-user", "wrong"))[0] == 401
        assert call(f"{url}{path}", method, body, headers=basic("nobody", "s3cret"))[0] == 401
    assert call(f"{url}/subjects", headers=basic("registry-user", "s3cret"))[:3:2] == (200, [])
    assert call(f"{url}/subjects/s/versions", "POST", {"schema": AVRO_V1}, headers=basic("registry-user", "s3cret"))[2] == {"id": 1}
    from confluent_kafka.schema_registry import SchemaRegistryClient
    client = SchemaRegistryClient({"url": url, "basic.auth.user.info": "registry-user:s3cret"})
    assert client.get_subjects() == ["s"]


def test_a_changed_users_file_takes_effect_without_a_restart(start_registry, tmp_path):
    users = tmp_path / "users.json"
    store = UserStore()
    store.set_password("alice", "one")
    store.save(users)
    url = start_registry(users_file=users).url
    alice = {"Authorization": "Basic " + base64.b64encode(b"alice:one").decode()}
    assert call(f"{url}/subjects", headers=alice)[0] == 200
    assert call(f"{url}/subjects", headers=alice)[0] == 200  # remembered
    store.set_password("alice", "two")
    store.save(users)
    stat = users.stat()
    os.utime(users, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a new mtime even on a coarse clock
    assert call(f"{url}/subjects", headers=alice)[0] == 401


PROTO_V1 = 'syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\n\nmessage Order {\n  int64 id = 1;\n  google.protobuf.Timestamp at = 2;\n}\n'
MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'


def test_protobuf_register_read_serialized_references_and_409(url):
    def register(subject, text, **extra):
        return call(f"{url}/subjects/{subject}/versions", "POST", {"schema": text, "schemaType": "PROTOBUF", **extra})

    status, _, body = register("orders-value", PROTO_V1)
    assert (status, body) == (200, {"id": 1})
    reformatted = PROTO_V1.replace("\n", "  \r\n")  # trailing spaces and CRLF: the same schema
    assert register("orders-value", reformatted)[2] == {"id": 1}
    assert register("other-value", PROTO_V1)[2] == {"id": 1}  # one id for one schema, whatever the subject
    stored = call(f"{url}/schemas/ids/1")[2]
    assert stored == {"schema": PROTO_V1, "schemaType": "PROTOBUF"}
    from google.protobuf import descriptor_pb2
    encoded = call(f"{url}/schemas/ids/1?format=serialized")[2]["schema"]
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(encoded))
    assert descriptor.package == "shop" and [f.name for f in descriptor.message_type[0].field] == ["id", "at"]
    assert list(descriptor.dependency) == ["google/protobuf/timestamp.proto"]
    assert call(f"{url}/subjects/orders-value/versions/1?format=serialized")[2]["schema"] == encoded
    with urllib.request.urlopen(f"{url}/schemas/ids/1/schema", timeout=30) as response:
        assert response.read().decode() == PROTO_V1
    # the same file as a descriptor (what confluent-kafka sends) is the same schema in a subject that holds it...
    assert register("orders-value", encoded)[2] == {"id": 1}
    found = call(f"{url}/subjects/orders-value", "POST", {"schema": encoded, "schemaType": "PROTOBUF"})[2]
    assert (found["id"], found["version"]) == (1, 1)
    assert call(f"{url}/subjects/orders-value/versions")[2] == [1]
    # ...and a new id elsewhere (ids follow the text)
    assert register("by-descriptor", encoded)[2] == {"id": 2}
    assert call(f"{url}/schemas/ids/2?format=serialized")[2]["schema"] == encoded
    other_file = PROTO_V1.replace("int64 id = 1;", "int64 id = 1;\n  string note = 9;")
    status, _, missing = call(f"{url}/subjects/orders-value", "POST", {"schema": other_file, "schemaType": "PROTOBUF"})
    assert (status, missing["error_code"]) == (404, 40403)

    # a reference: the import path is the reference's name
    assert register("money", MONEY)[2] == {"id": 3}
    order_v2 = PROTO_V1.replace('import "google', 'import "common/money.proto";\nimport "google').replace(
        "  google.protobuf.Timestamp at = 2;", "  google.protobuf.Timestamp at = 2;\n  common.Money total = 3;")
    reference = {"name": "common/money.proto", "subject": "money", "version": 1}
    assert register("orders-value", order_v2, references=[reference])[2] == {"id": 4}
    assert call(f"{url}/subjects/money/versions/1/referencedby")[2] == [4]
    status, _, refusal = register("orders-value", order_v2)  # the import without its reference
    assert (status, refusal["error_code"]) == (422, 42201) and "common/money.proto" in refusal["message"]

    # incompatible under BACKWARD: a field's wire type changed
    retyped = order_v2.replace("int64 id = 1;", "string id = 1;")
    check = call(f"{url}/compatibility/subjects/orders-value/versions/latest?verbose=true", "POST",
                 {"schema": retyped, "schemaType": "PROTOBUF", "references": [reference]})[2]
    assert check["is_compatible"] is False and "FIELD_KIND_CHANGED" in check["messages"][0]
    status, _, refusal = register("orders-value", retyped, references=[reference])
    assert (status, refusal["error_code"]) == (409, 409) and "FIELD_KIND_CHANGED" in refusal["message"]
    assert call(f"{url}/subjects/orders-value/versions")[2] == [1, 2]

    status, _, refusal = register("bad", "syntax = \"proto3\";\nmessage M { Nope a = 1; }\n")
    assert (status, refusal["error_code"]) == (422, 42201) and '"Nope" is not defined' in refusal["message"]
