"""controller_mutation_rate (KIP-599): the token bucket and the strict / permissive modes, then on a broker.

The pure parts take times as numbers; the broker test sends CreateTopics,
CreatePartitions and DeleteTopics over a real socket at a strict and a
permissive version.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.protocol.codec import millis, to_millis
from tinystream.broker.quotas.book import QuotaBook
from tinystream.broker.quotas.entities import CLIENT_ID, CONTROLLER_MUTATION_RATE, Entity
from tinystream.broker.quotas.mutation import ControllerMutationQuota
from tinystream.broker.quotas.token_bucket import TokenBucket
from tinystream.testing.broker import BrokerThread, create_topics_request, entity, request, test_settings
from tinystream.testing.broker import alter_client_quotas_request as alter


def test_a_bucket_starts_full_at_quota_times_the_whole_window():
    bucket = TokenBucket(11, 1000)
    assert bucket.available(2.0, 0) == pytest.approx(22.0)  # Kafka's burst: samples x window x quota


def test_the_crossing_mutation_is_taken_and_the_throttle_is_the_time_to_refill_to_zero():
    bucket = TokenBucket(11, 1000)
    bucket.record(30, 1.0, 0)  # 11 tokens, 30 taken: -19
    assert bucket.available(1.0, 0) == pytest.approx(-19.0)
    assert bucket.throttle_ms(1.0, 0) == 19_000
    assert bucket.throttle_ms(1.0, 9_000) == 10_000
    assert bucket.throttle_ms(1.0, 19_000) == 0
    assert bucket.available(1.0, 100_000) == pytest.approx(11.0)  # never above the burst


@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 50)), max_size=50), st.floats(0.1, 100))
def test_tokens_never_exceed_the_burst_and_throttle_is_zero_exactly_when_tokens_are_not_negative(steps, quota):
    bucket = TokenBucket(5, 1000)
    now = 0
    for gap, n in steps:
        now += gap
        bucket.record(n, quota, now)
        tokens = bucket.available(quota, now)
        assert tokens <= quota * 5 + 1e-9
        assert (bucket.throttle_ms(quota, now) > 0) == (tokens < 0 and round(-tokens / quota * 1000) > 0)


def mutation_quota(rate: float) -> ControllerMutationQuota:
    q = ControllerMutationQuota(samples=11, window_ms=1000)
    q.use(QuotaBook().alter([(Entity.of([(CLIENT_ID, "ops")]), [(CONTROLLER_MUTATION_RATE, rate, False)])]))
    return q


def test_strict_refuses_only_after_the_bucket_went_below_zero():
    q = mutation_quota(1.0)
    assert q.exceeded_ms("u", "ops", 0) == 0
    assert q.spend("u", "ops", 20, 0) == 9000  # accepted, crossing: 11 - 20 = -9
    assert q.exceeded_ms("u", "ops", 1) == 8999  # the next is refused
    assert q.exceeded_ms("u", "ops", 9000) == 0  # refilled to zero: allowed again
    assert q.exceeded_ms("u", "other", 1) == 0 and q.spend("u", "other", 1000, 1) == 0  # no quota


@pytest.fixture
def broker(tmp_path):
    broker = BrokerThread(test_settings(tmp_path))
    broker.start()
    yield broker
    broker.stop()


def create_partitions_request(name: str, count: int, version: int) -> object:
    return request(37, version, topics=(entity(37, version, "CreatePartitionsTopic", name=name, count=count,
                                               assignments=None),), timeout=millis(5000), validate_only=False)


def delete_topics_request(names: list[str], version: int) -> object:
    return request(20, version, topic_names=tuple(names), timeout=millis(5000))


def test_strict_versions_refuse_with_throttling_quota_exceeded_and_older_ones_are_throttled(broker):
    async def once(client_id: str, body: object) -> object:
        """A connection per request: a throttled answer mutes its connection for the throttle (Kafka's)."""
        client = await KafkaClient.connect(broker.info.host, broker.info.port, client_id=client_id)
        try:
            return await client.request(body)
        finally:
            await client.close()

    async def session(_b):
        set_ = await once("admin", alter(([("client-id", "ops")], [("controller_mutation_rate", 0.1, False)]),
                                         ([("client-id", "old")], [("controller_mutation_rate", 0.1, False)])))
        assert [e.error_code for e in set_.entries] == [ErrorCode.none] * 2
        # burst 0.1 x 11 s = 1.1 partitions: the first 8-partition topic crosses it and is still created
        first = await once("ops", create_topics_request([("m-1", 8, 1)], version=7))
        second = await once("ops", create_topics_request([("m-2", 1, 1), ("m-3", 1, 1)], version=7))
        grow = await once("ops", create_partitions_request("m-1", 10, version=3))
        delete = await once("ops", delete_topics_request(["m-1"], version=5))
        # old versions (CreateTopics v5): never refused, told to slow down
        old_first = await once("old", create_topics_request([("o-1", 8, 1)], version=5))
        old_second = await once("old", create_topics_request([("o-2", 1, 1)], version=5))
        other = await once("admin", create_topics_request([("free-1", 50, 1)], version=7))
        return first, second, grow, delete, old_first, old_second, other

    first, second, grow, delete, old_first, old_second, other = broker.call(session)
    assert first.topics[0].error_code == ErrorCode.none
    assert to_millis(first.throttle_time) == 0  # strict: the crossing request is not throttled (Kafka)
    assert [t.error_code for t in second.topics] == [ErrorCode.throttling_quota_exceeded] * 2
    assert second.topics[0].error_message == "The throttling quota has been exceeded."
    assert 60_000 < to_millis(second.throttle_time) <= 69_000  # (8 - 1.1) / 0.1 s
    assert grow.results[0].error_code == ErrorCode.throttling_quota_exceeded
    assert delete.responses[0].error_code == ErrorCode.throttling_quota_exceeded
    assert old_first.topics[0].error_code == ErrorCode.none and to_millis(old_first.throttle_time) > 60_000
    assert old_second.topics[0].error_code == ErrorCode.none and to_millis(old_second.throttle_time) > 60_000
    assert other.topics[0].error_code == ErrorCode.none and to_millis(other.throttle_time) == 0
