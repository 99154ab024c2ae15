"""Registry-framed Protobuf values without Spark or a registry: the message-index framing (checked against
confluent-kafka's own encoder), Protobuf -> Spark types as from_protobuf maps them, decode/encode, and the
subject name strategies of the registry options."""

from __future__ import annotations

import base64
import decimal
import io

import pytest

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark")
pytest.importorskip("google.protobuf")
protoc = pytest.importorskip("grpc_tools.protoc")

from confluent_kafka.schema_registry.common.serde import SchemaId  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer  # noqa: E402
from google.protobuf import descriptor_pb2  # noqa: E402

from tinystream.spark import protobuf_values  # noqa: E402
from tinystream.spark.errors import InvalidOptionError, SchemaRegistryError  # noqa: E402
from tinystream.spark.options import Mode, parse_read_options, parse_write_options  # noqa: E402

ORDER_PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
enum Status { NEW = 0; PAID = 1; }
message Order {
  message Line { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  optional string note = 2;
  Status status = 3;
  repeated Line lines = 4;
  map<string, int32> stock = 5;
  bytes blob = 6;
  double price = 7;
  float ratio = 8;
  bool paid = 9;
  uint64 big = 10;
  uint32 small = 11;
  google.protobuf.Timestamp at = 12;
  repeated string tags = 13;
}
message Other { string name = 1; }
message Node { string name = 1; repeated Node children = 2; }
"""
ORDER_TYPE = ("struct<id:bigint,note:string,status:string,lines:array<struct<sku:string,qty:int>>,stock:map<string,int>,"
              "blob:binary,price:double,ratio:float,paid:boolean,big:decimal(20,0),small:bigint,"
              "at:struct<seconds:bigint,nanos:int>,tags:array<string>>")
VALUE = {"id": 7, "note": "gift", "status": "PAID", "lines": [{"sku": "a", "qty": 2}], "stock": {"a": 3},
         "blob": b"\x00\x01", "price": 1.5, "ratio": 0.25, "paid": True, "big": decimal.Decimal(2**64 - 1),
         "small": 2**32 - 1, "at": {"seconds": 1_700_000_000, "nanos": 5}, "tags": ["x", "y"]}


@pytest.fixture(scope="module")
def order_set(tmp_path_factory) -> str:
    """The FileDescriptorSet protoc builds (timestamp.proto left out: the runtime has it, as a registry leaves it)."""
    folder = tmp_path_factory.mktemp("proto")
    (folder / "order.proto").write_text(ORDER_PROTO)
    from tinystream.registry import protobuf_parse  # noqa: PLC0415 - protoc's include path of well-known files
    out = folder / "set.pb"
    assert protoc.main(["protoc", f"-I{folder}", f"-I{protobuf_parse._WELL_KNOWN}", f"--descriptor_set_out={out}",
                        "order.proto"]) == 0
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return protobuf_values.file_set([f.SerializeToString() for f in files])


@pytest.mark.parametrize("indexes", [[0], [1], [0, 0], [2, 0, 1], [300]])
def test_message_indexes_frame_as_confluent_kafka_writes_them(indexes):
    theirs = io.BytesIO()
    ProtobufSerializer._encode_varints(theirs, indexes, zigzag=True)
    assert protobuf_values.frame_indexes(indexes) == theirs.getvalue()
    assert protobuf_values.read_indexes(theirs.getvalue() + b"payload") == (indexes, b"payload")
    framed = SchemaId("PROTOBUF", 9, message_indexes=indexes).id_to_bytes() + b"p"
    assert protobuf_values.read_indexes(framed[5:]) == (indexes, b"p")


def test_truncated_message_indexes_are_refused():
    with pytest.raises(SchemaRegistryError, match="truncated varint"):
        protobuf_values.read_indexes(b"\x04\x80")


def test_message_types_map_as_from_protobuf_does(order_set):
    assert protobuf_values.spark_type(protobuf_values.load(order_set, None)).simpleString() == ORDER_TYPE
    assert protobuf_values.spark_type(protobuf_values.load(order_set, "shop.Other")).simpleString() == "struct<name:string>"
    with pytest.raises(SchemaRegistryError, match="recursive"):
        protobuf_values.spark_type(protobuf_values.load(order_set, "shop.Node"))
    with pytest.raises(SchemaRegistryError, match="no message 'shop.Nope'"):
        protobuf_values.load(order_set, "shop.Nope")


def test_message_names_and_indexes_point_at_each_other(order_set):
    main = protobuf_values.main_file(order_set)
    for name, indexes in (("shop.Order", [0]), ("shop.Order.Line", [0, 0]), ("shop.Other", [1]), ("shop.Node", [2])):
        assert protobuf_values.message_indexes(main, name) == indexes
        assert protobuf_values.message_name(main, indexes) == name
    with pytest.raises(SchemaRegistryError, match="names no message"):
        protobuf_values.message_name(main, [5])
    assert protobuf_values.file_proto(base64.b64encode(main.SerializeToString()).decode()) == main


def test_values_roundtrip_and_defaults_follow_presence(order_set):
    order = protobuf_values.load(order_set, None)
    assert protobuf_values.decode(order, protobuf_values.encode(order, VALUE)) == VALUE
    as_arrow = {**VALUE, "stock": list(VALUE["stock"].items())}  # a Spark row's map arrives as (key, value) pairs
    assert protobuf_values.decode(order, protobuf_values.encode(order, as_arrow)) == VALUE
    empty = protobuf_values.decode(order, b"")
    assert empty["note"] is None and empty["at"] is None  # presence: optional scalar, message
    assert (empty["id"], empty["status"], empty["tags"], empty["stock"]) == (0, "NEW", [], {})  # proto3 defaults


def test_encode_refuses_what_the_message_does_not_take(order_set):
    order = protobuf_values.load(order_set, None)
    with pytest.raises(SchemaRegistryError, match="no field 'colour'"):
        protobuf_values.encode(order, {"id": 1, "colour": "red"})
    with pytest.raises(SchemaRegistryError, match="not a value of the enum shop.Status"):
        protobuf_values.encode(order, {"status": "LOST"})
    with pytest.raises(SchemaRegistryError, match="does not match"):
        protobuf_values.encode(order, {"id": "seven"})
    with pytest.raises(SchemaRegistryError, match="does not decode as shop.Order"):
        protobuf_values.decode(order, b"\x08")


BASE = {"bootstrap.servers": "b:9092", "schema.registry.url": "http://r:8081"}


@pytest.mark.parametrize("strategy, subject", [
    (None, "orders-value"),
    ("TopicNameStrategy", "orders-value"),
    ("RecordNameStrategy", "shop.Order"),
    ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "orders-shop.Order"),
])
def test_subject_name_strategies_name_the_subject(strategy, subject):
    options = {**BASE, "topic": "orders", "value.record.name": "shop.Order"}
    if strategy:
        options["value.subject.name.strategy"] = strategy
    assert parse_write_options(options).registry.subject == subject
    read = parse_read_options({**BASE, "subscribe": "orders", **{k: v for k, v in options.items() if k != "topic"}}, Mode.BATCH)
    assert read.registry.subject == subject and read.registry.record_name == "shop.Order"


def test_bad_strategy_options_are_refused_naming_why():
    with pytest.raises(InvalidOptionError, match="must be one of TopicNameStrategy"):
        parse_write_options({**BASE, "topic": "t", "value.subject.name.strategy": "Nope"})
    with pytest.raises(InvalidOptionError, match='RecordNameStrategy needs "value.record.name"'):
        parse_write_options({**BASE, "topic": "t", "value.subject.name.strategy": "RecordNameStrategy"})
    with pytest.raises(InvalidOptionError, match="conflict"):
        parse_write_options({**BASE, "topic": "t", "value.subject": "s", "value.subject.name.strategy": "RecordNameStrategy"})
    with pytest.raises(InvalidOptionError, match='"value.record.name" needs "schema.registry.url"'):
        parse_write_options({"bootstrap.servers": "b:9092", "topic": "t", "value.record.name": "x"})
    assert parse_write_options({**BASE, "topic": "t", "value.format": "protobuf"}).registry.value_format == "protobuf"


def test_key_options_turn_on_registry_keys_with_their_own_subject():
    assert parse_write_options({**BASE, "topic": "t"}).key_registry is None  # keys stay binary by default
    write = parse_write_options({**BASE, "topic": "t", "key.format": "avro", "key.schema": '"string"',
                                 "auto.register.schemas": "true", "value.schema": '"string"'})
    assert (write.key_registry.subject, write.key_registry.part, write.key_registry.value_schema) == ("t-key", "key", '"string"')
    read = parse_read_options({**BASE, "subscribe": "t", "key.subject.name.strategy": "RecordNameStrategy",
                               "key.record.name": "shop.Id"}, Mode.BATCH)
    assert (read.key_registry.subject, read.registry.subject) == ("shop.Id", "t-value")
    with pytest.raises(InvalidOptionError, match='"key.schema" are for writes only'):
        parse_read_options({**BASE, "subscribe": "t", "key.schema": '"string"'}, Mode.BATCH)
    with pytest.raises(InvalidOptionError, match='option "key.format" must be one of'):
        parse_write_options({**BASE, "topic": "t", "key.format": "xml"})
    with pytest.raises(InvalidOptionError, match='"key.format" needs "schema.registry.url"'):
        parse_write_options({"bootstrap.servers": "b:9092", "topic": "t", "key.format": "avro"})
