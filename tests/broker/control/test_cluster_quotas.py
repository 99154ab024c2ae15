"""Client quotas under a controller are cluster metadata: set through one broker, described and enforced by another.

A real controller service and three in-process brokers on 127.0.0.1 (tests/broker/conftest.py's
`cluster`). AlterClientQuotas goes to broker 1, which forwards it to the controller; broker 2 gets
it with the metadata image, answers DescribeClientQuotas with it and throttles a producer over it
(the Produce answer's throttle_time_ms), while another client id on broker 2 is not throttled.
Asserted on the throttle the broker reports, never on wall time.
"""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.testing.broker import alter_client_quotas_request as alter
from tinystream.testing.broker import describe_client_quotas_request as describe
from tinystream.testing.broker import now_batch, produce_request
from tinystream.testing.waiting import wait_until_async

QUOTA = 1000  # bytes/s: one 50 kB batch is far over it
RECORD = b"x" * 50_000


def described(reply) -> dict[tuple, dict[str, float]]:
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in reply.entries}


async def test_a_quota_set_through_one_broker_is_described_and_enforced_by_another(cluster):
    await cluster.admin.create_topic("quota-t", replica_assignment=[[2]])  # broker 2 leads it
    await wait_until_async(lambda: (p := cluster.replica(2, "quota-t", 0)) is not None and p.is_leader,
                           what="broker 2 leading quota-t-0")
    on_1 = await cluster.client(1)
    reply = await on_1.request(alter(([("client-id", "noisy")], [("producer_byte_rate", float(QUOTA), False)])))
    assert [e.error_code for e in reply.entries] == [ErrorCode.none], reply
    image = (await cluster.admin.metadata()).image
    assert image["client_quotas"] == [{"entity": {"client-id": "noisy"}, "values": {"producer_byte_rate": 1000.0}}]

    on_2 = await cluster.client(2)
    await wait_until_async(lambda: cluster.brokers[2].ctx.quotas.book.entries, what="broker 2 applying the quota")
    reply = await on_2.request(describe([("client-id", 0, "noisy")]))
    assert reply.error_code == ErrorCode.none
    assert described(reply) == {(("client-id", "noisy"),): {"producer_byte_rate": 1000.0}}

    info = cluster.brokers[2].info
    noisy = await KafkaClient.connect(info.host, info.port, client_id="noisy")
    quiet = await KafkaClient.connect(info.host, info.port, client_id="quiet")
    try:
        first = await noisy.request(produce_request("quota-t", 0, now_batch([(None, RECORD)])))
        assert first.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert first.throttle_time.total_seconds() > 0, first  # 50 kB against 1000 B/s
        other = await quiet.request(produce_request("quota-t", 0, now_batch([(None, RECORD)])))
        assert other.throttle_time.total_seconds() == 0, other
    finally:
        await noisy.close()
        await quiet.close()


async def test_removing_a_quota_through_one_broker_removes_it_everywhere(cluster):
    on_3 = await cluster.client(3)
    reply = await on_3.request(alter(([("user", None)], [("consumer_byte_rate", 5000.0, False)])))
    assert [e.error_code for e in reply.entries] == [ErrorCode.none], reply
    await wait_until_async(lambda: all(b.ctx.quotas.book.entries for b in cluster.brokers.values()),
                           what="every broker applying the quota")
    reply = await on_3.request(alter(([("user", None)], [("consumer_byte_rate", 0.0, True)])))
    assert [e.error_code for e in reply.entries] == [ErrorCode.none], reply
    await wait_until_async(lambda: not any(b.ctx.quotas.book.entries for b in cluster.brokers.values()),
                           what="every broker dropping the quota")
    assert "client_quotas" not in (await cluster.admin.metadata()).image
    on_1 = await cluster.client(1)
    assert described(await on_1.request(describe())) == {}


async def test_a_bad_quota_is_refused_by_the_broker_and_never_reaches_the_controller(cluster):
    on_1 = await cluster.client(1)
    before = (await cluster.admin.metadata()).image["version"]
    reply = await on_1.request(alter(([("user", "a")], [("producer_byte_rate", -1.0, False)]),
                                     ([("user", "b")], [("producer_byte_rate", 10.0, False)])))
    assert [e.error_code for e in reply.entries] == [ErrorCode.invalid_request, ErrorCode.none]
    image = (await cluster.admin.metadata()).image
    assert image["version"] == before + 1 and [q["entity"] for q in image["client_quotas"]] == [{"user": "b"}]
    assert not list(cluster.tmp_path.rglob("quotas.json"))  # under a controller no broker keeps a file


async def test_validate_only_through_a_broker_checks_with_the_controller_and_stores_nothing(cluster):
    on_2 = await cluster.client(2)
    before = (await cluster.admin.metadata()).image["version"]
    reply = await on_2.request(alter(([("user", "a")], [("request_percentage", 30.0, False)]), validate_only=True))
    assert [e.error_code for e in reply.entries] == [ErrorCode.none], reply
    image = (await cluster.admin.metadata()).image
    assert image["version"] == before and "client_quotas" not in image
