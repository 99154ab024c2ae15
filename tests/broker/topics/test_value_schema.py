"""Schema-validated topics (`tinystream.value.schema`): real clients and the raw protocol.

Valid records are accepted; one invalid record rejects the whole batch with
INVALID_RECORD, and the answer names the record (record_errors, Produce v8+)
and the rule (error_message); a topic without a schema is untouched; a bad
schema is INVALID_CONFIG on create and on alter.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.storage.batch import Compression, Record
from tinystream.broker.topics import value_schema
from tinystream.testing.broker import BrokerThread, create_topic, create_topics_request, test_settings
from tinystream.testing.broker import now_batch as build_batch
from tinystream.testing.broker import produce_request as produce

SCHEMA = json.dumps({
    "type": "object",
    "required": ["id", "name"],
    "properties": {"id": {"type": "integer", "minimum": 0}, "name": {"type": "string"}},
})
KEY = value_schema.SCHEMA_CONFIG


def part(response):
    return response.responses[0].partition_responses[0]


def batch(*values: bytes | None, compression: Compression = Compression.NONE) -> bytes:
    return build_batch([Record(value=v) for v in values], compression=compression)


# --------------------------------------------------------------------------- the pure module


def test_violation_names_record_path_and_rule():
    found = value_schema.violation(batch(b'{"id": 1, "name": "a"}', b'{"id": -2, "name": "b"}'), SCHEMA)
    assert isinstance(found, value_schema.RecordViolation)
    assert (found.index, found.offset_delta, found.path, found.rule) == (1, 1, "$.id", "minimum")
    assert "record 1" in found.describe() and "-2 is less than the minimum of 0" in found.describe()


def test_non_json_value_and_tombstone():
    assert value_schema.violation(batch(None, b'{"id": 0, "name": ""}'), SCHEMA) is None  # tombstones pass
    found = value_schema.violation(batch(b"not json"), SCHEMA)
    assert found.rule == "json" and found.index == 0


@pytest.mark.parametrize("text, fragment", [
    ("{", "not a JSON document"),
    ("[1]", "object or a boolean"),
    ('{"type": "strnig"}', "invalid JSON Schema at $.type"),
    ('{"properties": {"a": {"minimum": "zero"}}}', "$.properties.a.minimum"),
])
def test_bad_schemas_are_refused(text, fragment):
    with pytest.raises(value_schema.InvalidSchema) as info:
        value_schema.check_schema(text)
    assert fragment in str(info.value)


def test_schema_draft_comes_from_dollar_schema():
    draft7 = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}]})
    value_schema.check_schema(draft7)  # tuple-form items: valid in draft 7, refused by 2020-12
    with pytest.raises(value_schema.InvalidSchema):
        value_schema.check_schema(json.dumps({"items": [{"type": "integer"}]}))


def test_fast_path_only_for_the_portable_subset():
    assert value_schema.compile_schema(SCHEMA).fast is not None
    from tinystream.bench.batches import BUILTIN_SCHEMA

    assert value_schema.compile_schema(BUILTIN_SCHEMA).fast is not None  # the benchmark measures the fast path
    for schema in ({"type": "string", "format": "email"},  # format: jsonschema's checker decides
                   {"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"},
                   {"prefixItems": [{"type": "integer"}]},
                   {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},  # boolean exclusive*
                   {"type": "object", "properties": {"a": {"dependentRequired": {"a": ["b"]}}}}):
        compiled = value_schema.compile_schema(json.dumps(schema))
        assert compiled.fast is None, schema


def test_validation_never_fills_defaults_into_the_record():
    compiled = value_schema.compile_schema(json.dumps({"properties": {"a": {"default": 1}}}))
    document: dict = {}
    assert compiled.is_valid(document) and document == {}


def test_slow_path_schemas_still_validate():
    schema = json.dumps({"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}})
    found = value_schema.violation(batch(b'{"n": 1}', b'{"n": "x"}'), schema)
    assert isinstance(found, value_schema.RecordViolation) and (found.index, found.rule) == (1, "type")


# --------------------------------------------------------------------------- fast and authoritative agree

import fastjsonschema  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300) | st.floats(-10, 10, allow_nan=False)
    | st.sampled_from([1.0, 1e308, "a", "a\n", "ab\n", "abc"]) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["id", "name", "tags", "x", "t1"]),
                                                                 inner, max_size=4),
    max_leaves=10)
_SUBSET_SCHEMAS = [
    SCHEMA,
    json.dumps({"type": "object", "additionalProperties": False, "minProperties": 1,
                "properties": {"id": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 3},
                               "name": {"type": "string", "enum": ["a", "ab", "abc"], "maxLength": 3},
                               "tags": {"type": "array", "items": {"enum": ["a", 1, None, True]},
                                        "uniqueItems": True}}}),
    json.dumps({"anyOf": [{"type": "integer", "maximum": 10}, {"type": "array", "minItems": 2},
                          {"maxLength": 1}, {"multipleOf": 0.5}]}),
    json.dumps({"allOf": [{"type": ["number", "string"]}, {"const": 1}]}),
    json.dumps({"type": ["object", "null"], "propertyNames": {"maxLength": 3, "minLength": 1},
                "required": ["x"]}),
]
# `pattern` is not in the subset: fastjsonschema runs Python's re (backtracking); RE2 runs it in jsonschema.


def test_a_schema_with_a_pattern_takes_the_re2_path():
    assert value_schema.compile_schema(json.dumps({"type": "string", "pattern": "^a"})).fast is None
# Keywords outside the subset, each with a value jsonschema and fastjsonschema judge differently:
# the fast path must not be used for them.
_NOT_PORTABLE = [
    ({"not": {"pattern": "a$"}}, "a\n"),
    ({"oneOf": [{"pattern": "^a$"}, {"maxLength": 2}]}, "a\n"),
    ({"if": {"pattern": "^a$"}, "then": {"const": "never"}}, "a\n"),
    ({"patternProperties": {"^t$": {"type": "integer"}}}, {"t\n": "x"}),
    ({"not": {"multipleOf": 0.5}}, 1e308),
]


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(_SUBSET_SCHEMAS) - 1), document=_json)
def test_fast_path_never_accepts_what_jsonschema_refuses(index, document):
    compiled = value_schema.compile_schema(_SUBSET_SCHEMAS[index])
    assert compiled.fast is not None
    try:
        compiled.fast(document)
        fast_ok = True
    except fastjsonschema.JsonSchemaValueException:
        fast_ok = False
    if fast_ok:
        assert compiled.validator.is_valid(document), (_SUBSET_SCHEMAS[index], document)
    assert compiled.is_valid(document) == compiled.validator.is_valid(document)


@pytest.mark.parametrize("schema, document", _NOT_PORTABLE)
def test_negating_keywords_stay_with_jsonschema(schema, document):
    compiled = value_schema.compile_schema(json.dumps(schema))
    assert compiled.fast is None
    assert compiled.is_valid(document) == compiled.validator.is_valid(document)


def test_a_pattern_fastjsonschema_cannot_compile_falls_back():
    # fastjsonschema rewrites `$` inside a class into `\Z`, which `re` refuses: jsonschema alone then.
    compiled = value_schema.compile_schema(json.dumps({"type": "string", "pattern": "^[^$]*$"}))
    assert compiled.fast is None and compiled.is_valid("abc") and not compiled.is_valid("a$")


# --------------------------------------------------------------------------- raw protocol

@pytest.mark.asyncio
async def test_invalid_record_rejects_the_batch_with_record_errors(broker, client):
    await create_topic(client, "checked", configs={KEY: SCHEMA})
    good = b'{"id": 1, "name": "a"}'
    resp = await client.request(produce("checked", 0, batch(good, good)))
    assert part(resp).error_code == ErrorCode.none and part(resp).base_offset == 0

    resp = await client.request(produce("checked", 0, batch(good, b'{"id": 2}', good), version=9))
    p = part(resp)
    assert p.error_code == ErrorCode.invalid_record
    assert "record 1" in p.error_message and "'name' is a required property" in p.error_message
    assert "[required]" in p.error_message
    assert [(e.batch_index, "record 1" in e.batch_index_error_message) for e in p.record_errors] == [(1, True)]

    resp = await client.request(produce("checked", 0, batch(good)))
    assert part(resp).base_offset == 2  # nothing of the rejected batch was appended


@pytest.mark.asyncio
@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
async def test_compressed_batches_are_validated(broker, client, codec):
    await create_topic(client, "zipped", configs={KEY: SCHEMA})
    resp = await client.request(produce("zipped", 0, batch(b'{"id": 1, "name": "a"}', compression=codec)))
    assert part(resp).error_code == ErrorCode.none
    resp = await client.request(produce("zipped", 0, batch(b'{"id": "x", "name": "a"}', compression=codec)))
    assert part(resp).error_code == ErrorCode.invalid_record and "$.id" in part(resp).error_message


@pytest.mark.asyncio
async def test_v7_gets_the_message_without_record_errors(broker, client):
    await create_topic(client, "old", configs={KEY: SCHEMA})
    resp = await client.request(produce("old", 0, batch(b"[]"), version=7))
    assert part(resp).error_code == ErrorCode.invalid_record


@pytest.mark.asyncio
async def test_topic_without_schema_decodes_nothing(broker, client, monkeypatch):
    await create_topic(client, "free")

    def boom(*args, **kwargs):
        raise AssertionError("decoded a batch of a topic without a schema")

    monkeypatch.setattr(value_schema, "violation", boom)
    resp = await client.request(produce("free", 0, batch(b"not json at all")))
    assert part(resp).error_code == ErrorCode.none


@pytest.mark.asyncio
async def test_bad_schema_is_invalid_config_on_create_and_alter(broker, client):
    resp = await client.request(create_topics_request([("bad", 1, 1, {KEY: '{"type": 12}'})]))
    t = resp.topics[0]
    assert t.error_code == ErrorCode.invalid_config
    assert KEY in t.error_message and "invalid JSON Schema at $.type" in t.error_message

    from tinystream.testing.broker import request

    await create_topic(client, "later")
    alter = request(44, 1, resources=(request_entity("later", '{"required": "name"}'),), validate_only=False)
    resp = await client.request(alter)
    r = resp.responses[0]
    assert r.error_code == ErrorCode.invalid_config and "$.required" in r.error_message


def request_entity(topic: str, schema: str):
    from tinystream.testing.broker import entity

    return entity(44, 1, "AlterConfigsResource", resource_type=2, resource_name=topic, configs=(
        entity(44, 1, "AlterableConfig", name=KEY, config_operation=0, value=schema),))


# --------------------------------------------------------------------------- real clients


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("schema") / "data")) as b:
        yield b


def test_confluent_kafka_valid_accepted_invalid_rejected(running):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    checked, free = f"checked-{uuid.uuid4().hex[:6]}", f"free-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    for f in admin.create_topics([NewTopic(checked, 1, 1, config={KEY: SCHEMA}), NewTopic(free, 1, 1)]).values():
        f.result(10)
    bad = admin.create_topics([NewTopic(f"bad-{uuid.uuid4().hex[:6]}", 1, 1, config={KEY: '{"type": "nope"}'})])
    with pytest.raises(Exception) as info:
        next(iter(bad.values())).result(10)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG

    outcomes: dict[str, list] = {}

    def report(err, msg):
        outcomes.setdefault(msg.topic(), []).append(err)

    producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 50, "enable.idempotence": False,
                         "retries": 0})
    for i in range(10):
        producer.produce(checked, json.dumps({"id": i, "name": f"n{i}"}).encode(), on_delivery=report)
        producer.produce(free, b"anything goes", on_delivery=report)
    assert producer.flush(10) == 0
    assert outcomes[checked] == [None] * 10 and outcomes[free] == [None] * 10

    outcomes.clear()
    for value in (b'{"id": 1, "name": "ok"}', b'{"id": 1.5, "name": "bad"}', b'{"id": 2, "name": "ok"}'):
        producer.produce(checked, value, on_delivery=report)
    assert producer.flush(10) == 0
    errors = outcomes[checked]
    assert len(errors) == 3 and all(e is not None and e.code() == KafkaError.INVALID_RECORD for e in errors)


def test_kafka_python_sees_invalid_record(running):
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidRecordError

    topic = f"kp-checked-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=running.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={KEY: SCHEMA})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=running.bootstrap, retries=0)
    assert producer.send(topic, b'{"id": 3, "name": "x"}').get(10).offset == 0
    with pytest.raises(InvalidRecordError):
        producer.send(topic, b'{"name": "x"}').get(10)
    producer.close()


# --------------------------------------------------------------------------- remote references (issue 12, 4)


@pytest.fixture
def listener():
    """An HTTP server that counts requests: a broker must never call it."""
    import http.server  # noqa: PLC0415
    import threading  # noqa: PLC0415

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            hits.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/schema.json", hits
    server.shutdown()


async def test_a_remote_ref_is_invalid_config_and_never_fetched(broker, client, listener):
    url, hits = listener
    remote = json.dumps({"type": "object", "properties": {"name": {"$ref": url}}})
    resp = await client.request(create_topics_request([("ssrf", 1, 1, {KEY: remote})]))
    assert resp.topics[0].error_code == ErrorCode.invalid_config, resp.topics[0]
    assert url in resp.topics[0].error_message and "only references inside the document" in resp.topics[0].error_message
    with pytest.raises(value_schema.InvalidSchema, match="remote reference"):
        value_schema.check_schema(remote)  # a topic stored before the check: its schema is refused, not fetched
    assert hits == []


def test_local_refs_still_validate():
    local = json.dumps({"$defs": {"id": {"type": "integer", "minimum": 0}},
                        "type": "object", "properties": {"id": {"$ref": "#/$defs/id"}}})
    assert value_schema.violation(batch(b'{"id": 3}'), local) is None
    assert value_schema.violation(batch(b'{"id": -3}'), local).rule == "minimum"


# --------------------------------------------------------------------------- regex cost (issue 12, 4)


def test_a_backtracking_pattern_costs_linear_time():
    import time  # noqa: PLC0415

    evil = json.dumps({"type": "string", "pattern": "^(a+)+$"})
    record = json.dumps("a" * 5000 + "!").encode()  # Python's re would take longer than the universe
    started = time.perf_counter()
    found = value_schema.violation(batch(record), evil)
    assert found is not None and found.rule == "pattern"
    assert time.perf_counter() - started < 1.0
    assert value_schema.violation(batch(b'"aaaa"'), evil) is None


def test_pattern_properties_run_under_re2_too():
    schema = json.dumps({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}})
    assert value_schema.violation(batch(b'{"x-a": 1, "y": "s"}'), schema) is None
    assert value_schema.violation(batch(b'{"x-a": "one"}'), schema).rule == "type"


@pytest.mark.parametrize("pattern", ["(?=a)b", "(a)\\1"])
def test_patterns_re2_cannot_run_are_invalid_config(pattern):
    with pytest.raises(value_schema.InvalidSchema, match="RE2"):
        value_schema.check_schema(json.dumps({"type": "string", "pattern": pattern}))
