"""Records near the size limit (message.max.bytes, 1048588 by default).

The limit applies to a whole record batch (61 bytes of batch header plus
the record's own framing), so one ~1,040,000-byte value fits and a
1,100,000-byte value must be refused with MESSAGE_TOO_LARGE (error 10) --
by the broker, not the client: each producer's own request limit is raised
above the broker's. On the way back, a consumer whose per-partition fetch
size is smaller than the batch still gets it whole (KIP-74).
"""

from __future__ import annotations

import re

import compat_helpers as ch
import pytest
from compat_helpers import client_params, require_client

pytestmark = pytest.mark.compat

FITS = 1_040_000
TOO_BIG = 1_100_000
CLIENT_LIMIT = 4_000_000

PRODUCER_LIMIT = {
    "kafka-python": {"max_request_size": CLIENT_LIMIT, "linger_ms": 0},
    "aiokafka": {"max_request_size": CLIENT_LIMIT, "linger_ms": 0},
    "confluent": {"message.max.bytes": CLIENT_LIMIT, "linger.ms": 0},
    "kcat": {"message.max.bytes": CLIENT_LIMIT},
    "java": {"max.request.size": CLIENT_LIMIT},
}
# Consumers: defaults, except librdkafka's receive buffer, which must hold a whole response.
CONSUMER_CONF = {
    "kafka-python": {"max_partition_fetch_bytes": 65536},
    "aiokafka": {"max_partition_fetch_bytes": 65536},
    "confluent": {"max.partition.fetch.bytes": 65536},
    "kcat": {},
    "java": {"max.partition.fetch.bytes": "65536"},
}


def _big(i: int, size: int) -> ch.Rec:
    head = f"big-{i}-".encode()
    return ch.Rec(value=head + b"x" * (size - len(head)), key=f"k{i}".encode(), headers=(("n", str(i).encode()),))


@pytest.mark.parametrize("client", client_params(ch.PY_CLIENTS + ("java",)))
def test_record_just_under_limit(client, bootstrap, new_topic):
    """kcat is left out: its line-based input cannot carry a 1 MB line through its default buffer."""
    require_client(client)
    topic = new_topic()
    records = [_big(0, FITS), ch.Rec(value=b"small-after"), _big(1, FITS - 1000)]
    records = ch.produce(client, bootstrap, topic, records, config=PRODUCER_LIMIT[client])
    stored = ch.read_all(bootstrap, topic, min_count=3)
    ch.assert_records_match(records, stored, context=f"{client} large stored")
    got = ch.consume(client, bootstrap, topic, 3, config=CONSUMER_CONF[client])
    ch.assert_records_match(records, got, context=f"{client} large read back with a 64 KiB partition fetch size")


@pytest.mark.parametrize("client", ch.PY_CLIENTS)
def test_record_over_limit_is_refused_by_the_broker(client, bootstrap, new_topic):
    topic = new_topic()
    with pytest.raises(Exception) as info:
        ch.produce(client, bootstrap, topic, [_big(0, TOO_BIG)],
                   config={**PRODUCER_LIMIT[client], **_no_retries(client)}, timeout=30)
    text = f"{type(info.value).__name__}: {info.value}"
    assert re.search(r"size.?too.?large|too large", text, re.IGNORECASE), text
    # Nothing was stored, and the topic still takes normal records.
    ch.produce(client, bootstrap, topic, [ch.Rec(value=b"after")])
    (only,) = ch.read_all(bootstrap, topic, min_count=1)
    assert only.value == b"after"


def _no_retries(client: str) -> dict:
    if client == "confluent":
        return {"message.timeout.ms": 20000}
    if client == "aiokafka":
        return {"enable_idempotence": False}
    return {"enable_idempotence": False, "retries": 0}


def test_record_near_limit_compressed(bootstrap, new_topic):
    """A compressible value larger than the limit fits once compressed (the check is on the batch)."""
    topic = new_topic()
    value = b"z" * 3_000_000
    ch.produce("confluent", bootstrap, topic, [ch.Rec(value=value)], compression="zstd",
               config=PRODUCER_LIMIT["confluent"])
    (got,) = ch.read_all(bootstrap, topic, min_count=1)
    assert got.value == value
