"""Protobuf values through a real broker and our real schema registry, with confluent-kafka's
ProtobufSerializer and ProtobufDeserializer as the independent party: what the serializer wrote reads as a
typed `value` struct; what the connector wrote (TopicRecordNameStrategy subject), the deserializer reads."""

from __future__ import annotations

import json
import uuid

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

pytest.importorskip("aiokafka")  # the registry's _schemas topic
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]
protoc = pytest.importorskip("grpc_tools.protoc")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402
from spark_helpers import batch_reader, create_topic  # noqa: E402

from tinystream.registry import protobuf_parse  # noqa: E402
from tinystream.registry.app import RegistryOptions  # noqa: E402
from tinystream.testing.consumers import read_deserialized  # noqa: E402
from tinystream.testing.registry import RegistryThread  # noqa: E402

TAG = uuid.uuid4().hex[:8]
ORDER_PROTO = f"""syntax = "proto3";
package shop{TAG};
enum Status {{ NEW = 0; PAID = 1; }}
message Note {{ string text = 1; }}
message Order {{
  message Line {{ string sku = 1; int32 qty = 2; }}
  int64 id = 1;
  optional string note = 2;
  Status status = 3;
  repeated Line lines = 4;
  map<string, int32> stock = 5;
  double price = 6;
}}
"""
ROWS = [
    {"id": 1, "note": None, "status": "NEW", "lines": [{"sku": "a", "qty": 1}], "stock": {"a": 3}, "price": 1.5},
    {"id": 2, "note": "gift", "status": "PAID", "lines": [], "stock": {}, "price": 20.0},
]
DDL = ("id bigint, note string, status string, lines array<struct<sku: string, qty: int>>, stock map<string, int>, "
       "price double")


@pytest.fixture(scope="module")
def registry(broker):
    with RegistryThread(RegistryOptions(bootstrap=broker.bootstrap, port=0, topic=f"_schemas_{uuid.uuid4().hex[:8]}")) as r:
        yield r.url


@pytest.fixture(scope="module")
def order_class(tmp_path_factory):
    """The generated-style class of shop.Order, built from protoc's descriptors in a pool of its own."""
    folder = tmp_path_factory.mktemp("proto")
    (folder / f"order{TAG}.proto").write_text(ORDER_PROTO)
    out = folder / "set.pb"
    assert protoc.main(["protoc", f"-I{folder}", f"-I{protobuf_parse._WELL_KNOWN}", "--include_imports",
                        f"--descriptor_set_out={out}", f"order{TAG}.proto"]) == 0
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop{TAG}.Order"))


def _message(order_class, row: dict):
    value = order_class(id=row["id"], status=row["status"], price=row["price"])
    if row["note"] is not None:
        value.note = row["note"]
    for line in row["lines"]:
        value.lines.add(sku=line["sku"], qty=line["qty"])
    value.stock.update(row["stock"])
    return value


def test_protobuf_serializer_values_read_as_a_typed_struct(spark, broker, topic_name, registry, order_class):
    create_topic(broker.bootstrap, topic_name)
    serializer = ProtobufSerializer(order_class, SchemaRegistryClient({"url": registry}), {"use.deprecated.format": False})
    context = SerializationContext(topic_name, MessageField.VALUE)
    framed = [serializer(_message(order_class, row), context) for row in ROWS]
    assert framed[0][5:7] == b"\x02\x02"  # message indexes [1]: Order is the file's second message
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for value in framed:
        producer.produce(topic_name, value=value)
    assert producer.flush(30) == 0

    options = {"schema.registry.url": registry, "value.record.name": f"shop{TAG}.Order"}
    df = batch_reader(spark, broker.bootstrap, topic_name, **options)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,note:string,status:string,lines:array<struct<sku:string,qty:int>>,stock:map<string,int>,"
        "price:double>")
    assert [r.asDict(recursive=True) for r in df.select("value.*").orderBy("id").collect()] == ROWS
    assert df.where("value.status = 'PAID'").select("value.note").first()[0] == "gift"

    # without value.record.name the column is the file's first message (Note): the values say they are not
    wrong = batch_reader(spark, broker.bootstrap, topic_name, **{"schema.registry.url": registry, "mode": "PERMISSIVE"})
    errors = [r[0] for r in wrong.select("valueError").collect()]
    assert len(errors) == 2 and all(f"is a shop{TAG}.Order message, the column's is shop{TAG}.Note" in e for e in errors)


def test_connector_writes_what_protobuf_deserializer_reads(spark, broker, topic_name, registry, order_class):
    create_topic(broker.bootstrap, topic_name)
    df = spark.createDataFrame([(row,) for row in ROWS], f"value struct<{DDL}>")
    (df.write.format("tinystream").option("bootstrap.servers", broker.bootstrap).option("topic", topic_name)
       .option("schema.registry.url", registry).option("value.format", "protobuf")
       .option("value.subject.name.strategy", "TopicRecordNameStrategy").option("value.record.name", f"shop{TAG}.Order")
       .option("auto.register.schemas", "true").option("value.schema", ORDER_PROTO).mode("append").save())

    client = SchemaRegistryClient({"url": registry})
    assert f"{topic_name}-shop{TAG}.Order" in client.get_subjects()
    deserializer = ProtobufDeserializer(order_class, {"use.deprecated.format": False}, client)
    got = read_deserialized(broker.bootstrap, topic_name, deserializer, len(ROWS))
    assert sorted(got, key=lambda m: m.id) == [_message(order_class, row) for row in ROWS]
    by_id = {m.id: m for m in got}
    assert not by_id[1].HasField("note") and by_id[2].HasField("note")  # a null column leaves the optional unset
    # and the connector reads its own writes through the same strategy
    back = batch_reader(spark, broker.bootstrap, topic_name, **{
        "schema.registry.url": registry, "value.subject.name.strategy": "TopicRecordNameStrategy",
        "value.record.name": f"shop{TAG}.Order"})
    assert [r.asDict(recursive=True) for r in back.select("value.*").orderBy("id").collect()] == ROWS


KEY = {"type": "record", "name": "OrderId", "namespace": "shop", "fields": [{"name": "n", "type": "long"}]}


def test_avro_keys_read_as_a_typed_key_and_written_for_avro_deserializer(spark, broker, topic_name, registry, order_class):
    from confluent_kafka import Consumer  # noqa: PLC0415
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: PLC0415
    source, target = topic_name, topic_name + "-out"
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, target)
    client = SchemaRegistryClient({"url": registry})
    keys = AvroSerializer(client, json.dumps(KEY))
    values = ProtobufSerializer(order_class, client, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for row in ROWS:
        producer.produce(source, key=keys({"n": row["id"]}, SerializationContext(source, MessageField.KEY)),
                         value=values(_message(order_class, row), SerializationContext(source, MessageField.VALUE)))
    assert producer.flush(30) == 0

    df = batch_reader(spark, broker.bootstrap, source, **{
        "schema.registry.url": registry, "value.record.name": f"shop{TAG}.Order", "key.format": "avro"})
    assert df.schema["key"].dataType.simpleString() == "struct<n:bigint>"
    assert sorted((r["key"]["n"], r["value"]["id"]) for r in df.select("key", "value").collect()) == [(1, 1), (2, 2)]

    (df.select("key", "value").write.format("tinystream").option("bootstrap.servers", broker.bootstrap)
       .option("topic", target).option("schema.registry.url", registry).option("value.record.name", f"shop{TAG}.Order")
       .option("key.format", "avro").option("auto.register.schemas", "true").option("key.schema", json.dumps(KEY))
       .option("value.schema", ORDER_PROTO).option("value.format", "protobuf").mode("append").save())
    assert client.get_latest_version(f"{target}-key").schema.schema_type == "AVRO"
    key_deserializer = AvroDeserializer(client)
    value_deserializer = ProtobufDeserializer(order_class, {"use.deprecated.format": False}, client)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([target])
    got = []
    try:
        for _ in range(120):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append((key_deserializer(message.key(), SerializationContext(target, MessageField.KEY)),
                            value_deserializer(message.value(), SerializationContext(target, MessageField.VALUE)).id))
            if len(got) == len(ROWS):
                break
    finally:
        consumer.close()
    assert sorted(got, key=lambda kv: kv[1]) == [({"n": 1}, 1), ({"n": 2}, 2)]
