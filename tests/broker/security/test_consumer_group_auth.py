"""Who may call ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848): an authenticated client of a
SASL listener may; a client that has not logged in may not (the connection closes, no group appears)."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from tinystream.broker.protocol.client import KafkaClient, SaslLogin
from tinystream.broker.protocol.codec import millis
from tinystream.testing.broker import BrokerThread, request, sasl_ssl_settings

PASSWORD = "bob-secret"


def heartbeat(group: str):
    return request(68, 1, group_id=group, member_id="m-1", member_epoch=0, instance_id=None, rack_id=None,
                   rebalance_timeout=millis(30_000), subscribed_topic_names=("t",), subscribed_topic_regex=None,
                   server_assignor=None, topic_partitions=())


async def test_only_an_authenticated_client_joins_or_describes(tmp_path):
    pytest.importorskip("trustme")
    settings, truststore = sasl_ssl_settings(tmp_path / "sasl", users={"bob": PASSWORD})
    with BrokerThread(settings) as broker:
        host, port = broker.info.host, broker.info.port
        context = ssl.create_default_context(cafile=str(truststore))
        anonymous = await KafkaClient.connect(host, port, ssl_context=context)
        with pytest.raises((ConnectionError, asyncio.TimeoutError)):
            await anonymous.request(heartbeat("sneaky"), timeout=5)
        await anonymous.close()
        anonymous = await KafkaClient.connect(host, port, ssl_context=context)
        with pytest.raises((ConnectionError, asyncio.TimeoutError)):
            await anonymous.request(request(69, 1, group_ids=("sneaky",), include_authorized_operations=False),
                                    timeout=5)
        await anonymous.close()
        assert broker.broker.groups.coordinator.consumer_group("sneaky") is None

        bob = await KafkaClient.connect(host, port, ssl_context=context, sasl=SaslLogin("SCRAM-SHA-512", "bob", PASSWORD))
        try:
            await bob.request(request(10, 3, key="legit", key_type=0))
            for _ in range(100):
                answer = await bob.request(heartbeat("legit"))
                if answer.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS while __consumer_offsets opens
                    break
                await asyncio.sleep(0.05)
            assert (answer.error_code, answer.member_epoch) == (0, 1)
            described = await bob.request(request(69, 1, group_ids=("legit",), include_authorized_operations=False))
            assert [m.member_id for m in described.groups[0].members] == ["m-1"]
        finally:
            await bob.close()
