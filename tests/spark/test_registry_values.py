"""Registry-framed Avro values without Spark or a registry: wire framing, Avro -> Spark types, decode/encode,
the registry options, and FAILFAST/PERMISSIVE batches."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pytest

pytestmark = pytest.mark.spark

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
pytest.importorskip("fastavro")

from pyspark.sql import types as T  # noqa: E402

from tinystream.spark import avro_values, json_values  # noqa: E402
from tinystream.spark.errors import InvalidOptionError, SchemaRegistryError  # noqa: E402
from tinystream.spark.options import DecodeMode, Mode, parse_read_options, parse_write_options  # noqa: E402
from tinystream.spark.registry_client import RegisteredSchema  # noqa: E402
from tinystream.spark.registry_values import ValueDecoder, read_schema, records_to_registry_batch  # noqa: E402

ORDER = {
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "again", "type": ["null", "Status"], "default": None},
    ],
}
VALUE = {"id": 7, "note": None, "status": "PAID", "lines": [{"sku": "a", "qty": 2}], "tags": {"k": "v"},
         "day": dt.date(2026, 11, 28), "at": dt.datetime(2026, 11, 28, 6, 0, 1, 500000, tzinfo=dt.UTC),
         "price": decimal.Decimal("12.34"), "again": "NEW"}


def test_frame_and_unframe_follow_confluents_wire_format():
    framed = avro_values.frame(258, b"xyz")
    assert framed == b"\x00\x00\x00\x01\x02xyz"
    assert avro_values.unframe(framed) == (258, b"xyz")


@pytest.mark.parametrize("data, reason", [
    (b"\x00\x00\x01", "fewer than the 5"),
    (b"\x01\x00\x00\x00\x01x", "unknown magic byte 1"),
    (None, "tombstone"),
])
def test_unframe_refuses_what_is_not_the_wire_format(data, reason):
    with pytest.raises(SchemaRegistryError, match=reason):
        avro_values.unframe(data)


def test_avro_types_map_like_spark_avro():
    kind, nullable = avro_values.spark_type(json.dumps(ORDER))
    assert not nullable
    line = T.StructType([T.StructField("sku", T.StringType(), False), T.StructField("qty", T.IntegerType(), False)])
    assert kind == T.StructType([
        T.StructField("id", T.LongType(), False),
        T.StructField("note", T.StringType(), True),
        T.StructField("status", T.StringType(), False),
        T.StructField("lines", T.ArrayType(line, False), False),
        T.StructField("tags", T.MapType(T.StringType(), T.StringType(), False), False),
        T.StructField("day", T.DateType(), False),
        T.StructField("at", T.TimestampType(), False),
        T.StructField("price", T.DecimalType(9, 2), False),
        T.StructField("again", T.StringType(), True),
    ])


def test_a_non_record_schema_is_wrapped_and_a_wide_union_is_refused():
    assert avro_values.value_struct('"string"') == T.StructType([T.StructField("value", T.StringType(), False)])
    with pytest.raises(SchemaRegistryError, match="2 non-null branches"):
        avro_values.spark_type(["null", "int", "string"])


def test_encode_then_decode_gives_the_same_values():
    parsed = avro_values.parse_schema(json.dumps(ORDER))
    assert avro_values.decode(parsed, avro_values.encode(parsed, VALUE)) == VALUE


def test_decode_resolves_an_older_writer_schema_to_the_reader_schema():
    v1 = {"type": "record", "name": "U", "fields": [{"name": "id", "type": "int"}]}
    v2 = {"type": "record", "name": "U", "fields": [{"name": "id", "type": "long"},
                                                     {"name": "email", "type": "string", "default": "-"}]}
    payload = avro_values.encode(avro_values.parse_schema(v1), {"id": 3})
    assert avro_values.decode(avro_values.parse_schema(v1), payload, reader=avro_values.parse_schema(v2)) == {
        "id": 3, "email": "-"}


def test_bad_payload_and_bad_datum_are_clear_errors():
    parsed = avro_values.parse_schema(json.dumps(ORDER))
    with pytest.raises(SchemaRegistryError, match="does not decode with its schema"):
        avro_values.decode(parsed, b"\x02")
    with pytest.raises(SchemaRegistryError, match="does not match the Avro schema"):
        avro_values.encode(parsed, {"id": "not a number"})


def test_registry_options_default_subject_and_refusals():
    base = {"bootstrap.servers": "h:1", "subscribe": "orders", "schema.registry.url": "http://r:8081"}
    reg = parse_read_options(base, Mode.BATCH).registry
    assert reg is not None and reg.subject == "orders-value" and reg.mode is DecodeMode.FAILFAST
    assert parse_read_options({**base, "mode": "permissive"}, Mode.BATCH).registry.mode is DecodeMode.PERMISSIVE
    assert parse_read_options({"bootstrap.servers": "h:1", "subscribe": "orders"}, Mode.BATCH).registry is None
    bad = [
        ({**base, "subscribe": "a,b"}, '"value.subject" is required'),
        ({**base, "value.format": "xml"}, '"value.format" must be one of avro, json'),
        ({**base, "mode": "DROPMALFORMED"}, '"mode" must be "FAILFAST" or "PERMISSIVE"'),
        ({**base, "schema.registry.url": "r:8081"}, "http:// or https://"),
        ({**base, "schema.registry.basic.auth.user.info": "nopassword"}, "user:password"),
        ({**base, "value.schema": '"string"'}, "writes only"),
        ({"bootstrap.servers": "h:1", "subscribe": "t", "value.subject": "s"}, 'needs "schema.registry.url"'),
    ]
    for options, message in bad:
        with pytest.raises(InvalidOptionError, match=message):
            parse_read_options(options, Mode.BATCH)
    write = {"bootstrap.servers": "h:1", "schema.registry.url": "http://r:8081"}
    with pytest.raises(InvalidOptionError, match='needs the "topic" option'):
        parse_write_options({**write, "value.subject": "s"})
    with pytest.raises(InvalidOptionError, match='needs "value.schema"'):
        parse_write_options({**write, "topic": "t", "auto.register.schemas": "true"})
    assert parse_write_options({**write, "topic": "t"}).registry.subject == "t-value"


class FakeMessage:
    def __init__(self, value: bytes | None, offset: int):
        self._value, self._offset = value, offset

    def key(self): return None
    def value(self): return self._value
    def topic(self): return "orders"
    def partition(self): return 0
    def offset(self): return self._offset
    def timestamp(self): return (1, 1_700_000_000_000)
    def headers(self): return None


def _registry(mode: str):
    options = {"bootstrap.servers": "h:1", "subscribe": "orders", "schema.registry.url": "http://127.0.0.1:9", "mode": mode}
    reg = parse_read_options(options, Mode.BATCH).registry
    import dataclasses
    return dataclasses.replace(reg, reader_schema=json.dumps(ORDER))


def _decoder(reg) -> ValueDecoder:
    decoder = ValueDecoder(reg)
    decoder.writers[1] = avro_values.parse_schema(json.dumps(ORDER))  # id 1 known; any other id asks the (closed) port
    return decoder


def test_permissive_batch_has_null_and_the_reason_for_an_unknown_id():
    reg = _registry("PERMISSIVE")
    good = avro_values.frame(1, avro_values.encode(avro_values.parse_schema(json.dumps(ORDER)), VALUE))
    messages = [FakeMessage(good, 0), FakeMessage(avro_values.frame(99, b"\x00"), 1), FakeMessage(None, 2)]
    batch = records_to_registry_batch(messages, include_headers=False, reg=reg, decoder=_decoder(reg))
    assert batch.schema.names[-1] == "valueError"
    values = batch.column(batch.schema.get_field_index("value")).to_pylist()
    errors = batch.column(batch.schema.get_field_index("valueError")).to_pylist()
    assert values[0]["id"] == 7 and values[0]["status"] == "PAID" and values[0]["price"] == decimal.Decimal("12.34")
    assert values[1] is None and "schema id 99" in errors[1] and "unreachable" in errors[1]
    assert values[2] is None and errors[2] is None  # a tombstone is null, not an error
    assert errors[0] is None
    assert read_schema(False, reg, RegisteredSchema(1, "AVRO", json.dumps(ORDER))).names[-1] == "valueError"


KEY = {"type": "record", "name": "OrderId", "namespace": "shop", "fields": [{"name": "n", "type": "long"}]}


class KeyedMessage(FakeMessage):
    def __init__(self, key: bytes | None, value: bytes | None, offset: int):
        super().__init__(value, offset)
        self._key = key

    def key(self): return self._key


def test_keys_through_the_registry_get_a_typed_key_column_and_their_own_error_column():
    import dataclasses  # noqa: PLC0415
    options = {"bootstrap.servers": "h:1", "subscribe": "orders", "schema.registry.url": "http://127.0.0.1:9",
               "mode": "PERMISSIVE", "key.format": "avro"}
    opts = parse_read_options(options, Mode.BATCH)
    reg = dataclasses.replace(opts.registry, reader_schema=json.dumps(ORDER))
    key_reg = dataclasses.replace(opts.key_registry, reader_schema=json.dumps(KEY))
    assert key_reg.subject == "orders-key"
    key_decoder = ValueDecoder(key_reg)
    key_decoder.writers[5] = avro_values.parse_schema(json.dumps(KEY))
    value = avro_values.frame(1, avro_values.encode(avro_values.parse_schema(json.dumps(ORDER)), VALUE))
    key = avro_values.frame(5, avro_values.encode(avro_values.parse_schema(json.dumps(KEY)), {"n": 7}))
    messages = [KeyedMessage(key, value, 0), KeyedMessage(b"\x00\x01", value, 1)]
    batch = records_to_registry_batch(messages, include_headers=False, reg=reg, decoder=_decoder(reg), key_decoder=key_decoder)
    assert batch.schema.field("key").type == pa.struct([pa.field("n", pa.int64(), nullable=False)])
    assert batch.column(batch.schema.get_field_index("key")).to_pylist() == [{"n": 7}, None]
    key_errors = batch.column(batch.schema.get_field_index("keyError")).to_pylist()
    assert key_errors[0] is None and "fewer than the 5" in key_errors[1]
    assert batch.column(batch.schema.get_field_index("valueError")).to_pylist() == [None, None]


def test_failfast_batch_names_the_record_and_the_option():
    reg = _registry("FAILFAST")
    with pytest.raises(SchemaRegistryError, match=r'orders-0 offset 4: the value has 2 bytes.*"mode" to "PERMISSIVE"'):
        records_to_registry_batch([FakeMessage(b"\x00\x01", 4)], include_headers=False, reg=reg, decoder=_decoder(reg))
    assert "valueError" not in read_schema(False, reg, RegisteredSchema(1, "AVRO", json.dumps(ORDER))).names


PERSON = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": ["integer", "null"]}, "score": {"type": "number"},
    "born": {"type": "string", "format": "date"}, "tags": {"type": "array", "items": {"type": "string"}},
    "home": {"type": "object", "properties": {"city": {"type": "string"}}}},
    "required": ["name"]}


def test_json_schema_types_map_to_nullable_spark_fields():
    assert json_values.value_struct(json.dumps(PERSON)) == T.StructType([
        T.StructField("name", T.StringType()), T.StructField("age", T.LongType()), T.StructField("score", T.DoubleType()),
        T.StructField("born", T.DateType()), T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("home", T.StructType([T.StructField("city", T.StringType())]))])
    with pytest.raises(SchemaRegistryError, match=r"\$.x: .* has no Spark type"):
        json_values.spark_type({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}})


def test_json_values_decode_into_the_struct_and_encode_validated():
    kind = json_values.value_struct(json.dumps(PERSON))
    decoded = json_values.decode(b'{"name":"ada","born":"1815-12-10","tags":["x"],"extra":1}', kind)
    assert decoded == {"name": "ada", "age": None, "score": None, "born": dt.date(1815, 12, 10), "tags": ["x"], "home": None}
    assert json.loads(json_values.encode(PERSON, decoded)) == {"name": "ada", "born": "1815-12-10", "tags": ["x"]}
    with pytest.raises(SchemaRegistryError, match="'name' is a required property"):
        json_values.encode(PERSON, {"age": 3})
    with pytest.raises(SchemaRegistryError, match="not UTF-8 JSON"):
        json_values.decode(b"{nope", kind)


def test_plain_reads_import_without_fastavro_and_avro_use_names_the_missing_codec():
    """A Spark image without fastavro must still run plain pipelines; only registry Avro asks for it."""
    import subprocess
    import sys

    probe = (
        "import sys; sys.modules['fastavro'] = None\n"
        "import tinystream.spark.partitions, tinystream.spark.writer, tinystream.spark.source\n"
        "from tinystream.spark import avro_values\n"
        "from tinystream.spark.errors import SchemaRegistryError\n"
        "try:\n"
        "    avro_values.parse_schema('\"string\"')\n"
        "except SchemaRegistryError as exc:\n"
        "    print('refused:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "refused: registry-framed Avro needs fastavro" in done.stdout
