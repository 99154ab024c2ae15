"""Compatibility rules, table-driven (Avro schema resolution, JSON Schema basics), plus properties."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.registry import compatibility
from tinystream.registry.compatibility import ParsedSchema
from tinystream.registry.errors import RegistryError
from tinystream.registry.model import Compatibility, Reference, SchemaDef, SchemaType


def _no_refs(reference):
    raise AssertionError(f"unexpected reference {reference}")


def avro(obj) -> ParsedSchema:
    return compatibility.parse(SchemaDef(SchemaType.AVRO, json.dumps(obj)), _no_refs)


def jsons(obj) -> ParsedSchema:
    return compatibility.parse(SchemaDef(SchemaType.JSON, json.dumps(obj)), _no_refs)


def record(*fields, name="User"):
    return {"type": "record", "name": name, "namespace": "t", "fields": list(fields)}


def field(name, kind, **extra):
    return {"name": name, "type": kind, **extra}


ENUM_AB = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
ENUM_ABC = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}

# (case, old, new, backward-compatible, forward-compatible). BACKWARD: new reads old; FORWARD: old reads new.
AVRO_CASES = [
    ("same", record(field("a", "int")), record(field("a", "int")), True, True),
    ("field added with default", record(field("a", "int")), record(field("a", "int"), field("b", "string", default="")),
     True, True),
    ("field added without default", record(field("a", "int")), record(field("a", "int"), field("b", "string")),
     False, True),
    ("field removed, it had a default", record(field("a", "int"), field("b", "int", default=0)), record(field("a", "int")),
     True, True),
    ("field removed, it had no default", record(field("a", "int"), field("b", "int")), record(field("a", "int")),
     True, False),
    ("int to long", record(field("a", "int")), record(field("a", "long")), True, False),
    ("long to float", record(field("a", "long")), record(field("a", "float")), True, False),
    ("float to double", record(field("a", "float")), record(field("a", "double")), True, False),
    ("int to double", record(field("a", "int")), record(field("a", "double")), True, False),
    ("double to int", record(field("a", "double")), record(field("a", "int")), False, True),
    ("string to bytes", record(field("a", "string")), record(field("a", "bytes")), True, True),
    ("int to string", record(field("a", "int")), record(field("a", "string")), False, False),
    ("enum symbol added", record(field("e", ENUM_AB)), record(field("e", ENUM_ABC)), True, False),
    ("enum symbol removed", record(field("e", ENUM_ABC)), record(field("e", ENUM_AB)), False, True),
    ("enum symbol removed, reader default", record(field("e", ENUM_ABC)), record(field("e", {**ENUM_AB, "default": "A"})),
     True, True),
    ("type to union with it", record(field("a", "int")), record(field("a", ["null", "int"], default=None)), True, False),
    ("union branch added", record(field("a", ["null", "int"])), record(field("a", ["null", "int", "string"])), True, False),
    ("union branch removed", record(field("a", ["null", "int", "string"])), record(field("a", ["null", "int"])), False, True),
    ("record renamed", record(field("a", "int")), record(field("a", "int"), name="Other"), False, False),
    ("record renamed with alias", record(field("a", "int")), {**record(field("a", "int"), name="Other"), "aliases": ["t.User"]},
     True, False),
    ("field renamed with alias", record(field("a", "int")), record(field("b", "int", aliases=["a"])), True, False),
    ("array items promoted", record(field("x", {"type": "array", "items": "int"})),
     record(field("x", {"type": "array", "items": "long"})), True, False),
    ("map values changed", record(field("x", {"type": "map", "values": "int"})),
     record(field("x", {"type": "map", "values": "boolean"})), False, False),
    ("fixed size changed", record(field("f", {"type": "fixed", "name": "F", "size": 4})),
     record(field("f", {"type": "fixed", "name": "F", "size": 8})), False, False),
    ("logical type on the same primitive", record(field("d", "int")), record(field("d", {"type": "int", "logicalType": "date"})),
     True, True),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"), [c[1:] for c in AVRO_CASES], ids=[c[0] for c in AVRO_CASES])
def test_avro_rules(old, new, backward, forward):
    old_p, new_p = avro(old), avro(new)
    assert (not compatibility.check(Compatibility.BACKWARD, new_p, [old_p])) is backward
    assert (not compatibility.check(Compatibility.FORWARD, new_p, [old_p])) is forward
    assert (not compatibility.check(Compatibility.FULL, new_p, [old_p])) is (backward and forward)
    assert compatibility.check(Compatibility.NONE, new_p, [old_p]) == []


def test_avro_recursive_type_terminates():
    linked = {"type": "record", "name": "Node", "fields": [
        {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
    widened = json.loads(json.dumps(linked).replace('"int"', '"long"'))
    assert compatibility.check(Compatibility.BACKWARD, avro(widened), [avro(linked)]) == []
    assert compatibility.check(Compatibility.FORWARD, avro(widened), [avro(linked)])


def test_transitive_checks_every_version_not_only_the_latest():
    v1 = avro(record(field("a", "int")))
    v2 = avro(record(field("a", "int"), field("b", "int", default=0)))
    v3_no_default = avro(record(field("a", "int"), field("b", "int")))
    assert compatibility.check(Compatibility.BACKWARD, v3_no_default, [v1, v2]) == []  # v2 has b
    assert compatibility.check(Compatibility.BACKWARD_TRANSITIVE, v3_no_default, [v1, v2])  # v1 has no b
    assert compatibility.check(Compatibility.FORWARD_TRANSITIVE, v1, [v1, v2]) == []


def test_invalid_avro_is_422_material():
    with pytest.raises(RegistryError) as caught:
        avro({"type": "record", "name": "X", "fields": [{"name": "a", "type": "nonsense"}]})
    assert caught.value.code == 42201


@pytest.mark.parametrize("schema", [
    {"type": "record", "name": "X"},
    {"type": "record", "name": "X", "fields": {"name": "a", "type": "int"}},
    {"type": "record", "name": "X", "fields": [{"name": "a", "type": {"type": "record", "name": "Y"}}]},
    ["null", {"type": "error", "name": "E"}],
])
def test_a_record_without_a_fields_list_is_invalid_as_avro_says(schema):
    with pytest.raises(RegistryError) as caught:
        avro(schema)
    assert caught.value.code == 42201 and "has no fields list" in caught.value.message


def test_a_default_that_looks_like_a_record_is_data():
    shape = {"type": "record", "name": "X", "fields": [
        {"name": "m", "type": {"type": "map", "values": "string"}, "default": {"type": "record"}}]}
    assert avro(shape) is not None


OBJ = "object"
JSON_CASES = [
    ("same", {"type": OBJ, "properties": {"a": {"type": "string"}}}, {"type": OBJ, "properties": {"a": {"type": "string"}}},
     True, True),
    ("property added to a closed model", {"type": OBJ, "properties": {"a": {"type": "string"}}, "additionalProperties": False},
     {"type": OBJ, "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "additionalProperties": False},
     True, False),
    ("property added to an open model", {"type": OBJ, "properties": {"a": {"type": "string"}}},
     {"type": OBJ, "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}, False, True),
    ("property removed from an open model", {"type": OBJ, "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
     {"type": OBJ, "properties": {"a": {"type": "string"}}}, True, False),
    ("type changed", {"type": OBJ, "properties": {"a": {"type": "string"}}}, {"type": OBJ, "properties": {"a": {"type": "integer"}}},
     False, False),
    ("integer widened to number", {"type": OBJ, "properties": {"a": {"type": "integer"}}},
     {"type": OBJ, "properties": {"a": {"type": "number"}}}, True, False),
    ("required added", {"type": OBJ, "properties": {"a": {"type": "string"}}},
     {"type": OBJ, "properties": {"a": {"type": "string"}}, "required": ["a"]}, False, True),
    ("enum extended", {"enum": ["x", "y"]}, {"enum": ["x", "y", "z"]}, True, False),
    ("additionalProperties closed", {"type": OBJ}, {"type": OBJ, "additionalProperties": False}, False, True),
    ("array items changed", {"type": "array", "items": {"type": "string"}}, {"type": "array", "items": {"type": "integer"}},
     False, False),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"), [c[1:] for c in JSON_CASES], ids=[c[0] for c in JSON_CASES])
def test_json_schema_rules(old, new, backward, forward):
    old_p, new_p = jsons(old), jsons(new)
    assert (not compatibility.check(Compatibility.BACKWARD, new_p, [old_p])) is backward
    assert (not compatibility.check(Compatibility.FORWARD, new_p, [old_p])) is forward


def test_invalid_json_schema_is_refused():
    with pytest.raises(RegistryError) as caught:
        jsons({"type": 12})
    assert caught.value.code == 42201


# -- properties ----------------------------------------------------------------------------
PRIMITIVES = ["int", "long", "float", "double", "string", "bytes", "boolean", "null"]
names = st.sampled_from(["a", "b", "c", "d", "e"])
avro_types = st.recursive(
    st.sampled_from(PRIMITIVES),
    lambda inner: st.one_of(
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda values: {"type": "map", "values": values}, inner),
    ),
    max_leaves=3,
)


@st.composite
def avro_records(draw):
    chosen = draw(st.lists(names, unique=True, max_size=4))
    fields = []
    for name in chosen:
        kind = draw(avro_types)
        entry = {"name": name, "type": kind}
        if kind == "int" and draw(st.booleans()):
            entry["default"] = 0
        fields.append(entry)
    return record(*fields)


@settings(max_examples=60, deadline=None)
@given(avro_records())
def test_a_schema_is_compatible_with_itself(schema):
    parsed = avro(schema)
    for level in Compatibility:
        assert compatibility.check(level, parsed, [parsed]) == []


@settings(max_examples=80, deadline=None)
@given(avro_records(), avro_records())
def test_backward_of_a_change_is_forward_of_its_inverse(old, new):
    old_p, new_p = avro(old), avro(new)
    backward = not compatibility.check(Compatibility.BACKWARD, new_p, [old_p])
    forward_of_inverse = not compatibility.check(Compatibility.FORWARD, old_p, [new_p])
    assert backward is forward_of_inverse
    full = not compatibility.check(Compatibility.FULL, new_p, [old_p])
    assert full is (backward and not compatibility.check(Compatibility.FORWARD, new_p, [old_p]))


json_leaf = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
                             {"enum": ["x", "y"]}, {"enum": ["x"]}, {}])


@st.composite
def json_objects(draw):
    properties = draw(st.dictionaries(names, json_leaf, max_size=4))
    schema = {"type": "object", "properties": properties}
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    required = draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
    if required:
        schema["required"] = required
    return schema


@settings(max_examples=80, deadline=None)
@given(json_objects(), json_objects())
def test_json_schema_properties(old, new):
    old_p, new_p = jsons(old), jsons(new)
    for level in Compatibility:
        assert compatibility.check(level, new_p, [new_p]) == []
    backward = not compatibility.check(Compatibility.BACKWARD, new_p, [old_p])
    assert backward is (not compatibility.check(Compatibility.FORWARD, old_p, [new_p]))


# -- Protobuf ------------------------------------------------------------------------------
def proto(body: str, *, package: str = "shop", syntax: str = "proto3", references=None) -> ParsedSchema:
    text = f'syntax = "{syntax}";\npackage {package};\n{body}\n'
    known = references or {}

    def resolve(reference):
        return SchemaDef(SchemaType.PROTOBUF, known[reference.name])

    refs = tuple(Reference(name, f"{name}-subject", 1) for name in known)
    return compatibility.parse(SchemaDef(SchemaType.PROTOBUF, text, refs), resolve)


P2 = {"syntax": "proto2"}
# (case, old, new, backward-compatible, forward-compatible, extra parse options)
PROTOBUF_CASES = [
    ("same", "message M { int32 a = 1; }", "message M { int32 a = 1; }", True, True, {}),
    ("field added", "message M { int32 a = 1; }", "message M { int32 a = 1; string b = 2; }", True, True, {}),
    ("field removed", "message M { int32 a = 1; string b = 2; }", "message M { int32 a = 1; }", True, True, {}),
    ("field renamed", "message M { int32 a = 1; }", "message M { int32 renamed = 1; }", True, True, {}),
    ("field renumbered (Confluent: removed + added)", "message M { int32 a = 1; }", "message M { int32 a = 2; }", True, True, {}),
    ("int32 to int64 (both varints)", "message M { int32 a = 1; }", "message M { int64 a = 1; }", True, True, {}),
    ("int32 to string", "message M { int32 a = 1; }", "message M { string a = 1; }", False, False, {}),
    ("string to bytes", "message M { string a = 1; }", "message M { bytes a = 1; }", True, True, {}),
    ("sint32 to int32 (zigzag is not plain varint)", "message M { sint32 a = 1; }", "message M { int32 a = 1; }", False, False, {}),
    ("fixed32 to float", "message M { fixed32 a = 1; }", "message M { float a = 1; }", False, False, {}),
    ("enum to int32", "enum E { E0 = 0; } message M { E a = 1; }", "enum E { E0 = 0; } message M { int32 a = 1; }", True, True, {}),
    ("message field to scalar", "message N { int32 x = 1; } message M { N a = 1; }",
     "message N { int32 x = 1; } message M { int32 a = 1; }", False, False, {}),
    ("message field to another message", "message N { int32 x = 1; } message O { int32 x = 1; } message M { N a = 1; }",
     "message N { int32 x = 1; } message O { int32 x = 1; } message M { O a = 1; }", False, False, {}),
    ("message added", "message M { int32 a = 1; }", "message M { int32 a = 1; } message N { int32 b = 1; }", True, False, {}),
    ("message removed", "message M { int32 a = 1; } message N { int32 b = 1; }", "message M { int32 a = 1; }", False, True, {}),
    ("message renamed", "message M { int32 a = 1; }", "message Renamed { int32 a = 1; }", False, False, {}),
    ("nested message removed", "message M { message N { int32 b = 1; } N n = 1; }", "message M { int32 a = 2; }", False, True, {}),
    ("nested field changed", "message M { message N { int32 b = 1; } N n = 1; }",
     "message M { message N { string b = 1; } N n = 1; }", False, False, {}),
    ("enum value added", "enum E { E0 = 0; } message M { E e = 1; }", "enum E { E0 = 0; E1 = 1; } message M { E e = 1; }",
     True, True, {}),
    ("enum type removed", "enum E { E0 = 0; } message M { int32 a = 1; }", "message M { int32 a = 1; }", True, True, {}),
    ("package changed", "message M { int32 a = 1; }", "message M { int32 a = 1; }", False, False, {"new_package": "other"}),
    ("syntax changed", "message M { optional int32 a = 1; }", "message M { optional int32 a = 1; }", True, True,
     {"new_syntax": "proto2"}),
    ("singular string to repeated", "message M { string a = 1; }", "message M { repeated string a = 1; }", True, True, {}),
    ("singular int32 to repeated", "message M { int32 a = 1; }", "message M { repeated int32 a = 1; }", False, False, {}),
    ("proto3 optional added to a field", "message M { int32 a = 1; }", "message M { optional int32 a = 1; }", True, True, {}),
    ("required field added (proto2)", "message M { optional int32 a = 1; }",
     "message M { optional int32 a = 1; required int32 b = 2; }", False, False, P2),  # Confluent: either way
    ("required field removed (proto2)", "message M { optional int32 a = 1; required int32 b = 2; }",
     "message M { optional int32 a = 1; }", False, False, P2),
    ("optional became required (proto2)", "message M { optional int32 a = 1; }", "message M { required int32 a = 1; }",
     False, False, P2),
    ("optional string became repeated (proto2)", "message M { optional string a = 1; }", "message M { repeated string a = 1; }",
     True, True, P2),
    ("repeated message became singular", "message N { int32 x = 1; } message M { repeated N a = 1; }",
     "message N { int32 x = 1; } message M { N a = 1; }", True, True, {}),
    ("double to float", "message M { double a = 1; }", "message M { float a = 1; }", False, False, {}),
    ("oneof added around one field", "message M { int32 a = 1; }", "message M { oneof o { int32 a = 1; } }", True, True, {}),
    ("two fields moved into a new oneof", "message M { int32 a = 1; int32 b = 2; }",
     "message M { oneof o { int32 a = 1; int32 b = 2; } }", False, True, {}),
    ("field moved into an existing oneof", "message M { int32 a = 1; oneof o { int32 b = 2; } }",
     "message M { oneof o { int32 a = 1; int32 b = 2; } }", False, True, {}),
    ("oneof member removed", "message M { oneof o { int32 a = 1; int32 b = 2; } }", "message M { oneof o { int32 a = 1; } }",
     False, True, {}),
    ("oneof member added", "message M { oneof o { int32 a = 1; } }", "message M { oneof o { int32 a = 1; int32 b = 2; } }",
     True, False, {}),
    ("service changed", "message M { int32 a = 1; } service S { rpc A(M) returns (M); }", "message M { int32 a = 1; }",
     True, True, {}),
]


def _proto_pair(old, new, options):
    syntax = options.get("syntax", "proto3")
    return (proto(old, syntax=syntax),
            proto(new, package=options.get("new_package", "shop"), syntax=options.get("new_syntax", syntax)))


@pytest.mark.parametrize(("old", "new", "backward", "forward", "options"), [c[1:] for c in PROTOBUF_CASES],
                         ids=[c[0] for c in PROTOBUF_CASES])
def test_protobuf_rules(old, new, backward, forward, options):
    old_p, new_p = _proto_pair(old, new, options)
    assert (not compatibility.check(Compatibility.BACKWARD, new_p, [old_p])) is backward
    assert (not compatibility.check(Compatibility.FORWARD, new_p, [old_p])) is forward
    assert (not compatibility.check(Compatibility.FULL, new_p, [old_p])) is (backward and forward)
    assert compatibility.check(Compatibility.NONE, new_p, [old_p]) == []
    for level in Compatibility:
        assert compatibility.check(level, new_p, [new_p]) == []


def test_protobuf_transitive_checks_every_version():
    v1 = proto("message M { int32 a = 1; }")
    v2 = proto("message M { int32 a = 1; } message N { int32 b = 1; }")
    v3 = proto("message M { int32 a = 1; }")  # N removed again: v2's data names N
    assert compatibility.check(Compatibility.FORWARD, v2, [v1])  # v1 has no N to read v2's N
    assert compatibility.check(Compatibility.BACKWARD, v3, [v1, v2])
    assert compatibility.check(Compatibility.BACKWARD, v2, [v1]) == []
    v4 = proto("message M { int32 a = 1; int32 c = 3; } message N { int32 b = 1; }")
    assert compatibility.check(Compatibility.BACKWARD_TRANSITIVE, v4, [v1, v2]) == []
    assert compatibility.check(Compatibility.FORWARD, v4, [v2]) == []
    assert compatibility.check(Compatibility.FORWARD_TRANSITIVE, v4, [v1, v2])  # v1 cannot read N
    messages = compatibility.check(Compatibility.FULL_TRANSITIVE, v4, [v1, v2])
    assert any("MESSAGE_REMOVED" in m for m in messages)


def test_protobuf_imports_references_and_well_known_types():
    common = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    order = proto('import "common/money.proto";\nimport "google/protobuf/timestamp.proto";\n'
                  "message Order { common.Money total = 1; google.protobuf.Timestamp at = 2; }",
                  references={"common/money.proto": common})
    assert set(order.parsed.files) == {"common/money.proto", "google/protobuf/timestamp.proto", "default.proto"}
    assert order.parsed.main.message_type[0].field[0].type_name == ".common.Money"
    with pytest.raises(RegistryError) as caught:
        proto('import "common/money.proto";\nmessage Order { common.Money total = 1; }')  # no reference given
    assert caught.value.code == 42201 and "common/money.proto" in caught.value.message


def test_invalid_protobuf_is_refused_with_protocs_message():
    with pytest.raises(RegistryError) as caught:
        proto("message M { Nope a = 1; }")
    assert caught.value.code == 42201
    assert '"Nope" is not defined' in caught.value.message and "default.proto:3" in caught.value.message
    with pytest.raises(RegistryError) as caught:
        proto("message M { int32 a = 1; int32 b = 1; }")
    assert caught.value.code == 42201 and "already been used" in caught.value.message


def test_a_base64_descriptor_and_its_source_parse_to_the_same_file():
    from tinystream.registry import protobuf_parse
    source = proto("message M { int32 a = 1; repeated string tags = 2; }")
    encoded = protobuf_parse.serialized(source.parsed)
    again = compatibility.parse(SchemaDef(SchemaType.PROTOBUF, encoded), _no_refs)
    assert again.parsed.main == source.parsed.main
    assert compatibility.check(Compatibility.FULL, again, [source]) == []


@pytest.mark.parametrize("path", ["../../../../etc/passwd", "/etc/passwd"])
def test_a_protobuf_import_cannot_reach_outside_the_include_paths(path):
    with pytest.raises(RegistryError) as caught:
        proto(f'import "{path}";\nmessage M {{ int32 a = 1; }}')
    assert caught.value.code == 42201 and "was not found" in caught.value.message
    with pytest.raises(RegistryError) as caught:  # nor can a reference's name place a file outside the scratch folder
        proto("message M { int32 a = 1; }", references={path: 'syntax = "proto3";'})
    assert caught.value.code == 42201
