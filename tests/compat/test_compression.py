"""Every compression codec, produced and consumed by every client.

The broker stores compressed batches as they came and serves them back
unchanged (DESIGN.md), so each client must be able to read what any other
client compressed. librdkafka turns codecs off silently when it dislikes the
advertised Produce range (KAFKA-NOTES.md), which the kcat rows catch: kcat
from Debian links an older librdkafka than confluent-kafka.
"""

from __future__ import annotations

import compat_helpers as ch
import pytest
from compat_helpers import client_params, require_client

pytestmark = pytest.mark.compat

N = 200


@pytest.mark.parametrize("codec", ch.CODECS)
@pytest.mark.parametrize("client", client_params())
def test_codec_roundtrip(client, codec, bootstrap, new_topic):
    require_client(client)
    topic = new_topic(partitions=2)
    records = ch.make_records(N, prefix=f"{client}-{codec}", pad_to=100)
    records = ch.produce(client, bootstrap, topic, records, compression=codec)
    ch.assert_records_match(records, ch.read_all(bootstrap, topic, min_count=N), context=f"{client}/{codec} stored")
    ch.assert_records_match(records, ch.consume(client, bootstrap, topic, N), context=f"{client}/{codec} read back")


@pytest.mark.parametrize("codec", ch.CODECS)
def test_codec_read_by_every_python_client(codec, bootstrap, new_topic):
    """One topic with a batch of each producer's compression; every consumer reads all of it."""
    topic = new_topic()
    records: list[ch.Rec] = []
    for producer in ch.PY_CLIENTS:
        records += ch.produce(producer, bootstrap, topic, ch.make_records(50, prefix=f"{producer}-{codec}"),
                              compression=codec)
    for consumer in ch.PY_CLIENTS:
        got = ch.consume(consumer, bootstrap, topic, len(records))
        ch.assert_records_match(records, got, context=f"{codec} -> {consumer}", one_partitioner=False)


def test_codecs_mixed_in_one_partition(bootstrap, new_topic):
    """Batches of all four codecs and uncompressed, interleaved in one partition."""
    topic = new_topic()
    records: list[ch.Rec] = []
    for round_ in range(2):
        for codec in (None, *ch.CODECS):
            records += ch.produce("confluent", bootstrap, topic,
                                  ch.make_records(20, prefix=f"mixed-{round_}-{codec}"), compression=codec)
    for consumer in ch.PY_CLIENTS:
        got = ch.consume(consumer, bootstrap, topic, len(records))
        ch.assert_records_match(records, got, context=f"mixed -> {consumer}")
        assert [g.offset for g in sorted(got, key=lambda g: g.offset)] == list(range(len(records)))
