"""The pure registry state: ids, versions, deletes, references, config and mode, through its records."""

from __future__ import annotations

import json

import pytest

from tinystream.registry.errors import ErrorCode, RegistryError
from tinystream.registry.model import Compatibility, Mode, Reference, SchemaDef, SchemaType
from tinystream.registry.records import Record
from tinystream.registry.state import RegistryState


def avro_def(obj, refs=()) -> SchemaDef:
    return SchemaDef(SchemaType.AVRO, json.dumps(obj, separators=(",", ":")), tuple(refs))


USER = {"type": "record", "name": "User", "fields": [{"name": "id", "type": "int"}]}
USER2 = {"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]}


def write(state: RegistryState, records) -> None:
    """What the store does: records go through bytes and come back through apply."""
    for record in records:
        decoded = Record.decode(record.key_bytes(), record.value_bytes())
        assert decoded is not None and state.apply(decoded)


def register(state, subject, schema, **kwargs) -> int:
    plan = state.plan_register(subject, schema, **kwargs)
    write(state, plan.records)
    return state.lookup(subject, schema).schema_id


def codes(call) -> int:
    with pytest.raises(RegistryError) as caught:
        call()
    return int(caught.value.code)


def test_same_schema_under_two_subjects_has_one_id_and_a_new_one_gets_the_next():
    state = RegistryState()
    assert register(state, "a", avro_def(USER)) == 1
    assert register(state, "b", avro_def(USER)) == 1
    assert register(state, "a", avro_def(USER)) == 1  # again: no new version
    assert [v.version for v in state.versions("a")] == [1]
    assert register(state, "a", avro_def(USER2)) == 2
    assert [(v.subject, v.version) for v in state.uses_of(1)] == [("a", 1), ("b", 1)]


def test_incompatible_change_is_409_and_none_allows_it():
    state = RegistryState()
    register(state, "s", avro_def(USER2))
    assert codes(lambda: state.plan_register("s", avro_def(USER))) == 409  # long -> int: new cannot read old
    write(state, state.plan_config("s", "NONE"))
    assert register(state, "s", avro_def(USER)) == 2
    assert state.compatibility("s") is Compatibility.NONE and state.compatibility(None) is Compatibility.BACKWARD


def test_soft_then_hard_delete_and_versions_keep_growing():
    state = RegistryState()
    register(state, "s", avro_def(USER))
    register(state, "s", avro_def(USER2))
    assert codes(lambda: state.plan_delete_version("s", 1, permanent=True)) == 40407  # not soft-deleted first
    number, records = state.plan_delete_version("s", 1, permanent=False)
    write(state, records)
    assert number == 1 and [v.version for v in state.versions("s")] == [2]
    assert [v.version for v in state.versions("s", deleted=True)] == [1, 2]
    assert codes(lambda: state.version("s", 1)) == 40402
    assert codes(lambda: state.plan_delete_version("s", 1, permanent=False)) == 40406  # already soft-deleted
    write(state, state.plan_delete_version("s", 1, permanent=True)[1])
    assert codes(lambda: state.plan_delete_version("s", 1, permanent=False)) == 40402  # gone for good
    assert codes(lambda: state.schema(1)) == 40403  # no version holds id 1 any more
    versions, records = state.plan_delete_subject("s", permanent=False)
    write(state, records)
    assert versions == [2] and state.subject_names() == [] and state.subject_names(deleted=True) == ["s"]
    assert codes(lambda: state.plan_delete_subject("s", permanent=False)) == 40404
    register(state, "s", avro_def({"type": "string"}))
    assert [v.version for v in state.versions("s")] == [3]  # one past the highest ever seen


def test_references_resolve_and_block_deletes():
    state = RegistryState()
    address = {"type": "record", "name": "Address", "namespace": "t", "fields": [{"name": "city", "type": "string"}]}
    register(state, "address", avro_def(address))
    person = {"type": "record", "name": "Person", "namespace": "t", "fields": [{"name": "home", "type": "t.Address"}]}
    person_id = register(state, "person", avro_def(person, [Reference("t.Address", "address", 1)]))
    assert state.referenced_by("address", 1) == [person_id]
    assert codes(lambda: state.plan_delete_version("address", 1, permanent=False)) == 40901
    assert codes(lambda: state.plan_register("other", avro_def(person))) == 42201  # unknown type without the reference


def test_modes_readonly_and_import():
    state = RegistryState()
    write(state, state.plan_mode(None, "READONLY"))
    assert codes(lambda: state.plan_register("s", avro_def(USER))) == 42205
    assert codes(lambda: state.plan_mode(None, "SIDEWAYS")) == 42204
    write(state, state.plan_mode(None, "IMPORT"))
    assert register(state, "s", avro_def(USER2), schema_id=42, version=7) == 42
    assert register(state, "s", avro_def(USER), schema_id=43, version=8) == 43  # IMPORT skips the compatibility check
    assert register(state, "u", avro_def(USER2), schema_id=50, version=1) == 50  # a known schema, another id
    write(state, state.plan_mode(None, "READWRITE"))
    assert state.mode("s") is Mode.READWRITE
    assert codes(lambda: state.plan_register("t", avro_def(USER), schema_id=1)) == 42205
    assert register(state, "t", avro_def({"type": "long"})) == 51  # past the highest imported id
    assert codes(lambda: state.plan_mode(None, "IMPORT")) == 42205  # subjects exist: needs force
    assert codes(lambda: state.plan_config(None, "SOMETIMES")) == 42203


def test_an_id_race_is_refused_on_apply():
    a, b = RegistryState(), RegistryState()
    plan_a = a.plan_register("x", avro_def(USER))
    plan_b = b.plan_register("y", avro_def({"type": "string"}))
    assert plan_a.schema_id == plan_b.schema_id == 1
    for state in (a, b):  # both read the topic in the same order
        write(state, plan_a.records)
        refused = Record.decode(plan_b.records[0].key_bytes(), plan_b.records[0].value_bytes())
        assert not state.apply(refused)
        assert state.subject_names() == ["x"]


def test_two_writers_planning_the_same_version_of_one_subject_keep_the_first():
    a, b = RegistryState(), RegistryState()
    setup = [*a.plan_register("s", avro_def(USER)).records]
    write(a, setup)
    setup += a.plan_register("other", avro_def(USER2)).records
    write(a, setup[1:])
    write(b, setup)
    plan_a = a.plan_register("s", avro_def(USER2))  # an existing id (2)
    plan_b = b.plan_register("s", avro_def({"type": "record", "name": "User", "fields": [
        {"name": "id", "type": "int"}, {"name": "x", "type": "int", "default": 0}]}))  # a new id (3)
    assert plan_a.version == plan_b.version == 2 and (plan_a.schema_id, plan_b.schema_id) == (2, 3)
    for state in (a, b):
        write(state, plan_a.records)
        loser = plan_b.records[0]
        assert not state.apply(Record.decode(loser.key_bytes(), loser.value_bytes()))
        assert state.version("s", 2).schema_id == 2 and 3 not in state.schemas


def test_the_caps_count_what_is_held_after_soft_and_hard_deletes():
    from tinystream.registry.state import Limits
    state = RegistryState(limits=Limits(max_subjects=10, max_subjects_per_user=10, max_versions=2, max_versions_per_user=10))

    def register(subject: str, text: str) -> None:
        for record in state.plan_register(subject, SchemaDef(SchemaType.AVRO, text), owner="u").records:
            assert state.apply(record)

    def run(records) -> None:
        assert all(state.apply(r) for r in records)

    register("a", '"string"')
    register("b", '"long"')
    with pytest.raises(RegistryError) as refused:
        register("c", '"int"')
    assert refused.value.code is ErrorCode.LIMIT_REACHED and "max_versions 2" in refused.value.message
    run(state.plan_delete_subject("b", permanent=False)[1])  # soft: still held, still counted
    with pytest.raises(RegistryError):
        register("c", '"int"')
    run(state.plan_delete_subject("b", permanent=True)[1])  # hard: room again
    register("c", '"int"')
    assert state.subject_names() == ["a", "c"]
