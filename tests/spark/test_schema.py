"""Arrow batches against the exact schema PySpark checks, and the sink's schema check (no Spark session)."""

from __future__ import annotations

import datetime as dt

import pytest

pytestmark = pytest.mark.spark

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402

from tinystream.spark.errors import InvalidOptionError  # noqa: E402
from tinystream.spark.options import WriteOptions  # noqa: E402
from tinystream.spark.schema import arrow_schema, records_to_batch, spark_schema  # noqa: E402
from tinystream.spark.writer import check_write_schema  # noqa: E402


class FakeMessage:
    """The confluent_kafka.Message accessors the connector uses."""

    def __init__(self, offset, *, key=b"k", value=b"v", ts=(1, 1_700_000_000_123), headers=None):
        self._offset, self._key, self._value, self._ts, self._headers = offset, key, value, ts, headers

    def key(self): return self._key
    def value(self): return self._value
    def topic(self): return "events"
    def partition(self): return 2
    def offset(self): return self._offset
    def timestamp(self): return self._ts
    def headers(self): return self._headers


@pytest.mark.parametrize("headers", [False, True])
def test_batch_schema_is_what_pyspark_expects(headers):
    expected = to_arrow_schema(spark_schema(headers), timezone="UTC")
    batch = records_to_batch([FakeMessage(0)], include_headers=headers)
    assert batch.schema.equals(expected)
    assert arrow_schema(headers).equals(expected)


def test_batch_values():
    msgs = [
        FakeMessage(7, headers=[("a", b"1"), ("b", None)]),
        FakeMessage(8, key=None, value=None, ts=(2, 1_700_000_000_000), headers=None),
        FakeMessage(9, ts=(0, -1)),
    ]
    rows = records_to_batch(msgs, include_headers=True).to_pylist()
    assert rows[0]["offset"] == 7 and rows[0]["partition"] == 2 and rows[0]["topic"] == "events"
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert rows[0]["timestampType"] == 0  # CreateTime
    assert rows[0]["headers"] == [{"key": "a", "value": b"1"}, {"key": "b", "value": None}]
    assert rows[1]["key"] is None and rows[1]["value"] is None and rows[1]["timestampType"] == 1  # LogAppendTime
    assert rows[1]["headers"] == []
    assert rows[2]["timestamp"] is None and rows[2]["timestampType"] == -1


def _schema(*fields):
    return T.StructType([T.StructField(n, t) for n, t in fields])


HEADERS = T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))


def test_sink_schema_accepts_sparks_kafka_columns():
    schema = _schema(("key", T.StringType()), ("value", T.BinaryType()), ("topic", T.StringType()),
                     ("partition", T.IntegerType()), ("headers", HEADERS))
    check_write_schema(schema, WriteOptions("h:1", None))


@pytest.mark.parametrize(("fields", "topic", "match"), [
    ([("key", T.StringType())], "t", 'required attribute "value"'),
    ([("value", T.LongType())], "t", "value attribute type must be a string or binary"),
    ([("value", T.StringType())], None, "topic option required"),
    ([("value", T.StringType()), ("topic", T.IntegerType())], None, "topic attribute type"),
    ([("value", T.StringType()), ("partition", T.LongType())], "t", "partition attribute type"),
    ([("value", T.StringType()), ("headers", T.ArrayType(T.StringType()))], "t", "headers attribute type"),
])
def test_sink_schema_refusals(fields, topic, match):
    with pytest.raises(InvalidOptionError, match=match):
        check_write_schema(_schema(*fields), WriteOptions("h:1", topic))
