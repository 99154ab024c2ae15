"""The connector against a real broker and our real schema registry, with confluent-kafka's Avro serializers
as the independent party: what AvroSerializer wrote reads as typed columns; what the connector wrote,
AvroDeserializer reads back; an unknown schema id fails the query (FAILFAST) or reads as null with the
reason (PERMISSIVE)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

pytest.importorskip("fastavro")
pytest.importorskip("aiokafka")  # the registry's _schemas topic
pytest.importorskip("authlib")  # confluent-kafka[schemaregistry]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from spark_helpers import batch_reader, create_topic, stream_reader  # noqa: E402

from tinystream.registry.app import RegistryOptions  # noqa: E402
from tinystream.testing.consumers import read_deserialized  # noqa: E402
from tinystream.testing.registry import RegistryThread  # noqa: E402

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
]}
ORDERS = [
    {"id": 1, "note": None, "status": "NEW", "lines": [{"sku": "a", "qty": 1}], "day": dt.date(2026, 11, 27),
     "price": decimal.Decimal("1.50")},
    {"id": 2, "note": "gift", "status": "PAID", "lines": [], "day": dt.date(2026, 11, 28),
     "price": decimal.Decimal("20.00")},
]


@pytest.fixture(scope="module")
def registry(broker):
    with RegistryThread(RegistryOptions(bootstrap=broker.bootstrap, port=0, topic=f"_schemas_{uuid.uuid4().hex[:8]}")) as r:
        yield r.url


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def _row_dict(row) -> dict:
    return row.asDict(recursive=True)


def test_avro_serializer_values_read_as_typed_columns_and_bad_ids_fail_or_read_as_null(spark, broker, topic_name, registry):
    create_topic(broker.bootstrap, topic_name)
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(ORDER))
    context = SerializationContext(topic_name, MessageField.VALUE)
    unknown_id = b"\x00\x00\x0f\x42\x3f" + b"\x02"  # schema id 999999, never registered
    _produce(broker.bootstrap, topic_name, [serializer(v, context) for v in ORDERS] + [unknown_id])
    options = {"schema.registry.url": registry, "endingOffsets": json.dumps({topic_name: {"0": 2}})}

    df = batch_reader(spark, broker.bootstrap, topic_name, **options)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,note:string,status:string,lines:array<struct<sku:string,qty:int>>,day:date,price:decimal(9,2)>")
    rows = df.select("value.*").orderBy("id").collect()
    assert [_row_dict(r) for r in rows] == ORDERS
    assert df.where("value.status = 'PAID'").select("value.lines").first()[0] == []  # typed columns filter in SQL

    failfast = batch_reader(spark, broker.bootstrap, topic_name, **{"schema.registry.url": registry})
    with pytest.raises(Exception, match="schema id 999999") as failed:
        failfast.collect()
    assert '"mode" to "PERMISSIVE"' in str(failed.value)

    permissive = batch_reader(spark, broker.bootstrap, topic_name, **{"schema.registry.url": registry, "mode": "PERMISSIVE"})
    got = sorted(permissive.select("offset", "value.id", "valueError").collect())
    assert [(r[0], r[1]) for r in got] == [(0, 1), (1, 2), (2, None)]
    assert got[0][2] is None and "schema id 999999" in got[2][2] and "HTTP 404" in got[2][2]


PERSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}, "born": {"type": "string", "format": "date"},
    "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name"]}
PEOPLE = [{"name": "ada", "age": 36, "born": "1815-12-10", "tags": ["math"]}, {"name": "alan", "tags": []}]


def test_json_schema_values_read_typed_and_written_for_json_deserializer(spark, broker, topic_name, registry):
    source, target = topic_name, topic_name + "-out"
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, target)
    serializer = JSONSerializer(json.dumps(PERSON), SchemaRegistryClient({"url": registry}))
    _produce(broker.bootstrap, source, [serializer(p, SerializationContext(source, MessageField.VALUE)) for p in PEOPLE])

    df = batch_reader(spark, broker.bootstrap, source, **{"schema.registry.url": registry})
    assert df.schema["value"].dataType.simpleString() == "struct<name:string,age:bigint,born:date,tags:array<string>>"
    rows = sorted((_row_dict(r) for r in df.select("value.*").collect()), key=lambda r: r["name"])
    assert rows == [{"name": "ada", "age": 36, "born": dt.date(1815, 12, 10), "tags": ["math"]},
                    {"name": "alan", "age": None, "born": None, "tags": []}]

    (df.select("value").write.format("tinystream").option("bootstrap.servers", broker.bootstrap).option("topic", target)
       .option("schema.registry.url", registry).option("value.format", "json").option("auto.register.schemas", "true")
       .option("value.schema", json.dumps(PERSON)).mode("append").save())
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry}))
    got = read_deserialized(broker.bootstrap, target, deserializer, len(PEOPLE))
    assert sorted(got, key=lambda p: p["name"]) == PEOPLE


def test_a_streaming_read_decodes_avro_values_too(spark, broker, topic_name, registry):
    create_topic(broker.bootstrap, topic_name)
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(ORDER))
    context = SerializationContext(topic_name, MessageField.VALUE)
    _produce(broker.bootstrap, topic_name, [serializer(v, context) for v in ORDERS])
    query = (stream_reader(spark, broker.bootstrap, topic_name, startingOffsets="earliest",
                           **{"schema.registry.url": registry}).select("value.*")
             .writeStream.format("memory").queryName("registry_stream").trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert [_row_dict(r) for r in spark.sql("select * from registry_stream order by id").collect()] == ORDERS


def test_connector_writes_what_avro_deserializer_reads(spark, broker, topic_name, registry):
    create_topic(broker.bootstrap, topic_name)
    ddl = ("id bigint, note string, status string, lines array<struct<sku: string, qty: int>>, day date, "
           "price decimal(9,2)")
    df = spark.createDataFrame([(o,) for o in ORDERS], f"value struct<{ddl}>")
    (df.write.format("tinystream").option("bootstrap.servers", broker.bootstrap).option("topic", topic_name)
       .option("schema.registry.url", registry).option("auto.register.schemas", "true")
       .option("value.schema", json.dumps(ORDER)).mode("append").save())

    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    got = read_deserialized(broker.bootstrap, topic_name, deserializer, len(ORDERS))
    assert sorted(got, key=lambda v: v["id"]) == ORDERS
    # and the connector reads its own writes through the subject it registered
    back = batch_reader(spark, broker.bootstrap, topic_name, **{"schema.registry.url": registry})
    assert [_row_dict(r) for r in back.select("value.*").orderBy("id").collect()] == ORDERS


def test_registry_client_sends_basic_auth_and_a_refusal_names_the_status(broker, tmp_path):
    """schema.registry.basic.auth.user.info reaches a registry that requires it; wrong or no credentials get 401."""
    from tinystream.scram_users import UserStore  # noqa: PLC0415
    from tinystream.spark.errors import SchemaRegistryError  # noqa: PLC0415
    from tinystream.spark.registry_client import RegistryClient  # noqa: PLC0415

    store = UserStore()
    store.set_password("spark", "s3cret")
    store.save(tmp_path / "users.json")
    options = RegistryOptions(bootstrap=broker.bootstrap, port=0, topic=f"_schemas_{uuid.uuid4().hex[:8]}",
                              users_file=tmp_path / "users.json")
    with RegistryThread(options) as running:
        client = RegistryClient(running.url, "spark:s3cret")
        schema_id = client.register("orders-value", json.dumps(ORDER))
        assert client.latest("orders-value").schema_id == schema_id
        assert json.loads(client.by_id(schema_id).schema)["name"] == "Order"
        for user_info in ("spark:wrong", None):
            with pytest.raises(SchemaRegistryError, match="HTTP 401"):
                RegistryClient(running.url, user_info).latest("orders-value")
        with pytest.raises(SchemaRegistryError, match="HTTP 404, error_code 40401"):
            client.latest("nobody-value")
