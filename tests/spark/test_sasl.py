"""The Spark connector on a SASL_SSL listener: kafka.* options carry the login (issue 12)."""

from __future__ import annotations

import pytest

from tinystream.testing.broker import BrokerThread, sasl_ssl_settings

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    pytest.importorskip("trustme")
    settings, truststore = sasl_ssl_settings(tmp_path_factory.mktemp("spark-sasl"), users={"spark": "sp4rk"},
                                             **{"auto.create.topics.enable": True})
    with BrokerThread(settings) as broker:
        yield broker, truststore


def login(truststore, password: str) -> dict[str, str]:
    return {"kafka.security.protocol": "SASL_SSL", "kafka.ssl.ca.location": str(truststore),
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "spark", "kafka.sasl.password": password}


def test_batch_write_and_read_over_scram(spark, secured):
    broker, truststore = secured
    options = {"bootstrap.servers": broker.bootstrap, **login(truststore, "sp4rk")}
    df = spark.range(30).selectExpr("cast(id as string) as key", "cast(concat('v', id) as binary) as value")
    df.write.format("tinystream").options(topic="secured", **options).mode("append").save()
    rows = spark.read.format("tinystream").options(subscribe="secured", **options).load().collect()
    assert sorted(r.key.decode() for r in rows) == sorted(str(i) for i in range(30))


def test_a_wrong_password_fails_the_job_with_the_reason(spark, secured):
    broker, truststore = secured
    options = {"bootstrap.servers": broker.bootstrap, **login(truststore, "wrong")}
    with pytest.raises(Exception, match="(?i)authentication|timed out|transport"):
        spark.read.format("tinystream").options(subscribe="secured", **options).load().collect()
