"""AlterClientQuotas / DescribeClientQuotas over a real socket: errors, validate_only, a restart keeps them.

(kafka-configs.sh against both brokers: tests/compat/test_client_quotas.py; a caller without
ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster: tests/broker/security/test_acl_handlers.py REFUSALS.)
"""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.testing.broker import BrokerThread, test_settings
from tinystream.testing.broker import alter_client_quotas_request as alter
from tinystream.testing.broker import describe_client_quotas_request as describe


def described(reply) -> dict:
    assert reply.error_code == ErrorCode.none, reply
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in reply.entries}


def test_alter_describe_errors_validate_only_and_restart(tmp_path):
    broker = BrokerThread(test_settings(tmp_path))
    broker.start()

    async def session(steps):
        client = await KafkaClient.connect(broker.info.host, broker.info.port)
        try:
            return [await client.request(s) for s in steps]
        finally:
            await client.close()

    try:
        replies = broker.call(lambda _b: session([
            alter(([("client-id", "app")], [("producer_byte_rate", 1024.0, False)]),
                  ([("user", "alice"), ("client-id", None)], [("consumer_byte_rate", 2048.0, False)]),
                  ([("user", None)], [("request_percentage", 50.0, False)]), version=0),
            alter(([("client-id", "bad")], [("no_such_key", 1.0, False)]),
                  ([("client-id", "bad")], [("producer_byte_rate", -1.0, False)]),
                  ([("client-id", "bad2")], [("producer_byte_rate", 1.5, False)]),
                  ([("ip", "1.2.3.4")], [("producer_byte_rate", 1.0, False)]),
                  ([("user", "x"), ("user", "y")], [("producer_byte_rate", 1.0, False)])),
            alter(([("client-id", "checked")], [("producer_byte_rate", 4096.0, False)]), validate_only=True),
            describe(),
            describe([("client-id", 0, "app")], strict=True, version=0),
            describe([("user", 1, None)], strict=True),
            describe([("client-id", 0, None)]),
        ]))
        ok, bad, validated, everything, app, default_user, broken = replies
        assert [e.error_code for e in ok.entries] == [ErrorCode.none] * 3
        assert [e.error_code for e in bad.entries] == [ErrorCode.invalid_request] * 5
        assert "Invalid configuration key no_such_key" in bad.entries[0].error_message
        assert [e.error_code for e in validated.entries] == [ErrorCode.none]
        expected = {(("client-id", "app"),): {"producer_byte_rate": 1024.0},
                    (("user", "alice"), ("client-id", None)): {"consumer_byte_rate": 2048.0},
                    (("user", None),): {"request_percentage": 50.0}}
        assert described(everything) == expected  # nothing of the refused or validate_only entries
        assert described(app) == {(("client-id", "app"),): {"producer_byte_rate": 1024.0}}
        assert described(default_user) == {(("user", None),): {"request_percentage": 50.0}}
        assert broken.error_code == ErrorCode.invalid_request

        broker.restart()
        removed, after = broker.call(lambda _b: session([
            alter(([("client-id", "app")], [("producer_byte_rate", 0.0, True)])), describe()]))
        assert [e.error_code for e in removed.entries] == [ErrorCode.none]
        expected.pop((("client-id", "app"),))
        assert described(after) == expected  # the rest survived the restart
    finally:
        broker.stop()
