"""failOnDataLoss when offsets a query still needs were deleted (retention / DeleteRecords)."""

from __future__ import annotations

import pytest
from spark_helpers import create_topic, delete_records, produce, stream_reader

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def run(spark, broker, topic, checkpoint, name, fail_on_data_loss):
    df = stream_reader(spark, broker.bootstrap, topic, startingOffsets="earliest",
                       failOnDataLoss=str(fail_on_data_loss).lower())
    query = (df.selectExpr("offset").writeStream.format("parquet").option("path", checkpoint + "-out")
             .option("checkpointLocation", checkpoint).queryName(name).trigger(availableNow=True).start())
    query.awaitTermination(120)
    return query


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_deleted_offsets_under_a_query(spark, broker, topic_name, tmp_path, fail_on_data_loss):
    create_topic(broker.bootstrap, topic_name, 1)
    conf = broker.traits.producer_conf
    produce(broker.bootstrap, topic_name, [{"value": b"%d" % i} for i in range(100)], extra=conf)
    checkpoint = str(tmp_path / "ck")
    run(spark, broker, topic_name, checkpoint, "loss1", fail_on_data_loss)  # reads 0..99
    produce(broker.bootstrap, topic_name, [{"value": b"%d" % i} for i in range(100, 200)], extra=conf)
    reason = delete_records(broker.bootstrap, topic_name, 0, 150)  # 100..149 are gone before the query reads them
    if reason:
        pytest.skip(f"{broker.name}: {reason}")
    if fail_on_data_loss:
        with pytest.raises(Exception, match="failOnDataLoss") as info:
            run(spark, broker, topic_name, checkpoint, "loss2", True)
        assert "the log now starts at 150" in str(info.value)
        return
    run(spark, broker, topic_name, checkpoint, "loss2", False)
    offsets = sorted(r.offset for r in spark.read.parquet(checkpoint + "-out").collect())
    assert offsets == list(range(100)) + list(range(150, 200))
